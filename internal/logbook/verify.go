package logbook

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/mod/sumdb/note"
)

// Problem names what Verify found wrong.
type Problem string

// Problems, in the words Verify reports them.
const (
	// ProblemChanged: the entry's stored fields do not hash to its stored
	// hash: its content, time, kind, subjects or prev hash was edited.
	ProblemChanged Problem = "changed"
	// ProblemReordered: the entry hashes correctly under a different seq:
	// it was moved (seqs swapped or renumbered).
	ProblemReordered Problem = "reordered"
	// ProblemGap: entries are missing before this seq (deleted).
	ProblemGap Problem = "gap"
	// ProblemBrokenLink: the entry is self-consistent, but the next entry's
	// prev hash does not name it: this entry was rewritten with a fresh
	// hash (or its successor was forged).
	ProblemBrokenLink Problem = "broken-link"
	// ProblemMalformed: a stored field is not in the form the logbook
	// writes (e.g. a hash that is not 64 hex digits, a seq below 1).
	ProblemMalformed Problem = "malformed"
	// ProblemCheckpoint: a checkpoint's signature does not verify, its
	// stored fields disagree with its signed body, or the chain at its size
	// does not have the hash it signs (a forked or rewritten log).
	ProblemCheckpoint Problem = "checkpoint"
	// ProblemTruncated: a valid checkpoint signs more entries than the log
	// holds: the tail was deleted.
	ProblemTruncated Problem = "truncated"
	// ProblemUnrecordedPrune: the entries before the prune mark are gone,
	// but no logbook.pruned entry in the chain records that cut at that
	// head: they were deleted by something other than Prune.
	ProblemUnrecordedPrune Problem = "unrecorded-prune"
)

// Report is what Verify found. A tampered log is a Report with OK false, not
// an error; Verify's error is reserved for failing to read the store.
type Report struct {
	// OK is true when every check passed.
	OK bool
	// Entries is how many entries were checked and found intact.
	Entries int64
	// PrunedThrough is the prune mark: entries 1..PrunedThrough were
	// removed by retention (Prune), which a chained logbook.pruned entry
	// records and a checkpoint at that size signs; the chain is checked
	// from the entry after it.
	PrunedThrough int64
	// HeadSeq and HeadHash describe the last intact entry.
	HeadSeq  int64
	HeadHash string
	// Checkpoints is how many checkpoints (stored and external) verified
	// and matched the chain.
	Checkpoints int
	// SignedThrough is the largest seq covered by a checkpoint that
	// verified and matched: entries up to it are proven as signed, entries
	// after it only chain to it.
	SignedThrough int64
	// Unsigned is how many intact entries follow SignedThrough: they chain
	// to it, but no checkpoint signs them.
	Unsigned int64
	// MaxUnsigned is the longest unsigned tail the writer leaves: the
	// logbook's CheckpointEvery. The writer signs a checkpoint in the same
	// transaction as the log's first batch and as the batch that brings the
	// tail to CheckpointEvery entries, so an intact log never has a longer
	// one, nor entries with no checkpoint.
	MaxUnsigned int64
	// TailTooLong is true, when OK, if the chain holds entries that no
	// checkpoint vouches for beyond what the writer leaves: entries but no
	// checkpoint at all, or more than MaxUnsigned entries after the last
	// one. That is what deleting checkpoints and rewriting the entries
	// after them (hashes recomputed) leaves behind; the chain alone cannot
	// tell such a tail from the real one. (A CheckpointEvery lowered since
	// the tail was written also shows here, until the next checkpoint.)
	TailTooLong bool
	// FirstBad is the first seq at which something is wrong, when !OK.
	FirstBad int64
	// Problem and Detail say what, when !OK.
	Problem Problem
	Detail  string
}

func (r Report) String() string {
	if !r.OK {
		return fmt.Sprintf("bad at seq %d: %s: %s (intact through %d, signed through %d)",
			r.FirstBad, r.Problem, r.Detail, r.HeadSeq, r.SignedThrough)
	}
	status, why := "ok", ""
	switch {
	case r.TailTooLong && r.SignedThrough == 0:
		status, why = "unsigned", ", and no checkpoint signs any entry"
	case r.TailTooLong:
		status, why = "unsigned tail", fmt.Sprintf(", more than the checkpoint interval (%d)", r.MaxUnsigned)
	}
	pruned := ""
	if r.PrunedThrough > 0 {
		pruned = fmt.Sprintf(" (entries 1 to %d pruned at a signed checkpoint)", r.PrunedThrough)
	}
	return fmt.Sprintf("%s: %d entries%s, head %d %s, %d checkpoints; signed through entry %d of %d; %d entries unsigned%s",
		status, r.Entries, pruned, r.HeadSeq, r.HeadHash, r.Checkpoints, r.SignedThrough, r.HeadSeq, r.Unsigned, why)
}

