package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Retention is how long the store keeps what the statement path writes:
// logbook entries and the rows of settled requests.
type Retention struct {
	// Retain keeps everything younger than this. Zero keeps everything.
	Retain time.Duration
	// ArchiveDir, when set, receives each pruned range of entries first
	// (logbook.Prune).
	ArchiveDir string
	// Step caps the entries one prune removes (logbook.DefaultPruneStep).
	Step int64
}

// openMargin keeps the entries of an open request (waiting, running,
// deciding) clear of a prune: nothing stamped later than this before the
// oldest open request's creation is pruned. Entries are stamped when they
// commit, after their request was created; the margin covers clocks of
// several nodes on one store that disagree.
const openMargin = time.Hour

// executedTextFresh is how long an executed text, once logged in full,
// is named by its hash alone (executedOnce). A prune carries the texts
// logged this close before its cut (carryTexts).
const executedTextFresh = 10 * time.Minute

// clockSkew is how far the clocks of nodes sharing a store may disagree,
// for carryTexts.
const clockSkew = 5 * time.Minute

// openStatuses are the statuses a request can still leave.
func openStatuses() []store.RequestStatus {
	var out []store.RequestStatus
	for s := range transitions {
		if s != StatusNew {
			out = append(out, store.RequestStatus(s))
		}
	}
	slices.Sort(out)
	return out
}

// finalStatuses are the statuses a request never leaves: those the
// transition table moves to and never from.
func finalStatuses() []store.RequestStatus {
	var out []store.RequestStatus
	for _, tos := range transitions {
		for _, s := range tos {
			if Final(s) && !slices.Contains(out, store.RequestStatus(s)) {
				out = append(out, store.RequestStatus(s))
			}
		}
	}
	slices.Sort(out)
	return out
}

// Pruned is what one Prune removed.
type Pruned struct {
	Entries  int64 // logbook entries
	Requests int64 // rows of settled requests
	Receipts int64 // receipts in the targets (pilot.Settler.PruneReceipts)
	// Held is the longest any one step held the store's write lock.
	Held time.Duration
}

// Prune removes what r allows: the logbook's entries older than r.Retain
// (through signed checkpoints, each prune recorded in the chain; see
// logbook.Prune) and, with them, the rows of the settled requests they
// decided; then the targets' receipts as old (each Pilot keeps a day's
// whatever it is asked: pilot.ReceiptFloor). Nothing of a request still
// open is removed, whatever its age: its entries, the entries after them
// and its receipt. It prunes in steps until nothing more is old enough.
func (l *Ledger) Prune(ctx context.Context, r Retention) (Pruned, error) {
	var out Pruned
	if r.Retain <= 0 {
		return out, nil
	}
	before := l.cfg.Clock().Add(-r.Retain)
	// An open request's row may still be in the logbook's journal.
	if err := l.visible(ctx); err != nil {
		return out, fmt.Errorf("ledger: prune: %w", err)
	}
	oldest, err := l.rq.OldestOf(ctx, openStatuses())
	if err != nil {
		return out, fmt.Errorf("ledger: prune: %w", err)
	}
	if oldest > 0 {
		if open := time.Unix(0, oldest).Add(-openMargin); open.Before(before) {
			before = open
		}
	}
	for {
		var rows int64
		p, err := l.lb.Prune(ctx, logbook.Prune{Before: before, Step: r.Step, ArchiveDir: r.ArchiveDir,
			Carry: l.carryTexts,
			With: func(ctx context.Context, tx *sql.Tx, through int64) error {
				rows, err = l.rq.DeletePruned(ctx, tx, through, finalStatuses())
				return err
			}})
		if err != nil {
			return out, fmt.Errorf("ledger: %w", err)
		}
		if p.Through == 0 {
			break
		}
		out.Entries += p.Through - p.From + 1
		out.Requests += rows
		out.Held = max(out.Held, p.Held)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(l.cfg.Targets)) {
		n, err := l.cfg.Targets[name].PruneReceipts(ctx, before)
		out.Receipts += n
		if err != nil {
			errs = append(errs, fmt.Errorf("ledger: prune receipts of %s: %w", name, err))
		}
	}
	return out, errors.Join(errs...)
}

// textSubject is the subject under which an execution entry that names
// its executed text by hash alone is indexed (executedOnce).
const textSubject = "executed_text"

// carryTexts is what a prune through `through` must carry so that every
// execution entry it keeps can still be read whole: the executed texts
// that a kept entry names by hash alone (indexed under textSubject) and
// that only removed entries hold in full. A text is named by hash for
// executedTextFresh after it was logged in full, so only the texts the
// removed range logged that close to the cut (clockSkew more for nodes
// whose clocks differ) can be; each is carried if a kept entry names it.
// Nothing is carried from earlier prune entries: every entry that could
// name one of their texts is older than they are.
func (l *Ledger) carryTexts(ctx context.Context, through int64) (map[string]any, error) {
	cut, err := l.lb.Get(ctx, through)
	if err != nil {
		return nil, err
	}
	mark, _, err := l.lb.PruneMark(ctx)
	if err != nil {
		return nil, err
	}
	since := cut.Time.Add(-executedTextFresh - clockSkew)
	full := map[string]string{}
	err = l.lb.Iterate(ctx, logbook.Query{From: mark + 1, Through: through, Kind: logbook.KindExecution}, func(e logbook.Entry) error {
		if !e.Time.Before(since) {
			if sum, text := executedOf(e.Payload); sum != "" && text != "" {
				full[sum] = text
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	texts := map[string]any{}
	for sum, text := range full {
		named, err := l.lb.Find(ctx, logbook.Query{From: through + 1, SubjectKey: textSubject, SubjectValue: sum, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(named) > 0 {
			texts[sum] = text
		}
	}
	if len(texts) == 0 {
		return nil, nil
	}
	return map[string]any{"executed_texts": texts}, nil
}

// executedOf reads an execution entry's executed text and its hash.
func executedOf(payload []byte) (sum, text string) {
	var p struct {
		SQL string `json:"executed_sql"`
		Sum string `json:"executed_sql_sha256"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return "", ""
	}
	return p.Sum, p.SQL
}

// carriedTexts reads the executed texts a logbook.pruned entry carries.
func carriedTexts(payload []byte) map[string]string {
	var p struct {
		Texts map[string]string `json:"executed_texts"`
	}
	_ = json.Unmarshal(payload, &p)
	return p.Texts
}
