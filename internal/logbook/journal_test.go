package logbook

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// journalChildEnv runs the test binary as TestJournalSurvivesAKill's
// child: it appends to the store in that directory and prints each seq an
// Append returned.
const journalChildEnv = "HARBORMASTER_LOGBOOK_JOURNAL_CHILD"

// journalConfig keeps journaled entries out of the store for as long as
// a test runs: only a crash and replay, or a reader, brings them in.
func journalConfig(path string) Config {
	return Config{Journal: path + "-logbook", IndexDelay: time.Hour, IndexBatch: 1 << 20, CheckpointInterval: time.Hour}
}

// journalFixture is a running logbook with a journal on a fresh SQLite
// store; nil on the PostgreSQL pass, which has no journal (the test has
// nothing to do there).
func journalFixture(t *testing.T) *fixture {
	t.Helper()
	loc := newLocation(t)
	if store.IsPostgresURL(loc) {
		t.Log("the journal is the SQLite store's; the PostgreSQL pass has nothing to test here")
		return nil
	}
	return openFixture(t, loc, journalConfig(loc), true)
}

// viewRecord is a record whose View writes a request row, as a read's
// decision does.
func viewRecord(rq *store.Requests, i int) Record {
	q, args := rq.InsertView(store.Request{ID: fmt.Sprintf("req-%d", i), Principal: "agent:a", Target: "t",
		SQL: "SELECT 1", Canonical: "SELECT 1", Outcome: "executed", Status: "executed", Reasons: "[]",
		RowsAffected: int64(i), CreatedNS: int64(i), UpdatedNS: 1796684276392609216})
	return Record{Kind: "decision", Subjects: map[string]string{"request": fmt.Sprintf("req-%d", i)},
		Payload: map[string]any{"i": i}, View: &View{SQL: q, Args: args}}
}