// cpCheck is one checkpoint to hold the chain against.
type cpCheck struct {
	src  string
	at   int64 // seq it applies to: signed size if the note opened, else the stored size
	head [32]byte
	err  error // why it is invalid on its own
}

// reorderWindow is how far from its position Verify looks for the seq a
// moved entry was written under. Only the classification depends on it; a
// moved entry is reported as bad at its position either way.
const reorderWindow = 64

// Verify checks the whole logbook, from one consistent snapshot: every
// entry's hash, every prev link, gapless seqs from 1, and every stored
// checkpoint — signature by v, stored fields against the signed body, and
// the signed hash against the chain at that size. external are checkpoints
// exported earlier (ReadCheckpoints) and kept elsewhere; they are held to the
// same checks, and one that signs more entries than the log now holds
// reveals a truncated log. The Report names the first bad seq, and says how
// much of the chain is signed: an intact chain whose unsigned tail is longer
// than the writer leaves is OK with TailTooLong set, for the caller to
// refuse.
func (l *Logbook) Verify(ctx context.Context, v note.Verifier, external ...Checkpoint) (Report, error) {
	if v == nil {
		return Report{}, fmt.Errorf("logbook: verify: nil verifier")
	}
	if err := l.Visible(ctx); err != nil {
		return Report{}, fmt.Errorf("logbook: verify: %w", err)
	}
	rep, ok, err := l.verifyParallel(ctx, v, external)
	if err != nil {
		return Report{}, fmt.Errorf("logbook: verify: %w", err)
	}
	if ok {
		return rep, nil
	}
	// The sequential walk is the authority: it runs when the fast path is
	// not worth it or found anything at all, and names the first bad seq.
	err = l.st.ReadTx(ctx, func(tx *sql.Tx) error {
		checks, err := l.loadChecks(ctx, tx, v, external)
		if err != nil {
			return err
		}
		mark, head, err := pruneMark(ctx, tx)
		if err != nil {
			return err
		}
		rep, err = l.walk(ctx, tx, checks, mark, head)
		return err
	})
	if err != nil {
		return Report{}, fmt.Errorf("logbook: verify: %w", err)
	}
	return rep, nil
}

// judgeTail fills in how much of rep's intact chain is unsigned, and
// whether that is more than the writer leaves.
func (l *Logbook) judgeTail(rep Report) Report {
	rep.Unsigned = max(rep.HeadSeq-rep.SignedThrough, 0)
	rep.MaxUnsigned = l.cfg.CheckpointEvery
	rep.TailTooLong = rep.OK && rep.HeadSeq > 0 && (rep.SignedThrough == 0 || rep.Unsigned > rep.MaxUnsigned)
	return rep
}

// loadChecks opens every stored and external checkpoint, sorted by the seq
// each applies to.
func (l *Logbook) loadChecks(ctx context.Context, tx *sql.Tx, v note.Verifier, external []Checkpoint) ([]cpCheck, error) {
	stored, err := loadCheckpoints(ctx, tx)
	if err != nil {
		return nil, err
	}
	checks := make([]cpCheck, 0, len(stored)+len(external))
	for _, cp := range stored {
		checks = append(checks, l.checkpointCheck(cp, v, fmt.Sprintf("stored checkpoint %d", cp.Size), true))
	}
	for i, cp := range external {
		checks = append(checks, l.checkpointCheck(cp, v, fmt.Sprintf("external checkpoint #%d (size %d)", i+1, cp.Size), false))
	}
	slices.SortStableFunc(checks, func(a, b cpCheck) int { return cmpInt64(a.at, b.at) })
	return checks, nil
}

