package logbook

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/harbormaster-dev/harbormaster/internal/store"
)

type decision struct {
	Request string `json:"request"`
	Outcome string `json:"outcome"`
	Rows    int64  `json:"rows"`
	Reason  string `json:"reason"`
}

func TestAppendAndRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{})

	var entries []Entry
	for i := range 6 {
		entries = append(entries, f.append(Record{
			Kind:     []Kind{"decision", "execution"}[i%2],
			Subjects: map[string]string{"request": fmt.Sprintf("r-%d", i/2), "principal": "agent:ops-bot"},
			Payload:  decision{Request: fmt.Sprintf("r-%d", i/2), Outcome: "conforms", Rows: 1 << 60, Reason: "<script> & 'quotes' \u00e9"},
		}))
	}

	prev := ZeroHash
	for i, e := range entries {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
		if e.PrevHash != prev {
			t.Fatalf("entry %d prev %s, want %s", e.Seq, e.PrevHash, prev)
		}
		if h, err := HashEntry(e); err != nil || h != e.Hash {
			t.Fatalf("HashEntry(entry %d) = %s, %v; want %s", e.Seq, h, err, e.Hash)
		}
		if e.Time.Location() != time.UTC || e.Time.IsZero() {
			t.Fatalf("entry %d time %v is not a UTC time from the clock", e.Seq, e.Time)
		}
		got, err := f.lb.Get(ctx, e.Seq)
		if err != nil {
			t.Fatalf("Get(%d): %v", e.Seq, err)
		}
		if !entriesEqual(got, e) {
			t.Fatalf("Get(%d) = %+v, want %+v", e.Seq, got, e)
		}
		prev = e.Hash
	}
	// Payload is canonical: keys sorted, no HTML escaping, big ints exact.
	wantPayload := `{"outcome":"conforms","reason":"<script> & 'quotes' é","request":"r-0","rows":1152921504606846976}`
	if string(entries[0].Payload) != wantPayload {
		t.Fatalf("payload %s, want %s", entries[0].Payload, wantPayload)
	}

	if _, err := f.lb.Get(ctx, 99); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(99) error = %v, want ErrNotFound", err)
	}
	seq, hash, err := f.lb.Head(ctx)
	if err != nil || seq != 6 || hash != entries[5].Hash {
		t.Fatalf("Head = %d %s %v", seq, hash, err)
	}

	tail, err := f.lb.Tail(ctx, 2)
	if err != nil || len(tail) != 2 || tail[0].Seq != 5 || tail[1].Seq != 6 {
		t.Fatalf("Tail(2) = %v, %v", seqsOf(tail), err)
	}

	tests := []struct {
		q    Query
		want []int64
	}{
		{Query{SubjectKey: "request", SubjectValue: "r-1"}, []int64{3, 4}},
		{Query{SubjectKey: "request", SubjectValue: "r-1", Kind: "execution"}, []int64{4}},
		{Query{SubjectKey: "principal", SubjectValue: "agent:ops-bot", From: 5}, []int64{5, 6}},
		{Query{Kind: "decision"}, []int64{1, 3, 5}},
		{Query{From: 2, Limit: 2}, []int64{2, 3}},
		{Query{SubjectKey: "request", SubjectValue: "r-9"}, nil},
	}
	for _, tt := range tests {
		got, err := f.lb.Find(ctx, tt.q)
		if err != nil {
			t.Fatalf("Find(%+v): %v", tt.q, err)
		}
		if fmt.Sprint(seqsOf(got)) != fmt.Sprint(tt.want) {
			t.Errorf("Find(%+v) = %v, want %v", tt.q, seqsOf(got), tt.want)
		}
	}
	if _, err := f.lb.Find(ctx, Query{SubjectKey: "request"}); err == nil {
		t.Error("Find with a key and no value succeeded")
	}

	// Export round-trips: every exported line re-hashes to its hash.
	var buf bytes.Buffer
	n, err := f.lb.Export(ctx, &buf, 3)
	if err != nil || n != 4 {
		t.Fatalf("Export = %d, %v; want 4", n, err)
	}
	sc := bufio.NewScanner(&buf)
	for i := int64(3); sc.Scan(); i++ {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Seq != i || !entriesEqual(e, entries[i-1]) {
			t.Fatalf("exported line %d = %+v", i, e)
		}
		if h, err := HashEntry(e); err != nil || h != e.Hash {
			t.Fatalf("exported entry %d does not re-hash: %s %v", e.Seq, h, err)
		}
	}
	if rep := f.verify(); !rep.OK || rep.Entries != 6 || rep.HeadHash != entries[5].Hash {
		t.Fatalf("Verify: %v", rep)
	}
}