func journalChild(dir string) int {
	ctx := context.Background()
	path := filepath.Join(dir, "store.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	_, priv := testKey(nil)
	signer, _ := NewCheckpointSigner(testKeyName, priv)
	lb, err := New(st, signer, time.Now, nil, journalConfig(path))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	rq, err := store.NewRequests(ctx, st)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	go func() { _ = lb.Run(ctx) }()
	for i := 1; ; i++ {
		e, err := lb.Append(ctx, viewRecord(rq, i))
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println(e.Seq)
		if i == 200 {
			// Into the store, and the journal starts again from its first
			// byte: the frames written after this overwrite round one's,
			// and round one's past them are stale.
			if err := lb.Visible(ctx); err != nil {
				fmt.Println("error", err)
				return 1
			}
		}
	}
}

// TestJournalSurvivesAKill kills a process appending through the journal
// (its entries not yet in the store's tables, written over a first round
// of frames the store took) with SIGKILL, adds a torn frame to the
// journal as a write cut short would, and opens the store again: every
// entry an Append returned is there, in a chain that verifies, with its
// view's row, and the journal starts again.
func TestJournalSurvivesAKill(t *testing.T) {
	if store.IsPostgresURL(newLocation(t)) {
		t.Log("the journal is the SQLite store's; the PostgreSQL pass has nothing to test here")
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), journalChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var last int64
	for sc.Scan() && last < 300 {
		line := sc.Text()
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("child: %s", line)
		}
		last = n
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if last < 300 {
		t.Fatalf("the child appended %d entries", last)
	}
	path := filepath.Join(dir, "store.db")
	jpath := path + "-logbook"
	fi, err := os.Stat(jpath)
	if err != nil || fi.Size() == 0 {
		t.Fatalf("the journal held nothing at the kill (%v): the test tested nothing", err)
	}
	st0, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	var inStore int64
	if err := st0.ReadDB().QueryRow("SELECT COALESCE(MAX(seq), 0) FROM logbook_entries").Scan(&inStore); err != nil {
		t.Fatal(err)
	}
	st0.Close()
	if inStore < 200 || inStore >= last {
		t.Fatalf("the store held %d of %d entries before the replay: the journal was not in the way", inStore, last)
	}
	// The newest round, then round one's stale frames; and a frame cut
	// short after the last whole one.
	jf, err := os.OpenFile(jpath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	j := &journal{f: jf}
	frames, end, err := j.readFrames()
	if err != nil || len(frames) == 0 {
		t.Fatalf("%d frames in the journal's newest round: %v", len(frames), err)
	}
	if fi, err := jf.Stat(); err != nil || fi.Size() <= end {
		t.Fatalf("nothing of the first round after the newest (%d bytes of %v): the test tested no rewind", end, fi)
	}
	newest := frames[len(frames)-1].seq
	if newest < last {
		t.Fatalf("the journal's newest frames end at %d, Append returned %d", newest, last)
	}
	torn := encodeFrame(nil, &journaled{seq: 1 << 40, kind: "decision", subj: []byte("{}"), payload: []byte("null")})
	if _, err := jf.WriteAt(torn[:len(torn)-3], end); err != nil {
		t.Fatal(err)
	}
	jf.Close()

	f := openFixture(t, path, journalConfig(path), true)
	head, _, err := f.lb.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if head != newest {
		t.Fatalf("after the replay the log ends at %d; Append returned %d before the kill, and the journal's newest frame is %d", head, last, newest)
	}
	if rep := f.verify(); !rep.OK {
		t.Fatalf("verify after the replay: %s", rep)
	}
	var rows int64
	if err := f.st.ReadDB().QueryRow("SELECT COUNT(*) FROM requests WHERE updated_ns = 1796684276392609216").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows < last {
		t.Fatalf("%d request rows (views) for %d entries", rows, last)
	}
	if f.lb.journal.size != 0 {
		t.Fatalf("after the replay the journal writes at byte %d, not from its start", f.lb.journal.size)
	}
	t.Logf("killed at %d entries, %d of them only in the journal; replayed", last, last-inStore)
}

// TestJournalEntriesAreVisible: an entry committed in the journal is
// read at once by every reader, and its view's row after Visible.
func TestJournalEntriesAreVisible(t *testing.T) {
	f := journalFixture(t)
	if f == nil {
		return
	}
	rq, err := store.NewRequests(context.Background(), f.st)
	if err != nil {
		t.Fatal(err)
	}
	defer rq.Close()
	f.append(Record{Kind: "decision", Payload: 0}) // the first batch commits in the store, with a checkpoint
	for i := 1; i <= 5; i++ {
		e := f.append(viewRecord(rq, i))
		if f.lb.jPending.Load() == 0 {
			t.Fatalf("entry %d did not go through the journal", e.Seq)
		}
		got, err := f.lb.Get(context.Background(), e.Seq)
		if err != nil || got.Hash != e.Hash {
			t.Fatalf("Get(%d) = %v, %v", e.Seq, got.Hash, err)
		}
	}
	if err := f.lb.Visible(context.Background()); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := f.st.ReadDB().QueryRow("SELECT COUNT(*) FROM requests").Scan(&n); err != nil || n != 5 {
		t.Fatalf("%d request rows, %v", n, err)
	}
	// A record with With commits in the store, after the journal's.
	e := f.append(Record{Kind: "decision", Payload: 1, With: func(context.Context, *sql.Tx) error { return nil }})
	if f.lb.jPending.Load() != 0 || e.Seq != 7 {
		t.Fatalf("after a record with With: seq %d, %d pending", e.Seq, f.lb.jPending.Load())
	}
	if rep := f.verify(); !rep.OK {
		t.Fatalf("verify: %s", rep)
	}
}

// TestJournalRefusesWhatDoesNotContinueTheLog: a journal whose frames do
// not continue the store's chain (another log's, or altered) stops the
// logbook from opening; one process holds a journal at a time.
func TestJournalRefusesWhatDoesNotContinueTheLog(t *testing.T) {
	f := journalFixture(t)
	if f == nil {
		return
	}
	cfg := journalConfig(f.path)
	f.append(Record{Kind: "decision", Payload: 0})
	e := f.append(Record{Kind: "decision", Payload: 1})

	// A second logbook on the same journal while the first holds it.
	_, priv := testKey(t)
	signer, _ := NewCheckpointSigner(testKeyName, priv)
	if _, err := New(f.st, signer, time.Now, nil, cfg); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("a second logbook on a held journal: %v", err)
	}
	f.stop()

	var h hasher
	forged := journaled{seq: e.Seq + 1, ns: 1, kind: "decision", subj: []byte("{}"), payload: []byte("2")}
	forged.hash = h.sum(forged.seq, forged.ns, []byte(forged.kind), forged.subj, forged.payload, &forged.prev) // prev: zero, not e's hash
	if err := os.WriteFile(cfg.Journal, encodeFrame(nil, &forged), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(f.st, signer, time.Now, nil, cfg); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "does not continue") {
		t.Fatalf("a journal that does not continue the chain: %v", err)
	}
}

// stuckView makes a View that rolls back its whole transaction, as
// SQLite's disk full or I/O error can: a trigger raising ROLLBACK.
func stuckView(t *testing.T, st *store.Store) *View {
	t.Helper()
	for _, q := range []string{"CREATE TABLE IF NOT EXISTS view_probe (x TEXT)",
		"CREATE TRIGGER IF NOT EXISTS view_probe_full BEFORE INSERT ON view_probe WHEN NEW.x = 'full' BEGIN SELECT RAISE(ROLLBACK, 'database or disk is full'); END"} {
		if _, err := st.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return &View{SQL: "INSERT INTO view_probe (x) VALUES (?)", Args: []any{"full"}}
}

// TestJournalViewThatTakesTheTransaction: a journaled entry whose view
// rolls back the whole transaction (a full disk) never lets a later batch
// commit in its place (a fork), in the store or in replay (a gap): the
// batch fails, the start fails, and once the cause is gone every entry
// whose Append returned is there, with the hash Append gave.
func TestJournalViewThatTakesTheTransaction(t *testing.T) {
	ctx := context.Background()
	f := journalFixture(t)
	if f == nil {
		return
	}
	cfg := journalConfig(f.path)
	view := stuckView(t, f.st)
	f.append(Record{Kind: "decision", Payload: 0})
	stuck := f.append(Record{Kind: "decision", Payload: 1, View: view})
	after := f.append(Record{Kind: "decision", Payload: 2})
	if _, err := f.lb.Append(ctx, Record{Kind: "decision", Payload: 3, With: func(context.Context, *sql.Tx) error { return nil }}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a batch in the store behind a view that took its transaction: %v", err)
	}
	var head int64
	if err := f.st.ReadDB().QueryRow("SELECT COALESCE(MAX(seq), 0) FROM logbook_entries").Scan(&head); err != nil || head != 1 {
		t.Fatalf("the store's head is %d (%v): something committed in the journal's entries' place", head, err)
	}
	f.stop()

	_, priv := testKey(t)
	signer, _ := NewCheckpointSigner(testKeyName, priv)
	if _, err := New(f.st, signer, time.Now, nil, cfg); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a replay whose view takes its transaction: %v", err)
	}
	if err := f.st.ReadDB().QueryRow("SELECT COALESCE(MAX(seq), 0) FROM logbook_entries").Scan(&head); err != nil || head != 1 {
		t.Fatalf("after a failed replay the store's head is %d (%v): a gap", head, err)
	}
	if _, err := f.st.DB().Exec("DROP TRIGGER view_probe_full"); err != nil {
		t.Fatal(err)
	}
	g := openFixture(t, f.path, cfg, true)
	for _, want := range []Entry{stuck, after} {
		got, err := g.lb.Get(ctx, want.Seq)
		if err != nil || got.Hash != want.Hash {
			t.Fatalf("entry %d after the replay: %s, %v; Append returned %s", want.Seq, got.Hash, err, want.Hash)
		}
	}
	if rep := g.verify(); !rep.OK {
		t.Fatalf("verify: %s", rep)
	}
}

// TestJournalViewThatFailsAlone: the views that reach the store in one
// transaction are undone one by one, not together: a view that fails (a
// row that exists already) is logged and leaves the others' rows and
// every entry in place.
func TestJournalViewThatFailsAlone(t *testing.T) {
	ctx := context.Background()
	f := journalFixture(t)
	if f == nil {
		return
	}
	rq, err := store.NewRequests(ctx, f.st)
	if err != nil {
		t.Fatal(err)
	}
	defer rq.Close()
	f.append(Record{Kind: "decision", Payload: 0}) // the first batch commits in the store
	var last Entry
	for _, i := range []int{1, 2, 1, 3} { // the second request 1 cannot be inserted
		last = f.append(viewRecord(rq, i))
	}
	if f.lb.jPending.Load() != 4 {
		t.Fatalf("%d entries in the journal, want the 4 views'", f.lb.jPending.Load())
	}
	if err := f.lb.Visible(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := f.st.ReadDB().QueryContext(ctx, "SELECT id, rows_affected FROM requests ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s:%d", id, n))
	}
	if want := []string{"req-1:1", "req-2:2", "req-3:3"}; !slices.Equal(got, want) {
		t.Fatalf("request rows %v, want %v", got, want)
	}
	if e, err := f.lb.Get(ctx, last.Seq); err != nil || e.Hash != last.Hash {
		t.Fatalf("entry %d: %v", last.Seq, err)
	}
	if rep := f.verify(); !rep.OK {
		t.Fatalf("verify: %s", rep)
	}
}

