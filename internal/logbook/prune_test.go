package logbook

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// prunable appends n entries, one per batch, lets the index catch up and
// returns them with the stored checkpoints' sizes.
func prunable(t *testing.T, f *fixture, n int) ([]Entry, []int64) {
	t.Helper()
	var es []Entry
	for i := range n {
		es = append(es, f.append(Record{Kind: "decision", Subjects: map[string]string{"request": fmt.Sprintf("r-%d", i+1)},
			Payload: map[string]any{"i": i + 1}}))
	}
	if err := f.lb.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	cps, err := f.lb.Checkpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sizes := make([]int64, len(cps))
	for i, cp := range cps {
		sizes[i] = cp.Size
	}
	return es, sizes
}

// lastCheckpointBefore is the largest checkpoint size below seq.
func lastCheckpointBefore(sizes []int64, seq int64) int64 {
	var best int64
	for _, s := range sizes {
		if s < seq {
			best = s
		}
	}
	return best
}

func TestPruneKeepsTheChainVerifiable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{CheckpointEvery: 10, CheckpointInterval: time.Hour})
	es, sizes := prunable(t, f, 95)
	cut := lastCheckpointBefore(sizes, 45)
	if cut < 10 {
		t.Fatalf("no checkpoint to cut at below 45: %v", sizes)
	}
	dir := t.TempDir()
	var withThrough int64
	p, err := f.lb.Prune(ctx, Prune{Before: es[44].Time, ArchiveDir: dir,
		Carry: func(_ context.Context, through int64) (map[string]any, error) {
			return map[string]any{"carried": through, "through": -1}, nil
		},
		With: func(ctx context.Context, tx *sql.Tx, through int64) error {
			withThrough = through
			// It runs before the entries go: it can still read them.
			var n int64
			if err := tx.QueryRowContext(ctx, f.st.SQL("SELECT COUNT(*) FROM logbook_subjects WHERE key = 'request' AND seq <= ?"), through).Scan(&n); err != nil {
				return err
			}
			if n != through {
				return fmt.Errorf("With saw %d subject rows through %d", n, through)
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if p.From != 1 || p.Through != cut || p.Head != es[cut-1].Hash || p.Entry != 96 || withThrough != cut {
		t.Fatalf("pruned %+v (With saw %d), want 1..%d at head %s, entry 96", p, withThrough, cut, es[cut-1].Hash)
	}

	// The prune entry records the cut; what Carry returned rides along
	// without overriding it.
	pe, err := f.lb.Get(ctx, p.Entry)
	if err != nil {
		t.Fatal(err)
	}
	var payload struct {
		Through, Carried int64
		Head             string
	}
	if err := json.Unmarshal(pe.Payload, &payload); err != nil || pe.Kind != KindPruned ||
		payload.Through != cut || payload.Head != p.Head || payload.Carried != cut {
		t.Fatalf("prune entry %s %s (%v)", pe.Kind, pe.Payload, err)
	}
	if _, err := f.lb.Get(ctx, cut); !errors.Is(err, ErrNotFound) {
		t.Fatalf("entry %d after the prune: %v", cut, err)
	}
	if e := f.mustGet(t, cut+1); e.Hash != es[cut].Hash {
		t.Fatalf("entry %d changed", cut+1)
	}
	if found, err := f.lb.Find(ctx, Query{SubjectKey: "request", SubjectValue: "r-1"}); err != nil || len(found) != 0 {
		t.Fatalf("the subject index still finds a pruned entry: %v %v", found, err)
	}
	if mark, head, err := f.lb.PruneMark(ctx); err != nil || mark != cut || head != p.Head {
		t.Fatalf("mark %d %s %v", mark, head, err)
	}

	// The archive holds exactly the removed entries, each still hashing
	// to its stored hash.
	lines := readArchive(t, p.Archive)
	if p.Archive != filepath.Join(dir, fmt.Sprintf("logbook-%012d-%012d.jsonl", 1, cut)) || int64(len(lines)) != cut {
		t.Fatalf("archive %s with %d entries, want %d", p.Archive, len(lines), cut)
	}
	for i, e := range lines {
		if h, err := HashEntry(e); err != nil || h != es[i].Hash || e.Seq != int64(i+1) {
			t.Fatalf("archived entry %d: %s %v", e.Seq, h, err)
		}
	}

	// Verify resumes the chain at the mark: sequentially and on the fast
	// path, with the same answer.
	rep := f.verify()
	if !rep.OK || rep.PrunedThrough != cut || rep.HeadSeq != 96 || rep.Entries != 96-cut || rep.TailTooLong {
		t.Fatalf("verify after prune: %s", rep)
	}
	f.lb.verifySegment, f.lb.verifyWorkers = 5, 4
	if fast := f.verify(); fast != rep {
		t.Fatalf("fast path:\n %+v\nsequential:\n %+v", fast, rep)
	}

	// Nothing older than Before is left at a checkpoint: a second prune
	// removes nothing and appends nothing.
	if again, err := f.lb.Prune(ctx, Prune{Before: es[44].Time}); err != nil || again != (Pruned{}) {
		t.Fatalf("second prune: %+v %v", again, err)
	}

	// Step bounds one call; the writer keeps appending after a prune.
	f.append(Record{Kind: "decision", Payload: 1})
	later, err := f.lb.Prune(ctx, Prune{Before: time.Now().Add(time.Hour), Step: 15})
	if err != nil || later.From != cut+1 || later.Through > cut+15 || later.Through <= cut {
		t.Fatalf("stepped prune: %+v %v (checkpoints %v)", later, err, sizes)
	}
	if rep := f.verify(); !rep.OK || rep.PrunedThrough != later.Through {
		t.Fatalf("verify after a second prune: %s", rep)
	}
}

func readArchive(t *testing.T, path string) []Entry {
	t.Helper()
	b, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var out []Entry
	sc := bufio.NewScanner(b)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// TestPruneOnlyThroughTheMark: the store's own triggers refuse deleting
// an entry above the mark and moving the mark back, and Verify catches
// entries deleted by anything but Prune.
func TestPruneOnlyThroughTheMark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	newPruned := func(t *testing.T) (*fixture, Pruned, []int64) {
		f := newFixture(t, Config{CheckpointEvery: 10, CheckpointInterval: time.Hour})
		es, sizes := prunable(t, f, 60)
		p, err := f.lb.Prune(ctx, Prune{Before: es[30].Time})
		if err != nil || p.Through == 0 {
			t.Fatalf("prune: %+v %v", p, err)
		}
		return f, p, sizes
	}

	t.Run("triggers", func(t *testing.T) {
		f, p, _ := newPruned(t)
		if _, err := f.st.DB().ExecContext(ctx, f.st.SQL("DELETE FROM logbook_entries WHERE seq = ?"), p.Through+1); err == nil {
			t.Fatal("deleted an entry above the prune mark")
		}
		if _, err := f.st.DB().ExecContext(ctx, f.st.SQL("DELETE FROM logbook_subjects WHERE seq = ?"), p.Through+1); err == nil {
			t.Fatal("deleted a subject row above the prune mark")
		}
		if _, err := f.st.DB().ExecContext(ctx, "UPDATE logbook_pruned SET through = 0 WHERE id = 1"); err == nil {
			t.Fatal("moved the prune mark back")
		}
		if _, err := f.st.DB().ExecContext(ctx, "DELETE FROM logbook_pruned"); err == nil {
			t.Fatal("deleted the prune mark")
		}
		if rep := f.verify(); !rep.OK {
			t.Fatalf("verify: %s", rep)
		}
	})

	for _, tc := range []struct {
		name    string
		stmts   func(p Pruned, sizes []int64) []string
		problem Problem
	}{
		{"entries after the mark deleted without moving it", func(p Pruned, _ []int64) []string {
			return []string{fmt.Sprintf("DELETE FROM logbook_entries WHERE seq <= %d", p.Through+3)}
		}, ProblemGap},
		{"the mark moved to a later checkpoint, no prune entry", func(p Pruned, sizes []int64) []string {
			next := lastCheckpointBefore(sizes, p.Through+11)
			return []string{
				fmt.Sprintf("UPDATE logbook_pruned SET through = %d, head = (SELECT hash FROM logbook_entries WHERE seq = %d) WHERE id = 1", next, next),
				fmt.Sprintf("DELETE FROM logbook_entries WHERE seq <= %d", next),
			}
		}, ProblemUnrecordedPrune},
		{"the mark moved off a checkpoint", func(p Pruned, _ []int64) []string {
			return []string{
				fmt.Sprintf("UPDATE logbook_pruned SET through = %d, head = (SELECT hash FROM logbook_entries WHERE seq = %d) WHERE id = 1", p.Through+3, p.Through+3),
				fmt.Sprintf("DELETE FROM logbook_entries WHERE seq <= %d", p.Through+3),
			}
		}, ProblemCheckpoint},
		{"the mark's head rewritten", func(_ Pruned, _ []int64) []string {
			return []string{"UPDATE logbook_pruned SET head = zeroblob(32) WHERE id = 1"}
		}, ProblemCheckpoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, p, sizes := newPruned(t)
			t.Logf("pruned %+v, checkpoints %v", p, sizes)
			f.stop()
			f.tamper(append(pruneTamper(f), tc.stmts(p, sizes)...)...)
			rep := f.verify()
			if rep.OK || rep.Problem != tc.problem {
				t.Fatalf("verify: %s, want %s", rep, tc.problem)
			}
		})
	}
}

// pruneTamper lifts the prune mark's own guard, as an attacker would.
func pruneTamper(f *fixture) []string {
	if store.IsPostgresURL(f.path) {
		return []string{"ALTER TABLE logbook_pruned DISABLE TRIGGER USER"}
	}
	return []string{"DROP TRIGGER IF EXISTS logbook_pruned_forward"}
}

// TestPruneStepShorterThanCheckpoints: with checkpoints further apart than
// a step, a prune goes to the nearest checkpoint rather than stopping.
func TestPruneStepShorterThanCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{CheckpointEvery: 30, CheckpointInterval: time.Hour})
	es, sizes := prunable(t, f, 95)
	var got []int64
	for range 3 {
		p, err := f.lb.Prune(ctx, Prune{Before: es[len(es)-1].Time, Step: 20})
		if err != nil {
			t.Fatal(err)
		}
		if p.Through == 0 {
			break
		}
		got = append(got, p.Through)
	}
	want := []int64{}
	for _, s := range sizes {
		if s < 95 {
			want = append(want, s)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want[:min(3, len(want))]) {
		t.Fatalf("cuts %v, want each checkpoint in turn %v", got, want)
	}
	if rep := f.verify(); !rep.OK || rep.PrunedThrough != got[len(got)-1] {
		t.Fatalf("verify: %s", rep)
	}
}