func entriesEqual(a, b Entry) bool {
	return a.Seq == b.Seq && a.Time.Equal(b.Time) && a.Kind == b.Kind &&
		fmt.Sprint(a.Subjects) == fmt.Sprint(b.Subjects) && bytes.Equal(a.Payload, b.Payload) &&
		a.PrevHash == b.PrevHash && a.Hash == b.Hash
}

func seqsOf(es []Entry) []int64 {
	var out []int64
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

func TestAppendRejectsInvalidRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{MaxPayloadBytes: 64})
	tooMany := map[string]string{}
	for i := range MaxSubjects + 1 {
		tooMany[fmt.Sprintf("k%d", i)] = "v"
	}
	tests := []struct {
		name string
		rec  Record
	}{
		{"empty kind", Record{Kind: ""}},
		{"upper-case kind", Record{Kind: "Decision"}},
		{"kind with space", Record{Kind: "a b"}},
		{"long kind", Record{Kind: Kind(strings.Repeat("k", MaxKindBytes+1))}},
		{"bad subject key", Record{Kind: "decision", Subjects: map[string]string{"Request": "r"}}},
		{"empty subject value", Record{Kind: "decision", Subjects: map[string]string{"request": ""}}},
		{"long subject value", Record{Kind: "decision", Subjects: map[string]string{"request": strings.Repeat("v", MaxSubjectValueBytes+1)}}},
		{"too many subjects", Record{Kind: "decision", Subjects: tooMany}},
		{"payload too big", Record{Kind: "decision", Payload: strings.Repeat("x", 100)}},
		{"payload not JSON-able", Record{Kind: "decision", Payload: make(chan int)}},
		{"duplicate keys", Record{Kind: "decision", Payload: json.RawMessage(`{"a":1,"a":2}`)}},
		{"invalid raw JSON", Record{Kind: "decision", Payload: json.RawMessage(`{"a":`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.lb.Append(context.Background(), tt.rec); !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("Append error = %v, want ErrInvalidRecord", err)
			}
		})
	}
	if seq, _, err := f.lb.Head(context.Background()); err != nil || seq != 0 {
		t.Fatalf("Head = %d, %v: a refused record was written", seq, err)
	}
}

// 50 goroutines × 200 appends: every append durable, seqs gapless, chain
// verifies.
func TestConcurrentAppends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{})
	f.lb.verifySegment, f.lb.verifyWorkers = 500, 3 // Verify checks three ranges at once
	const goroutines, each = 50, 200
	got := make([][]Entry, goroutines)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				e, err := f.lb.Append(ctx, Record{
					Kind:     "decision",
					Subjects: map[string]string{"request": fmt.Sprintf("g%d-%d", g, i), "principal": fmt.Sprintf("agent:%d", g)},
					Payload:  map[string]any{"g": g, "i": i},
				})
				if err != nil {
					errs <- err
					return
				}
				got[g] = append(got[g], e)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}

	seen := make(map[int64]Entry, goroutines*each)
	for g, es := range got {
		last := int64(0)
		for _, e := range es {
			if _, dup := seen[e.Seq]; dup {
				t.Fatalf("seq %d returned twice", e.Seq)
			}
			if e.Seq <= last {
				t.Fatalf("goroutine %d: seq %d after %d: appends of one caller out of order", g, e.Seq, last)
			}
			last = e.Seq
			seen[e.Seq] = e
		}
	}
	for s := int64(1); s <= goroutines*each; s++ {
		if _, ok := seen[s]; !ok {
			t.Fatalf("seq %d missing", s)
		}
	}
	// Durable: what Append returned is what the store holds.
	for _, s := range []int64{1, 2, 777, 5000, goroutines * each} {
		e, err := f.lb.Get(ctx, s)
		if err != nil || !entriesEqual(e, seen[s]) {
			t.Fatalf("Get(%d) = %+v, %v; Append returned %+v", s, e, err, seen[s])
		}
	}
	byPrincipal, err := f.lb.Find(ctx, Query{SubjectKey: "principal", SubjectValue: "agent:7"})
	if err != nil || len(byPrincipal) != each {
		t.Fatalf("Find(principal agent:7) = %d entries, %v; want %d", len(byPrincipal), err, each)
	}
	f.stop() // no timed checkpoint between the reports compared below
	rep := f.verify()
	if !rep.OK || rep.Entries != goroutines*each {
		t.Fatalf("Verify: %v", rep)
	}
	fast, ok, err := f.lb.verifyParallel(ctx, f.v, nil)
	if err != nil || !ok || fast != rep {
		t.Fatalf("fast path %v (ok %v, %v) differs from Verify's %v", fast, ok, err, rep)
	}
	f.lb.verifyWorkers = 1
	if slow := f.verify(); slow != rep {
		t.Fatalf("sequential walk %v differs from the fast path's %v", slow, rep)
	}
	if rep.Checkpoints < goroutines*each/1000 || rep.SignedThrough != goroutines*each {
		t.Fatalf("Verify: %d checkpoints, signed through %d: want one at least every 1000 entries and one at stop", rep.Checkpoints, rep.SignedThrough)
	}
}