// verifyParallel is Verify's fast path for a long, intact log: it splits
// 1..N into ranges checked at once on separate read connections (reading
// rows from SQLite is most of Verify's cost), then joins the ranges' ends.
// It checks everything the sequential walk checks, but reports only "all
// intact" (ok) or "look closer" (!ok), never a problem: any doubt hands over
// to the walk. Entries 1..N are append-only, so the ranges may come from
// different snapshots; a range that changed under it breaks a link.
func (l *Logbook) verifyParallel(ctx context.Context, v note.Verifier, external []Checkpoint) (Report, bool, error) {
	workers := min(l.verifyWorkers, l.st.ReadConns())
	var n, first, mark int64
	var markHead [32]byte
	var checks []cpCheck
	recorded := false
	err := l.st.ReadTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(seq), 0), COALESCE(MIN(seq), 1) FROM logbook_entries").Scan(&n, &first)
		if err != nil {
			return err
		}
		if mark, markHead, err = pruneMark(ctx, tx); err != nil {
			return err
		}
		if mark > 0 {
			if recorded, err = pruneRecorded(ctx, l.st.SQL, tx, mark, markHead); err != nil {
				return err
			}
		}
		checks, err = l.loadChecks(ctx, tx, v, external)
		return err
	})
	if err != nil {
		return Report{}, false, err
	}
	k := min(int64(workers), (n-mark)/l.verifySegment)
	if k < 2 || first != mark+1 || (mark > 0 && !recorded) {
		return Report{}, false, nil
	}
	// Checkpoints at or before the mark: each must verify, and one at the
	// mark must sign its head; the ranges hold the chain to the rest.
	below, atMark := 0, 0
	for _, c := range checks {
		if c.err != nil || c.at < 1 || c.at > n || (c.at == mark && c.head != markHead) {
			return Report{}, false, nil
		}
		if c.at <= mark {
			below++
		}
		if c.at == mark {
			atMark++
		}
	}
	if mark > 0 && (below == 0 || checks[below-1].at != mark) {
		return Report{}, false, nil
	}
	matched := len(checks) - below
	signed := mark
	if matched > 0 {
		signed = checks[len(checks)-1].at
	}
	checks = checks[below:]

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	segs := make([]segment, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		a, b := mark+1+i*(n-mark)/k, mark+(i+1)*(n-mark)/k
		lo, _ := slices.BinarySearchFunc(checks, a, func(c cpCheck, s int64) int { return cmpInt64(c.at, s) })
		hi, _ := slices.BinarySearchFunc(checks, b+1, func(c cpCheck, s int64) int { return cmpInt64(c.at, s) })
		wg.Go(func() {
			segs[i], errs[i] = l.verifyRange(pctx, a, b, checks[lo:hi])
			if errs[i] != nil || !segs[i].ok {
				cancel()
			}
		})
	}
	wg.Wait()
	last := markHead // zeros at mark 0: entry 1's prev
	for i := range segs {
		if !segs[i].ok || segs[i].firstPrev != last {
			return Report{}, false, nil // the walk will say what, or meet the error itself
		}
		last = segs[i].last
	}
	if err := errors.Join(errs...); err != nil {
		return Report{}, false, err
	}
	rep := Report{OK: true, Entries: n - mark, PrunedThrough: mark, HeadSeq: n, HeadHash: hex.EncodeToString(last[:]),
		Checkpoints: matched + atMark, SignedThrough: signed}
	return l.judgeTail(rep), true, nil
}

// segment is what verifyRange learned about a range a..b.
type segment struct {
	ok        bool     // every entry a..b present and intact, linked, and every checkpoint in the range matched
	firstPrev [32]byte // prev hash of entry a, to join with the range before
	last      [32]byte // hash of entry b
}