// TestJournalPruneToTheHead: a prune whose cut is the store's head, its
// pruned entry committed in the journal, leaves that entry in the store
// before it deletes, so appends go on and a crash replays.
func TestJournalPruneToTheHead(t *testing.T) {
	ctx := context.Background()
	f := journalFixture(t)
	if f == nil {
		return
	}
	f.append(Record{Kind: "decision", Payload: 0})
	f.append(Record{Kind: "decision", Payload: 1})
	if _, err := f.lb.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.lb.Settle(ctx); err != nil { // indexed through the head: the cut may be the head
		t.Fatal(err)
	}
	p, err := f.lb.Prune(ctx, Prune{Before: time.Now().Add(1000 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := f.st.ReadDB().QueryRow("SELECT COUNT(*) FROM logbook_entries WHERE seq = ?", p.Entry).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the pruned entry %d is not in the store after the prune: %d, %v", p.Entry, n, err)
	}
	e := f.append(Record{Kind: "decision", Payload: 2})
	if f.lb.journal.broken != nil || e.Seq != p.Entry+1 {
		t.Fatalf("after the prune: entry %d, journal %v", e.Seq, f.lb.journal.broken)
	}
	if rep := f.verify(); !rep.OK {
		t.Fatalf("verify: %s", rep)
	}
}

// TestJournalRounds: the newest round ends where an earlier round's frame
// follows it, as when a power loss kept a later page of a group and not
// its first: replay stops there instead of refusing the gap, and checks
// the frames the store holds against it.
func TestJournalRounds(t *testing.T) {
	f := journalFixture(t)
	if f == nil {
		return
	}
	cfg := journalConfig(f.path)
	for i := range 3 {
		f.append(Record{Kind: "decision", Payload: i})
	}
	f.stop()
	var e journaled
	var kind string
	var prev, hash []byte
	if err := f.st.ReadDB().QueryRow("SELECT time_ns, kind, subjects, payload, prev_hash, hash FROM logbook_entries WHERE seq = 2").Scan(
		&e.ns, &kind, &e.subj, &e.payload, &prev, &hash); err != nil {
		t.Fatal(err)
	}
	e.seq, e.kind, e.round = 2, Kind(kind), 1
	copy(e.prev[:], prev)
	copy(e.hash[:], hash)
	later := journaled{round: 2, seq: 9, kind: "decision", subj: []byte("{}"), payload: []byte("9")}
	_, priv := testKey(t)
	signer, _ := NewCheckpointSigner(testKeyName, priv)
	open := func(frames ...journaled) error {
		var b []byte
		for i := range frames {
			b = encodeFrame(b, &frames[i])
		}
		if err := os.WriteFile(cfg.Journal, b, 0o600); err != nil {
			t.Fatal(err)
		}
		lb, err := New(f.st, signer, time.Now, nil, cfg)
		if err == nil {
			lb.journal.close()
		}
		return err
	}
	if err := open(e, later); err != nil {
		t.Fatalf("a frame of another round after the newest: %v", err)
	}
	if err := open(later); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a newest round that does not continue the log: %v", err)
	}
	altered := e
	altered.payload = []byte("7")
	if err := open(altered); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "does not hash") {
		t.Fatalf("a frame altered: %v", err)
	}
	var h hasher
	altered.hash = h.sum(altered.seq, altered.ns, []byte(altered.kind), altered.subj, altered.payload, &altered.prev)
	if err := open(altered); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("a frame that disagrees with the store's entry: %v", err)
	}
}

// TestJournalBrokenStopsTheLog: a journal that cannot be written nor cut
// back stops every append, in the journal and in the store alike, so no
// entry takes a seq a frame left in the journal may hold.
func TestJournalBrokenStopsTheLog(t *testing.T) {
	ctx := context.Background()
	f := journalFixture(t)
	if f == nil {
		return
	}
	f.append(Record{Kind: "decision", Payload: 0})
	f.append(Record{Kind: "decision", Payload: 1})
	f.lb.mu.Lock()
	f.lb.journal.f.Close() // every write, truncate and sync fails from here
	f.lb.mu.Unlock()
	if _, err := f.lb.Append(ctx, Record{Kind: "decision", Payload: 2}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("an append to a journal that cannot be written: %v", err)
	}
	if _, err := f.lb.Append(ctx, Record{Kind: "decision", Payload: 3, With: func(context.Context, *sql.Tx) error { return nil }}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("an append in the store behind a broken journal: %v", err)
	}
	var head int64
	if err := f.st.ReadDB().QueryRow("SELECT COALESCE(MAX(seq), 0) FROM logbook_entries").Scan(&head); err != nil || head > 2 {
		t.Fatalf("the store's head is %d (%v) behind a broken journal", head, err)
	}
}