// Stopping the writer while many goroutines append: every Append returns
// (no hang), each either with a durable entry or ErrClosed, and exactly the
// successful ones exist.
func TestStopWhileAppending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{})
	var (
		mu  sync.Mutex
		ok  []Entry
		bad []error
		wg  sync.WaitGroup
	)
	progress := make(chan struct{}, 1)
	for g := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				e, err := f.lb.Append(ctx, Record{Kind: "decision", Payload: map[string]int{"g": g, "i": i}})
				mu.Lock()
				if err != nil {
					bad = append(bad, err)
					mu.Unlock()
					return
				}
				ok = append(ok, e)
				if len(ok) == 500 {
					progress <- struct{}{}
				}
				mu.Unlock()
			}
		})
	}
	<-progress
	f.stop()
	wg.Wait() // a hang here is the failure this test exists for

	for _, err := range bad {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Append after stop: %v, want ErrClosed", err)
		}
	}
	seq, _, err := f.lb.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seq != int64(len(ok)) {
		t.Fatalf("log holds %d entries, %d appends succeeded: an entry exists whose Append failed (or vice versa)", seq, len(ok))
	}
	for _, e := range ok {
		if got, err := f.lb.Get(ctx, e.Seq); err != nil || got.Hash != e.Hash {
			t.Fatalf("entry %d: %v", e.Seq, err)
		}
	}
	if rep := f.verify(); !rep.OK || rep.SignedThrough != seq {
		t.Fatalf("Verify after stop: %v (want a final checkpoint at %d)", rep, seq)
	}
	if _, err := f.lb.Append(ctx, Record{Kind: "decision"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Run returned: %v, want ErrClosed", err)
	}
	if err := f.lb.Run(ctx); err == nil {
		t.Fatal("second Run succeeded")
	}
}

// "If the logbook cannot be written, nothing executes": an Append that
// cannot commit returns an error and leaves no entry.
func TestAppendFailsWhenStoreUnwritable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := newLocation(t)
	f := openFixture(t, path, Config{}, true, store.WithBusyTimeout(20*time.Millisecond))
	first := f.append(Record{Kind: "decision", Payload: "before"})

	// Another process holds the write lock (on PostgreSQL, the append lock).
	pgStore := store.IsPostgresURL(path)
	driverName, dsn, lock, unlock := store.DriverName, path+"?_busy_timeout=1000", "BEGIN IMMEDIATE", "ROLLBACK"
	if pgStore {
		driverName, dsn = "pgx", path
		lock = fmt.Sprintf("SELECT pg_advisory_lock(%d)", store.LockLogbookAppend)
		unlock = fmt.Sprintf("SELECT pg_advisory_unlock(%d)", store.LockLogbookAppend)
	}
	other, err := sql.Open(driverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, lock); err != nil {
		t.Fatal(err)
	}
	_, err = f.lb.Append(ctx, Record{Kind: "decision", Payload: "during"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Append while the store is locked: %v, want ErrUnavailable", err)
	}
	if _, err := conn.ExecContext(ctx, unlock); err != nil {
		t.Fatal(err)
	}

	after := f.append(Record{Kind: "decision", Payload: "after"})
	if after.Seq != first.Seq+1 || after.PrevHash != first.Hash {
		t.Fatalf("after the outage: seq %d prev %s; the failed append left a trace", after.Seq, after.PrevHash)
	}
	if rep := f.verify(); !rep.OK || rep.Entries != 2 {
		t.Fatalf("Verify: %v", rep)
	}
}

func TestAppendClosedStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.append(Record{Kind: "decision"})
	f.st.Close()
	if _, err := f.lb.Append(context.Background(), Record{Kind: "decision"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Append on a closed store: %v, want ErrUnavailable", err)
	}
}

// An append abandoned (ctx ended) before the writer took it is never
// written, even when the writer starts later.
func TestAbandonedAppendNeverWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := openFixture(t, newLocation(t), Config{}, false)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := f.lb.Append(short, Record{Kind: "decision", Payload: "abandoned"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append without a writer: %v, want DeadlineExceeded", err)
	}
	f.start()
	e := f.append(Record{Kind: "decision", Payload: "kept"})
	if e.Seq != 1 || string(e.Payload) != `"kept"` {
		t.Fatalf("first entry = %d %s; the abandoned append was written", e.Seq, e.Payload)
	}
}

func TestCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{CheckpointEvery: 10, CheckpointInterval: time.Hour, Origin: "example.com/logbook"})
	if _, err := f.lb.Checkpoint(ctx); !errors.Is(err, ErrEmpty) {
		t.Fatalf("Checkpoint of an empty log: %v, want ErrEmpty", err)
	}
	if rep := f.verify(); !rep.OK || rep.Entries != 0 || rep.HeadHash != ZeroHash {
		t.Fatalf("Verify of an empty log: %v", rep)
	}
	var es []Entry
	for i := range 25 {
		es = append(es, f.append(Record{Kind: "decision", Payload: i}))
	}
	cps, err := f.lb.Checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cpSizes(cps)) != "[1 10 20]" {
		t.Fatalf("checkpoints at %v, want 1 (the first batch), 10 and 20", cpSizes(cps))
	}
	forced, err := f.lb.Checkpoint(ctx)
	if err != nil || forced.Size != 25 {
		t.Fatalf("Checkpoint = %d, %v; want 25", forced.Size, err)
	}
	again, err := f.lb.Checkpoint(ctx)
	if err != nil || again.Note != forced.Note {
		t.Fatalf("second Checkpoint made a new one: %v", err)
	}

	for _, cp := range append(cps, forced) {
		// The note verifies with the published key, independently of Verify.
		pub, _ := testKey(t)
		vkey, err := CheckpointVerifierKey(testKeyName, pub)
		if err != nil {
			t.Fatal(err)
		}
		v, err := note.NewVerifier(vkey)
		if err != nil {
			t.Fatal(err)
		}
		n, err := note.Open([]byte(cp.Note), note.VerifierList(v))
		if err != nil {
			t.Fatalf("checkpoint %d: %v", cp.Size, err)
		}
		raw, _ := hex.DecodeString(es[cp.Size-1].Hash)
		var head [32]byte
		copy(head[:], raw)
		if want := checkpointBody("example.com/logbook", cp.Size, head); n.Text != want {
			t.Fatalf("checkpoint body %q, want %q", n.Text, want)
		}
		if cp.Hash != es[cp.Size-1].Hash {
			t.Fatalf("checkpoint %d hash field %s, entry hash %s", cp.Size, cp.Hash, es[cp.Size-1].Hash)
		}
	}

	var buf bytes.Buffer
	if err := f.lb.ExportCheckpoints(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	read, err := ReadCheckpoints(&buf)
	if err != nil || len(read) != 4 || read[3].Note != forced.Note || !read[3].Time.Equal(forced.Time) {
		t.Fatalf("ReadCheckpoints = %v, %v", cpSizes(read), err)
	}
	if rep := f.verify(read...); !rep.OK || rep.Checkpoints != 8 || rep.SignedThrough != 25 {
		t.Fatalf("Verify with its own export: %v", rep)
	}

	// A different key does not verify them.
	other, _, _ := GenerateKey(nil)
	ov, err := NewCheckpointVerifier(testKeyName, other)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := f.lb.Verify(ctx, ov)
	if err != nil || rep.OK || rep.Problem != ProblemCheckpoint || rep.FirstBad != 1 {
		t.Fatalf("Verify with another key: %v, %v", rep, err)
	}
}