func (l *Logbook) verifyRange(ctx context.Context, a, b int64, checks []cpCheck) (segment, error) {
	var seg segment
	err := l.st.ReadTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, l.st.SQL("SELECT seq, time_ns, kind, subjects, payload, prev_hash, hash FROM logbook_entries WHERE seq BETWEEN ? AND ? ORDER BY seq"), a, b)
		if err != nil {
			return err
		}
		defer rows.Close()
		var (
			h                                         hasher
			prev, stored, chain                       [32]byte
			seq, ns                                   int64
			kind, subjects, payload, prevRaw, hashRaw sql.RawBytes
			next                                      int
		)
		want := a
		for rows.Next() {
			if err := rows.Scan(&seq, &ns, &kind, &subjects, &payload, &prevRaw, &hashRaw); err != nil {
				return err
			}
			if seq != want || len(prevRaw) != 32 || len(hashRaw) != 32 {
				return nil
			}
			copy(prev[:], prevRaw)
			copy(stored[:], hashRaw)
			switch {
			case seq == a:
				seg.firstPrev = prev
			case prev != chain:
				return nil
			}
			if h.sum(seq, ns, kind, subjects, payload, &prev) != stored {
				return nil
			}
			chain = stored
			for ; next < len(checks) && checks[next].at == seq; next++ {
				if checks[next].head != chain {
					return nil
				}
			}
			want++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		seg.ok = want == b+1 && next == len(checks)
		seg.last = chain
		return nil
	})
	return seg, err
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (l *Logbook) checkpointCheck(cp Checkpoint, v note.Verifier, src string, stored bool) cpCheck {
	c := cpCheck{src: src, at: cp.Size}
	size, head, err := openCheckpoint(cp, v, l.cfg.Origin)
	if err != nil {
		c.err = err
		return c
	}
	c.at, c.head = size, head
	// The stored columns are a convenience copy; they must agree with the
	// signed body. An external file's copies are checked the same way.
	if cp.Size != size {
		c.err = fmt.Errorf("size field %d, signed size %d", cp.Size, size)
	} else if cp.Hash != hex.EncodeToString(head[:]) && (stored || cp.Hash != "") {
		c.err = fmt.Errorf("hash field %q differs from the signed hash", cp.Hash)
	}
	return c
}

