package logbook

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// tamperFixture is a stopped logbook of 40 entries with checkpoints at 10,
// 20, 30 and 40, and those checkpoints as exported beforehand.
func tamperFixture(t *testing.T) (*fixture, []Checkpoint) {
	t.Helper()
	f := newFixture(t, Config{CheckpointEvery: 10, CheckpointInterval: time.Hour})
	// Small ranges, so Verify's parallel fast path runs (and must hand over).
	f.lb.verifySegment, f.lb.verifyWorkers = 3, 4
	for i := 1; i <= 40; i++ {
		f.append(Record{
			Kind:     []Kind{"decision", "execution"}[i%2],
			Subjects: map[string]string{"request": fmt.Sprintf("r-%d", (i+1)/2)},
			Payload:  map[string]any{"i": i, "sql": "UPDATE orders SET status = 'failed' WHERE id = 1"},
		})
	}
	f.stop()
	var buf bytes.Buffer
	if err := f.lb.ExportCheckpoints(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	cps, err := ReadCheckpoints(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// The first batch is signed, then every tenth entry.
	if fmt.Sprint(cpSizes(cps)) != "[1 10 20 30 40]" {
		t.Fatalf("fixture checkpoints %v", cpSizes(cps))
	}
	if rep := f.verify(cps...); !rep.OK || rep.SignedThrough != 40 || rep.Checkpoints != 10 {
		t.Fatalf("untampered fixture: %v", rep)
	}
	if _, fast, err := f.lb.verifyParallel(context.Background(), f.v, cps); err != nil || !fast {
		t.Fatalf("fast path did not accept the untampered fixture: %v", err)
	}
	return f, cps
}

// rehash returns SQL that rewrites entries from..to as an attacker who
// recomputes hashes would: entry from gets newPayload, every later entry a
// prev and hash that chain onto it.
func rehash(t *testing.T, f *fixture, from, to int64, newPayload string) []string {
	t.Helper()
	ctx := context.Background()
	var stmts []string
	prev := ""
	for s := from; s <= to; s++ {
		e, err := f.lb.Get(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if s == from {
			e.Payload = json.RawMessage(newPayload)
		} else {
			e.PrevHash = prev
		}
		h, err := HashEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, fmt.Sprintf("UPDATE logbook_entries SET payload = '%s', prev_hash = x'%s', hash = x'%s' WHERE seq = %d",
			strings.ReplaceAll(string(e.Payload), "'", "''"), e.PrevHash, h, s))
		prev = h
	}
	return stmts
}

func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	_, otherPriv, err := GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, err := NewCheckpointSigner(testKeyName, otherPriv)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		stmts    func(t *testing.T, f *fixture) []string
		external bool // verify against the exported checkpoints too
		firstBad int64
		problem  Problem
	}{
		{
			name:     "edit payload",
			stmts:    sqlOf(`UPDATE logbook_entries SET payload = '{"i":17,"sql":"DELETE FROM orders"}' WHERE seq = 17`),
			firstBad: 17, problem: ProblemChanged,
		},
		{
			name:     "edit subjects",
			stmts:    sqlOf(`UPDATE logbook_entries SET subjects = '{"request":"r-99"}' WHERE seq = 5`),
			firstBad: 5, problem: ProblemChanged,
		},
		{
			name:     "edit time",
			stmts:    sqlOf(`UPDATE logbook_entries SET time_ns = time_ns + 1 WHERE seq = 3`),
			firstBad: 3, problem: ProblemChanged,
		},
		{
			name:     "edit kind of the first entry",
			stmts:    sqlOf(`UPDATE logbook_entries SET kind = 'approval' WHERE seq = 1`),
			firstBad: 1, problem: ProblemChanged,
		},
		{
			name:     "edit prev hash",
			stmts:    sqlOf(`UPDATE logbook_entries SET prev_hash = zeroblob(32) WHERE seq = 9`),
			firstBad: 9, problem: ProblemChanged,
		},
		{
			name:     "malformed hash",
			stmts:    sqlOf(`UPDATE logbook_entries SET hash = x'00' WHERE seq = 7`),
			firstBad: 7, problem: ProblemMalformed,
		},
		{
			name:     "delete a middle row",
			stmts:    sqlOf(`DELETE FROM logbook_entries WHERE seq = 23`),
			firstBad: 23, problem: ProblemGap,
		},
		{
			name:     "delete the first row",
			stmts:    sqlOf(`DELETE FROM logbook_entries WHERE seq = 1`),
			firstBad: 1, problem: ProblemGap,
		},
		{
			name: "swap two rows' seqs",
			stmts: sqlOf(
				`UPDATE logbook_entries SET seq = -1 WHERE seq = 12`,
				`UPDATE logbook_entries SET seq = 12 WHERE seq = 13`,
				`UPDATE logbook_entries SET seq = 13 WHERE seq = -1`),
			firstBad: 12, problem: ProblemReordered,
		},
		{
			name: "delete a row and renumber the rest",
			stmts: sqlOf(
				`DELETE FROM logbook_entries WHERE seq = 23`,
				`UPDATE logbook_entries SET seq = seq - 1 WHERE seq > 23`),
			firstBad: 23, problem: ProblemReordered,
		},
		{
			name: "rewrite one entry with a fresh hash",
			stmts: func(t *testing.T, f *fixture) []string {
				return rehash(t, f, 15, 15, `{"i":15,"sql":"DELETE FROM orders"}`)
			},
			firstBad: 15, problem: ProblemBrokenLink,
		},
		{
			name: "rewrite the chain from an entry on",
			stmts: func(t *testing.T, f *fixture) []string {
				return rehash(t, f, 15, 40, `{"i":15,"sql":"DELETE FROM orders"}`)
			},
			firstBad: 20, problem: ProblemCheckpoint,
		},
		{
			name: "append a forged entry after a checkpoint",
			stmts: func(t *testing.T, f *fixture) []string {
				e := Entry{Seq: 41, Time: f.mustGet(t, 40).Time, Kind: "approval", Subjects: map[string]string{},
					Payload: json.RawMessage(`{}`), PrevHash: strings.Repeat("ab", 32)}
				h, err := HashEntry(e)
				if err != nil {
					t.Fatal(err)
				}
				return []string{fmt.Sprintf(`INSERT INTO logbook_entries VALUES (41, %d, 'approval', '{}', '{}', x'%s', x'%s')`,
					e.Time.UnixNano(), e.PrevHash, h)}
			},
			firstBad: 41, problem: ProblemBrokenLink,
		},
		{
			name:     "edit a checkpoint's signed note",
			stmts:    sqlOf(`UPDATE logbook_checkpoints SET note = replace(note, char(10) || '20' || char(10), char(10) || '21' || char(10)) WHERE size = 20`),
			firstBad: 20, problem: ProblemCheckpoint,
		},
		{
			name:     "edit a checkpoint's hash column",
			stmts:    sqlOf(`UPDATE logbook_checkpoints SET hash = '` + strings.Repeat("0", 64) + `' WHERE size = 20`),
			firstBad: 20, problem: ProblemCheckpoint,
		},
		{
			name:     "edit a checkpoint's size column",
			stmts:    sqlOf(`UPDATE logbook_checkpoints SET size = 25 WHERE size = 20`),
			firstBad: 20, problem: ProblemCheckpoint,
		},
		{
			name: "replace a checkpoint with one signed by another key",
			stmts: func(t *testing.T, f *fixture) []string {
				e := f.mustGet(t, 30)
				head, _ := decodeHash(e.Hash)
				cp, err := signCheckpoint(otherSigner, f.lb.Config().Origin, 30, head, e.Time)
				if err != nil {
					t.Fatal(err)
				}
				return []string{fmt.Sprintf(`UPDATE logbook_checkpoints SET note = '%s' WHERE size = 30`, cp.Note)}
			},
			firstBad: 30, problem: ProblemCheckpoint,
		},
		{
			name: "delete the tail and its checkpoints",
			stmts: sqlOf(
				`DELETE FROM logbook_entries WHERE seq > 34`,
				`DELETE FROM logbook_checkpoints WHERE size > 34`),
			external: true,
			firstBad: 35, problem: ProblemTruncated,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, exported := tamperFixture(t)
			f.tamper(tt.stmts(t, f)...)
			var ext []Checkpoint
			if tt.external {
				ext = exported
			}
			if _, fast, err := f.lb.verifyParallel(context.Background(), f.v, ext); err != nil || fast {
				t.Fatalf("fast path accepted a tampered log (err %v)", err)
			}
			rep := f.verify(ext...)
			if rep.OK || rep.FirstBad != tt.firstBad || rep.Problem != tt.problem {
				t.Fatalf("Verify = %v\nwant first bad %d, %s", rep, tt.firstBad, tt.problem)
			}
			if rep.HeadSeq >= tt.firstBad && tt.problem != ProblemCheckpoint {
				t.Fatalf("report says intact through %d, past the first bad seq %d", rep.HeadSeq, tt.firstBad)
			}
		})
	}
}