func cpSizes(cps []Checkpoint) []int64 {
	var out []int64
	for _, cp := range cps {
		out = append(out, cp.Size)
	}
	return out
}

func TestTimedCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{CheckpointEvery: 1 << 40, CheckpointInterval: 10 * time.Millisecond})
	for i := range 3 {
		f.append(Record{Kind: "decision", Payload: i})
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		cps, err := f.lb.Checkpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(cps) > 0 && cps[len(cps)-1].Size == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no timed checkpoint of 3 entries; have %v", cpSizes(cps))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFinalCheckpointOnStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{CheckpointEvery: 1 << 40, CheckpointInterval: time.Hour})
	for i := range 7 {
		f.append(Record{Kind: "decision", Payload: i})
	}
	f.stop()
	cps, err := f.lb.Checkpoints(ctx)
	if err != nil || fmt.Sprint(cpSizes(cps)) != "[1 7]" {
		t.Fatalf("checkpoints after stop: %v, %v; want the first batch's and one at 7", cpSizes(cps), err)
	}
}

// Two processes (two stores on one file), each with its own writer, append
// at once: they take turns and the chain stays one chain.
func TestTwoWritersOneFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := newLocation(t)
	a := openFixture(t, path, Config{CheckpointEvery: 50}, true)
	b := openFixture(t, path, Config{CheckpointEvery: 50}, true)
	var wg sync.WaitGroup
	for i, f := range []*fixture{a, b, a, b} {
		wg.Go(func() {
			for j := range 100 {
				if _, err := f.lb.Append(ctx, Record{Kind: "decision", Payload: []int{i, j}}); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if rep := a.verify(); !rep.OK || rep.Entries != 400 {
		t.Fatalf("Verify: %v", rep)
	}
}

func TestReadOnlyLogbook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{})
	f.append(Record{Kind: "decision"})
	ro, err := New(f.st, nil, nil, nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Append(ctx, Record{Kind: "decision"}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Append on a read-only logbook: %v", err)
	}
	if err := ro.Run(ctx); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Run on a read-only logbook: %v", err)
	}
	rep, err := ro.Verify(ctx, f.v)
	if err != nil || !rep.OK || rep.Entries != 1 {
		t.Fatalf("Verify: %v %v", rep, err)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	d := Config{}.WithDefaults()
	if d.Origin != "github.com/harbormaster-dev/harbormaster/logbook" || d.CheckpointEvery != 1000 || d.CheckpointInterval != 10*time.Second ||
		d.MaxBatch != 1000 || d.QueueLength != 8192 || d.MaxPayloadBytes != 1<<20 {
		t.Fatalf("defaults: %+v", d)
	}
	if err := d.validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	bad := []Config{
		{Origin: "two\nlines"},
		{CheckpointEvery: -1},
		{CheckpointInterval: -time.Second},
		{MaxBatch: -1},
		{QueueLength: -1},
		{MaxPayloadBytes: 2},
	}
	st, err := store.Open(context.Background(), store.Memory)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range bad {
		if _, err := New(st, nil, nil, nil, c); err == nil {
			t.Errorf("New accepted %+v", c)
		}
	}
	if _, err := New(nil, nil, nil, nil, Config{}); err == nil {
		t.Error("New accepted a nil store")
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	pub, priv, err := GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewCheckpointSigner("cp-key", priv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewCheckpointVerifier("cp-key", pub)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != v.Name() || s.KeyHash() != v.KeyHash() {
		t.Fatalf("signer %s/%08x and verifier %s/%08x disagree", s.Name(), s.KeyHash(), v.Name(), v.KeyHash())
	}
	msg, err := note.Sign(&note.Note{Text: "hello\n"}, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(msg, note.VerifierList(v)); err != nil {
		t.Fatalf("note from NewCheckpointSigner does not open: %v", err)
	}
	if _, err := NewCheckpointSigner("bad name", priv); err == nil {
		t.Error("signer with a space in its name accepted")
	}
	if _, err := NewCheckpointSigner("k", priv[:10]); err == nil {
		t.Error("short private key accepted")
	}
	if _, err := NewCheckpointVerifier("k", pub[:10]); err == nil {
		t.Error("short public key accepted")
	}
}

func TestParseCheckpointBody(t *testing.T) {
	t.Parallel()
	var head [32]byte
	head[0] = 7
	good := checkpointBody("o", 12, head)
	o, size, h, err := parseCheckpointBody(good)
	if err != nil || o != "o" || size != 12 || h != head {
		t.Fatalf("parse(%q) = %q %d %x %v", good, o, size, h, err)
	}
	for _, bad := range []string{
		"o\n12\n",
		"o\n012\n" + strings.Split(good, "\n")[2] + "\n",
		"o\n0\n" + strings.Split(good, "\n")[2] + "\n",
		"o\n-1\n" + strings.Split(good, "\n")[2] + "\n",
		"o\n12\nAAAA\n",
		good + "extension\n",
		strings.TrimSuffix(good, "\n"),
	} {
		if _, _, _, err := parseCheckpointBody(bad); err == nil {
			t.Errorf("parse(%q) succeeded", bad)
		}
	}
}

// TestLazyRecordsShareACommit: a lazy record waits for the next eager one
// and commits in its transaction (one batch: one time stamp); alone, it
// commits after LazyWait; and a stopping writer commits what it holds.
func TestLazyRecordsShareACommit(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Config{LazyWait: time.Hour})
	lazyDone := make(chan Entry, 1)
	go func() {
		e, err := f.lb.Append(ctx, Record{Kind: "execution", Subjects: map[string]string{"request": "r-1"}, Payload: 1, Lazy: true})
		if err != nil {
			t.Error(err)
		}
		lazyDone <- e
	}()
	select {
	case <-lazyDone:
		t.Fatal("a lazy record committed alone before its wait was over")
	case <-time.After(200 * time.Millisecond):
	}
	eager, err := f.lb.Append(ctx, Record{Kind: "decision", Subjects: map[string]string{"request": "r-2"}, Payload: 2})
	if err != nil {
		t.Fatal(err)
	}
	lazy := <-lazyDone
	if lazy.Seq != eager.Seq-1 || !lazy.Time.Equal(eager.Time) {
		t.Fatalf("lazy %d at %v, eager %d at %v: want one batch, lazy first", lazy.Seq, lazy.Time, eager.Seq, eager.Time)
	}

	// Alone, with a short wait.
	g := newFixture(t, Config{LazyWait: 20 * time.Millisecond})
	start := time.Now()
	if _, err := g.lb.Append(ctx, Record{Kind: "execution", Subjects: map[string]string{"request": "r-3"}, Payload: 3, Lazy: true}); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Fatalf("a lone lazy record committed after %v, before LazyWait", waited)
	}

	// A writer that stops commits the lazy records it holds.
	h := newFixture(t, Config{LazyWait: time.Hour})
	done := make(chan error, 1)
	go func() {
		_, err := h.lb.Append(ctx, Record{Kind: "execution", Subjects: map[string]string{"request": "r-4"}, Payload: 4, Lazy: true})
		done <- err
	}()
	waitHeld(t, h)
	h.stop()
	if err := <-done; err != nil {
		t.Fatalf("a held lazy record was lost at stop: %v", err)
	}
	if es, err := h.lb.Find(ctx, Query{Kind: "execution"}); err != nil || len(es) != 1 {
		t.Fatalf("after stop: %d execution entries, %v; want the held one", len(es), err)
	}
}

// waitHeld waits until the writer has taken the queued append.
func waitHeld(t *testing.T, f *fixture) {
	t.Helper()
	time.Sleep(100 * time.Millisecond) // the appender has queued it
	deadline := time.Now().Add(10 * time.Second)
	for len(f.lb.reqs) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the writer did not take the append")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // it is in the batch, not yet committed
}
