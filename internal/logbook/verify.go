package logbook

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"

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
)

// Report is what Verify found. A tampered log is a Report with OK false, not
// an error; Verify's error is reserved for failing to read the store.
type Report struct {
	// OK is true when every check passed.
	OK bool
	// Entries is how many entries were checked and found intact.
	Entries int64
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
	// FirstBad is the first seq at which something is wrong, when !OK.
	FirstBad int64
	// Problem and Detail say what, when !OK.
	Problem Problem
	Detail  string
}

func (r Report) String() string {
	if r.OK {
		return fmt.Sprintf("ok: %d entries, head %d %s, %d checkpoints, signed through %d",
			r.Entries, r.HeadSeq, r.HeadHash, r.Checkpoints, r.SignedThrough)
	}
	return fmt.Sprintf("bad at seq %d: %s: %s (intact through %d, signed through %d)",
		r.FirstBad, r.Problem, r.Detail, r.HeadSeq, r.SignedThrough)
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
// reveals a truncated log. The Report names the first bad seq.
func (l *Logbook) Verify(ctx context.Context, v note.Verifier, external ...Checkpoint) (Report, error) {
	if v == nil {
		return Report{}, fmt.Errorf("logbook: verify: nil verifier")
	}
	var rep Report
	err := l.st.ReadTx(ctx, func(tx *sql.Tx) error {
		stored, err := loadCheckpoints(ctx, tx)
		if err != nil {
			return err
		}
		checks := make([]cpCheck, 0, len(stored)+len(external))
		for _, cp := range stored {
			checks = append(checks, l.checkpointCheck(cp, v, fmt.Sprintf("stored checkpoint %d", cp.Size), true))
		}
		for i, cp := range external {
			checks = append(checks, l.checkpointCheck(cp, v, fmt.Sprintf("external checkpoint #%d (size %d)", i+1, cp.Size), false))
		}
		slices.SortStableFunc(checks, func(a, b cpCheck) int { return cmpInt64(a.at, b.at) })
		rep, err = l.walk(ctx, tx, checks)
		return err
	})
	if err != nil {
		return Report{}, fmt.Errorf("logbook: verify: %w", err)
	}
	return rep, nil
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

func (l *Logbook) walk(ctx context.Context, tx *sql.Tx, checks []cpCheck) (Report, error) {
	var rep Report
	var chain [32]byte // hash of the last intact entry
	finish := func() {
		rep.HeadHash = ZeroHash
		if rep.HeadSeq > 0 {
			rep.HeadHash = hex.EncodeToString(chain[:])
		}
	}
	fail := func(seq int64, p Problem, format string, args ...any) (Report, error) {
		finish()
		rep.FirstBad, rep.Problem, rep.Detail = seq, p, fmt.Sprintf(format, args...)
		return rep, nil
	}

	rows, err := tx.QueryContext(ctx, "SELECT seq, time_ns, kind, subjects, payload, prev_hash, hash FROM logbook_entries ORDER BY seq")
	if err != nil {
		return rep, err
	}
	defer rows.Close()

	var (
		h                                         hasher
		prev, stored                              [32]byte
		seq, ns                                   int64
		kind, subjects, payload, prevHex, hashHex sql.RawBytes
		next                                      int // index into checks
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &ns, &kind, &subjects, &payload, &prevHex, &hashHex); err != nil {
			return rep, err
		}
		want := rep.HeadSeq + 1
		switch {
		case seq < want:
			return fail(seq, ProblemMalformed, "seq %d where %d was expected", seq, want)
		case seq > want:
			return fail(want, ProblemGap, "entries %d to %d are missing (deleted)", want, seq-1)
		}
		if decodeHashBytes(&prev, prevHex) != nil || decodeHashBytes(&stored, hashHex) != nil {
			return fail(seq, ProblemMalformed, "entry %d: prev_hash or hash is not 64 lower-case hex digits", seq)
		}
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
			if seq == 1 {
				return fail(1, ProblemBrokenLink, "entry 1 has prev_hash %s, want zeros", prevHex)
			}
			return fail(seq-1, ProblemBrokenLink, "entry %d's prev_hash does not name entry %d: entry %d was rewritten (or %d forged)", seq, seq-1, seq-1, seq)
		}
		chain = stored
		rep.Entries++
		rep.HeadSeq = seq

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
			rep.Checkpoints++
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
	finish()
	rep.OK = true
	return rep, nil
}
