package logbook

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// KindPruned records, in the chain, that the entries through a signed
// checkpoint are removed: its payload names the checkpoint's size
// ("through") and the chain's hash there ("head"). It is appended before
// anything is deleted, so every prune is itself an entry, covered by the
// hash chain and by every checkpoint after it.
const KindPruned Kind = "logbook.pruned"

// DefaultPruneStep is the most entries one Prune removes: a prune holds the
// store's write lock while it deletes, so a long history goes in steps.
const DefaultPruneStep = 5_000

// Prune says what Prune may remove.
type Prune struct {
	// Before: only entries stamped before it are removed. Prune cuts at the
	// newest signed checkpoint whose entry is older than Before, so a few
	// older entries past that checkpoint stay until the next one.
	Before time.Time
	// Step caps the entries removed by one call (DefaultPruneStep if 0),
	// unless no checkpoint falls within it: then the call goes to the
	// nearest one.
	Step int64
	// ArchiveDir, when set, receives the removed entries first, in Export's
	// format (logbook-<from>-<through>.jsonl), written and synced before
	// anything is deleted.
	ArchiveDir string
	// Carry, when set, is called with the cut (the last seq removed) before
	// the prune entry is appended; what it returns is carried in that
	// entry's payload: what entries that stay need from entries that go.
	Carry func(ctx context.Context, through int64) (map[string]any, error)
	// With, when set, runs in the transaction that deletes, before the
	// entries and their subject rows go (so it can still read them):
	// derived state about the removed entries, removed with them.
	With func(ctx context.Context, tx *sql.Tx, through int64) error
}

// Pruned is what one Prune removed: entries From..Through, the chain's
// head at Through. A zero Through removed nothing.
type Pruned struct {
	From, Through int64
	Head          string
	Entry         int64  // the seq of its logbook.pruned entry
	Archive       string // the archive file, when one was written
	// Held is how long the deleting transaction took: while it runs, the
	// store takes no other write.
	Held time.Duration
}

// PruneMark returns the prune mark: the entries 1..through are removed and
// head is the chain's hash at through (0 and ZeroHash when nothing is).
func (l *Logbook) PruneMark(ctx context.Context) (through int64, head string, err error) {
	through, h, err := pruneMark(ctx, l.st.ReadDB())
	if err != nil {
		return 0, "", fmt.Errorf("logbook: prune mark: %w", err)
	}
	return through, hex.EncodeToString(h[:]), nil
}

func pruneMark(ctx context.Context, q querier) (int64, [32]byte, error) {
	var through int64
	var raw []byte
	var head [32]byte
	if err := q.QueryRowContext(ctx, "SELECT through, head FROM logbook_pruned WHERE id = 1").Scan(&through, &raw); err != nil {
		return 0, head, err
	}
	if len(raw) != 32 {
		return 0, head, fmt.Errorf("the prune mark's head is %d bytes, not 32", len(raw))
	}
	copy(head[:], raw)
	return through, head, nil
}