func (l *Logbook) walk(ctx context.Context, tx *sql.Tx, checks []cpCheck, mark int64, markHead [32]byte) (Report, error) {
	rep := Report{HeadSeq: mark, PrunedThrough: mark, SignedThrough: mark}
	chain := markHead // hash of the last intact entry (zeros before entry 1)
	finish := func() {
		rep.HeadHash = ZeroHash
		if rep.HeadSeq > 0 {
			rep.HeadHash = hex.EncodeToString(chain[:])
		}
	}
	fail := func(seq int64, p Problem, format string, args ...any) (Report, error) {
		finish()
		rep.FirstBad, rep.Problem, rep.Detail = seq, p, fmt.Sprintf(format, args...)
		return l.judgeTail(rep), nil
	}

	// The prune mark: every checkpoint at or before it must verify on its
	// own (the entries it signs are gone), and one at the mark must sign
	// the head the chain resumes from.
	next := 0 // index into checks
	markSigned := mark == 0
	for ; next < len(checks) && checks[next].at <= mark; next++ {
		c := checks[next]
		switch {
		case c.err != nil:
			return fail(c.at, ProblemCheckpoint, "%s: %v", c.src, c.err)
		case c.at == mark && c.head != markHead:
			return fail(mark, ProblemCheckpoint, "%s signs a different hash than the prune mark's head at %d", c.src, mark)
		case c.at == mark:
			markSigned = true
			rep.Checkpoints++
		}
	}
	if !markSigned {
		return fail(mark, ProblemCheckpoint, "the log is pruned through entry %d, but no valid checkpoint signs that entry", mark)
	}
	recorded := mark == 0

	rows, err := tx.QueryContext(ctx, "SELECT seq, time_ns, kind, subjects, payload, prev_hash, hash FROM logbook_entries ORDER BY seq")
	if err != nil {
		return rep, err
	}
	defer rows.Close()

	var (
		h                                         hasher
		prev, stored, before                      [32]byte // before: hash of the entry ahead of the last intact one
		seq, ns                                   int64
		kind, subjects, payload, prevRaw, hashRaw sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &ns, &kind, &subjects, &payload, &prevRaw, &hashRaw); err != nil {
			return rep, err
		}
		want := rep.HeadSeq + 1
		switch {
		case seq < want:
			return fail(seq, ProblemMalformed, "seq %d where %d was expected", seq, want)
		case seq > want:
			return fail(want, ProblemGap, "entries %d to %d are missing (deleted)", want, seq-1)
		}
		if len(prevRaw) != 32 || len(hashRaw) != 32 {
			return fail(seq, ProblemMalformed, "entry %d: prev_hash or hash is not 32 bytes", seq)
		}
		copy(prev[:], prevRaw)
		copy(stored[:], hashRaw)
		if sum := h.sum(seq, ns, kind, subjects, payload, &prev); sum != stored {
			for d := int64(1); d <= reorderWindow; d++ {
				for _, c := range []int64{seq - d, seq + d} {
					if c >= 1 && h.sum(c, ns, kind, subjects, payload, &prev) == stored {
						return fail(seq, ProblemReordered, "entry at seq %d was written as seq %d", seq, c)
					}
				}
			}
			return fail(seq, ProblemChanged, "entry %d does not match its hash: its content was changed", seq)
		}
		if prev != chain {
			switch {
			case seq == 1:
				return fail(1, ProblemBrokenLink, "entry 1 has prev_hash %x, want zeros", prev)
			case seq-1 <= rep.SignedThrough:
				// The predecessor is proven by a checkpoint: this one is forged.
				return fail(seq, ProblemBrokenLink, "entry %d's prev_hash does not name entry %d, which a checkpoint proves: entry %d was forged", seq, seq-1, seq)
			}
			// Blame the predecessor: it is not what its successor committed to.
			rep.Entries--
			rep.HeadSeq--
			chain = before
			return fail(seq-1, ProblemBrokenLink, "entry %d's prev_hash does not name entry %d: entry %d was rewritten (or %d forged)", seq, seq-1, seq-1, seq)
		}
		before, chain = chain, stored
		rep.Entries++
		rep.HeadSeq = seq
		if !recorded && Kind(kind) == KindPruned {
			recorded = prunes(payload, mark, markHead)
		}

		// Every checkpoint at this size must hold before any of them counts.
		matched := 0
		for ; next < len(checks) && checks[next].at <= seq; next++ {
			c := checks[next]
			switch {
			case c.err != nil:
				return fail(c.at, ProblemCheckpoint, "%s: %v", c.src, c.err)
			case c.at < seq:
				// Only possible for at < 1: a stored size column below 1.
				return fail(c.at, ProblemCheckpoint, "%s: size %d", c.src, c.at)
			case c.head != chain:
				return fail(seq, ProblemCheckpoint,
					"%s signs a different chain at size %d: entries after seq %d were rewritten (or the checkpoint forged)",
					c.src, seq, rep.SignedThrough)
			}
			matched++
		}
		if matched > 0 {
			rep.Checkpoints += matched
			rep.SignedThrough = seq
		}
	}
	if err := rows.Err(); err != nil {
		return rep, err
	}

	// Checkpoints past the end of the log.
	var invalid *cpCheck
	for i := next; i < len(checks); i++ {
		c := checks[i]
		if c.err == nil {
			return fail(rep.HeadSeq+1, ProblemTruncated,
				"%s signs %d entries but the log ends at %d: entries %d to %d were deleted",
				c.src, c.at, rep.HeadSeq, rep.HeadSeq+1, c.at)
		}
		if invalid == nil {
			invalid = &checks[i]
		}
	}
	if invalid != nil {
		return fail(invalid.at, ProblemCheckpoint, "%s: %v", invalid.src, invalid.err)
	}
	if !recorded {
		return fail(mark, ProblemUnrecordedPrune,
			"entries 1 to %d are gone, but no logbook.pruned entry records a prune at that checkpoint: they were deleted", mark)
	}
	finish()
	rep.OK = true
	return l.judgeTail(rep), nil
}

// prunes reports whether a logbook.pruned entry's payload records the cut
// at mark with head.
func prunes(payload []byte, mark int64, head [32]byte) bool {
	var p struct {
		Through int64  `json:"through"`
		Head    string `json:"head"`
	}
	return json.Unmarshal(payload, &p) == nil && p.Through == mark && p.Head == hex.EncodeToString(head[:])
}

// pruneRecorded reports whether a logbook.pruned entry after the mark
// records it (Verify's fast path; the entries' hashes are checked apart).
func pruneRecorded(ctx context.Context, dialect func(string) string, tx *sql.Tx, mark int64, head [32]byte) (bool, error) {
	rows, err := tx.QueryContext(ctx, dialect("SELECT payload FROM logbook_entries WHERE kind = ? AND seq > ?"), string(KindPruned), mark)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		var payload []byte
		if err := rows.Scan(&payload); err != nil {
			return false, err
		}
		if prunes(payload, mark, head) {
			return true, nil
		}
	}
	return false, rows.Err()
}