func sqlOf(stmts ...string) func(*testing.T, *fixture) []string {
	return func(*testing.T, *fixture) []string { return stmts }
}

func (f *fixture) mustGet(t *testing.T, seq int64) Entry {
	t.Helper()
	e, err := f.lb.Get(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A deleted tail whose checkpoints were deleted with it is invisible to the
// database alone: that is why checkpoints are exported (doc.go).
func TestTruncationNeedsExportedCheckpoints(t *testing.T) {
	t.Parallel()
	f, exported := tamperFixture(t)
	f.tamper(`DELETE FROM logbook_entries WHERE seq > 34`, `DELETE FROM logbook_checkpoints WHERE size > 34`)
	if rep := f.verify(); !rep.OK || rep.HeadSeq != 34 {
		t.Fatalf("Verify without exports: %v (a truncated log with its checkpoints removed is consistent)", rep)
	}
	rep := f.verify(exported...)
	if rep.OK || rep.Problem != ProblemTruncated || rep.FirstBad != 35 || rep.SignedThrough != 30 {
		t.Fatalf("Verify with exports: %v", rep)
	}
}

// Someone holding the key rewrites the whole log and re-signs it: every
// internal check passes; a checkpoint exported before reveals it.
func TestRewrittenLogDetectedByEarlierExport(t *testing.T) {
	t.Parallel()
	_, exported := tamperFixture(t)

	forged := newFixture(t, Config{CheckpointEvery: 10, CheckpointInterval: time.Hour})
	for i := 1; i <= 40; i++ {
		forged.append(Record{Kind: "decision", Payload: map[string]any{"i": i, "sql": "something else"}})
	}
	forged.stop()
	if rep := forged.verify(); !rep.OK {
		t.Fatalf("re-signed log fails its own checks: %v", rep)
	}
	rep := forged.verify(exported...)
	if rep.OK || rep.Problem != ProblemCheckpoint || rep.FirstBad != 1 || rep.SignedThrough != 0 {
		t.Fatalf("Verify against earlier exports: %v", rep)
	}
}

func TestVerifyExternalCheckpointForms(t *testing.T) {
	t.Parallel()
	f, exported := tamperFixture(t)
	ctx := context.Background()

	// Only the note matters; a Hash field left empty is fine.
	bare := []Checkpoint{{Size: exported[2].Size, Note: exported[2].Note}}
	if rep := f.verify(bare...); !rep.OK {
		t.Fatalf("bare external checkpoint: %v", rep)
	}
	// An external checkpoint whose note was edited is reported.
	bad := exported[3]
	bad.Note = strings.Replace(bad.Note, "\n30\n", "\n29\n", 1)
	rep := f.verify(bad)
	if rep.OK || rep.Problem != ProblemCheckpoint || rep.FirstBad != 30 {
		t.Fatalf("edited external checkpoint: %v", rep)
	}
	// Another origin's checkpoint is not this log's.
	other, err := New(f.st, nil, nil, nil, Config{Origin: "other/logbook"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err = other.Verify(ctx, f.v)
	if err != nil || rep.OK || rep.Problem != ProblemCheckpoint {
		t.Fatalf("Verify under another origin: %v %v", rep, err)
	}
	if _, err := f.lb.Verify(ctx, nil); err == nil {
		t.Fatal("Verify with a nil verifier succeeded")
	}
}

func TestReadCheckpointsRejectsGarbage(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"not json\n",
		`{"size":1,"note":"x","extra":true}` + "\n",
		`{"size":"one"}` + "\n",
		strings.Repeat("x", maxCheckpointLine+1),
	} {
		if _, err := ReadCheckpoints(strings.NewReader(in)); err == nil {
			t.Errorf("ReadCheckpoints(%.40q) succeeded", in)
		}
	}
	cps, err := ReadCheckpoints(strings.NewReader("\n\n"))
	if err != nil || len(cps) != 0 {
		t.Fatalf("blank input: %v %v", cps, err)
	}
}

func TestHashEntryMatchesDocumentedEncoding(t *testing.T) {
	t.Parallel()
	// A fixed vector: if this changes, every stored log stops verifying.
	e := Entry{
		Seq: 1, Time: mustTime(t, "2026-01-01T00:00:00.000000001Z"), Kind: "decision",
		Subjects: map[string]string{"request": "r-1", "delegation": "d-1"},
		Payload:  json.RawMessage(`{"a":1}`), PrevHash: ZeroHash,
	}
	got, err := HashEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	in.WriteString("github.com/harbormaster-dev/harbormaster/logbook/entry/v1\n")
	in.Write([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	ns := e.Time.UnixNano()
	for i := 7; i >= 0; i-- {
		in.WriteByte(byte(ns >> (8 * i)))
	}
	for _, field := range []string{"decision", `{"delegation":"d-1","request":"r-1"}`, `{"a":1}`} {
		in.Write([]byte{0, 0, 0, byte(len(field))})
		in.WriteString(field)
	}
	in.Write(make([]byte, 32))
	sum := sha256Sum(in.Bytes())
	if got != hex.EncodeToString(sum[:]) {
		t.Fatalf("HashEntry = %s, documented encoding gives %x", got, sum)
	}
	if _, err := HashEntry(Entry{PrevHash: "xyz"}); err == nil {
		t.Fatal("HashEntry accepted a malformed prev hash")
	}
}

// TestVerifyUnsignedTail: an intact chain is only as good as its signed
// part. Deleting checkpoints (and perhaps rewriting the entries after them)
// leaves a chain that still links; Verify reports how far it is signed and
// flags a tail longer than the writer leaves, or no checkpoint at all.
func TestVerifyUnsignedTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		stmts    func(t *testing.T, f *fixture) []string
		external bool
		signed   int64
		tooLong  bool
		says     string
	}{
		{name: "untouched", stmts: sqlOf(), signed: 40,
			says: "ok: 40 entries, head 40 "},
		{name: "tail as long as the interval", stmts: sqlOf(`DELETE FROM logbook_checkpoints WHERE size = 40`), signed: 30,
			says: "; signed through entry 30 of 40; 10 entries unsigned"},
		{name: "tail longer than the interval", stmts: sqlOf(`DELETE FROM logbook_checkpoints WHERE size > 20`), signed: 20, tooLong: true,
			says: "unsigned tail: 40 entries, head 40 "},
		{
			name: "checkpoints deleted and the tail rewritten",
			stmts: func(t *testing.T, f *fixture) []string {
				return append([]string{`DELETE FROM logbook_checkpoints WHERE size > 20`},
					rehash(t, f, 25, 40, `{"i":25,"sql":"DELETE FROM orders"}`)...)
			},
			signed: 20, tooLong: true,
			says: "; signed through entry 20 of 40; 20 entries unsigned, more than the checkpoint interval (10)",
		},
		{name: "no checkpoint left", stmts: sqlOf(`DELETE FROM logbook_checkpoints`), signed: 0, tooLong: true,
			says: "unsigned: 40 entries, head 40 "},
		{name: "no checkpoint left but exports kept", stmts: sqlOf(`DELETE FROM logbook_checkpoints`), external: true, signed: 40,
			says: "; signed through entry 40 of 40; 0 entries unsigned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, exported := tamperFixture(t)
			f.tamper(tt.stmts(t, f)...)
			var ext []Checkpoint
			if tt.external {
				ext = exported
			}
			rep := f.verify(ext...)
			if !rep.OK || rep.HeadSeq != 40 || rep.SignedThrough != tt.signed || rep.Unsigned != 40-tt.signed ||
				rep.MaxUnsigned != 10 || rep.TailTooLong != tt.tooLong {
				t.Fatalf("Verify = %+v\nwant intact through 40, signed through %d, tail too long %v", rep, tt.signed, tt.tooLong)
			}
			if !strings.Contains(rep.String(), tt.says) {
				t.Errorf("report %q does not say %q", rep, tt.says)
			}
		})
	}
}

// A live logbook's tail within the interval is fine. Its first batch is
// signed, so even a writer killed before the first interval leaves no log of
// entries with no checkpoint (what deleting every checkpoint leaves:
// TestVerifyUnsignedTail).
func TestVerifyUnsignedTailLive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		entries  int
		signed   int64
		tooLong  bool
		unsigned string
	}{
		{entries: 0, signed: 0, unsigned: "signed through entry 0 of 0; 0 entries unsigned"},
		{entries: 3, signed: 1, unsigned: "signed through entry 1 of 3; 2 entries unsigned"},
		{entries: 13, signed: 10, unsigned: "signed through entry 10 of 13; 3 entries unsigned"},
		{entries: 20, signed: 20, unsigned: "signed through entry 20 of 20; 0 entries unsigned"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.entries), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, Config{CheckpointEvery: 10, CheckpointInterval: time.Hour})
			for i := range tt.entries {
				f.append(Record{Kind: "decision", Payload: map[string]any{"i": i}})
			}
			rep := f.verify()
			if !rep.OK || rep.SignedThrough != tt.signed || rep.TailTooLong != tt.tooLong || !strings.HasSuffix(rep.String(), tt.unsigned) {
				t.Fatalf("Verify = %v (%+v)\nwant signed through %d, tail too long %v", rep, rep, tt.signed, tt.tooLong)
			}
		})
	}
}