// Prune removes the oldest entries the retention p allows: through the
// newest stored checkpoint at or below the subject index's watermark whose
// entry is older than p.Before, at most p.Step entries past the current
// mark. It appends a logbook.pruned entry naming that checkpoint first
// (Append: the writer must be running), then, in one transaction, runs
// p.With, moves the mark and deletes the entries and their subject rows.
// Checkpoints are kept: they are small, and Verify checks their signatures.
// Prune returns a zero Pruned when nothing is old enough.
//
// Several nodes on one store may prune at once: each appends its entry,
// and only the first to move the mark deletes.
func (l *Logbook) Prune(ctx context.Context, p Prune) (Pruned, error) {
	step := p.Step
	if step <= 0 {
		step = DefaultPruneStep
	}
	mark, _, err := pruneMark(ctx, l.st.ReadDB())
	if err != nil {
		return Pruned{}, fmt.Errorf("logbook: prune: %w", err)
	}
	var cut int64
	var cpHash string
	var entryHash []byte
	// The newest checkpoint within a step; past it only when there is none
	// (checkpoints further apart than a step): the nearest one.
	const cuts = `SELECT c.size, c.hash, e.hash FROM logbook_checkpoints c
		JOIN logbook_entries e ON e.seq = c.size
		WHERE e.time_ns < ? AND c.size > ? AND c.size <= ?
		AND c.size <= (SELECT indexed_through FROM logbook_index WHERE id = 1)
		ORDER BY c.size `
	err = l.st.ReadDB().QueryRowContext(ctx, l.st.SQL(cuts+"DESC LIMIT 1"), p.Before.UnixNano(), mark, mark+step).Scan(&cut, &cpHash, &entryHash)
	if errors.Is(err, sql.ErrNoRows) {
		err = l.st.ReadDB().QueryRowContext(ctx, l.st.SQL(cuts+"LIMIT 1"), p.Before.UnixNano(), mark, int64(math.MaxInt64)).Scan(&cut, &cpHash, &entryHash)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Pruned{}, nil
	case err != nil:
		return Pruned{}, fmt.Errorf("logbook: prune: %w", err)
	}
	// The checkpoint's stored head must be the chain's: a prune never
	// rests on a checkpoint that Verify would refuse.
	if cpHash != hex.EncodeToString(entryHash) {
		return Pruned{}, fmt.Errorf("logbook: prune: checkpoint %d's hash differs from entry %d's: verify the logbook", cut, cut)
	}
	out := Pruned{From: mark + 1, Through: cut, Head: cpHash}
	if p.ArchiveDir != "" {
		if out.Archive, err = l.archive(ctx, p.ArchiveDir, mark+1, cut); err != nil {
			return Pruned{}, fmt.Errorf("logbook: prune: archive: %w", err)
		}
	}
	payload := map[string]any{"through": cut, "head": cpHash, "before": p.Before.UTC().Format(time.RFC3339Nano)}
	if p.Carry != nil {
		carried, err := p.Carry(ctx, cut)
		if err != nil {
			return Pruned{}, fmt.Errorf("logbook: prune: %w", err)
		}
		for k, v := range carried {
			if _, taken := payload[k]; !taken {
				payload[k] = v
			}
		}
	}
	e, err := l.Append(ctx, Record{Kind: KindPruned, Subjects: map[string]string{}, Payload: payload})
	if err != nil {
		return Pruned{}, fmt.Errorf("logbook: prune: %w", err)
	}
	out.Entry = e.Seq
	// The pruned entry in the store before anything goes: the cut may be
	// the store's head, and the entry may have committed in the journal.
	if err := l.Visible(ctx); err != nil {
		return Pruned{}, fmt.Errorf("logbook: prune: %w", err)
	}
	head, _ := hex.DecodeString(cpHash)
	var moved bool
	start := time.Now()
	err = l.st.Tx(ctx, func(tx *sql.Tx) error {
		now, _, err := pruneMark(ctx, tx)
		if err != nil || now >= cut {
			return err // another node pruned this far first
		}
		if p.With != nil {
			if err := p.With(ctx, tx, cut); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, l.st.SQL("UPDATE logbook_pruned SET through = ?, head = ?, time_ns = ? WHERE id = 1"),
			cut, head, e.Time.UnixNano()); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, l.st.SQL("DELETE FROM logbook_subjects WHERE seq <= ?"), cut); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, l.st.SQL("DELETE FROM logbook_entries WHERE seq <= ?"), cut); err != nil {
			return err
		}
		moved = true
		return nil
	})
	if err != nil {
		return Pruned{}, fmt.Errorf("logbook: prune: %w", err)
	}
	if !moved {
		return Pruned{Entry: out.Entry}, nil
	}
	out.Held = time.Since(start)
	l.log.Info("logbook pruned", "from", out.From, "through", cut, "entry", e.Seq, "archive", out.Archive, "held", out.Held)
	return out, nil
}

// archive writes entries from..through to dir in Export's format, synced,
// under a name that says which.
func (l *Logbook) archive(ctx context.Context, dir string, from, through int64) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := filepath.Join(dir, fmt.Sprintf("logbook-%012d-%012d.jsonl", from, through))
	f, err := os.CreateTemp(dir, ".archive-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	n, err := l.exportRange(ctx, f, from, through)
	if err == nil && n != through-from+1 {
		err = fmt.Errorf("entries %d to %d: read %d", from, through, n)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err == nil {
		err = syncDir(dir)
	}
	return name, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
