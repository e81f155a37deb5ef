package logbook

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bench"
	"github.com/harbormaster-dev/harbormaster/internal/bench/benchtest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// BenchmarkDurableCommit apportions the decision's durable commit, the
// one step of a governed statement that waits for the store's device
// (DESIGN.md invariant 7), from the device up, one at a time and in one
// run on one directory (benchtest.EnvStoreDir, else a temporary one):
//
//   - fsync: a 4 KiB overwrite and fsync (bench.ProbeFsync), the device;
//   - sqlite: one INSERT of a decision-sized row and COMMIT on the store's
//     write handle, SQLite with synchronous=FULL;
//   - append: Logbook.Append of the gateway's decision record, without its
//     request row (the chain, the canonical payload, the writer);
//   - append+request-row: the same with the request row the gateway
//     writes in the decision's transaction (Record.With).
//
// Each reports its median and 90th percentile in µs.
//
//	go test -run '^$' -bench DurableCommit -benchtime 2000x ./internal/logbook/
func BenchmarkDurableCommit(b *testing.B) {
	dir := benchtest.StoreDir(b)
	b.Run("fsync", func(b *testing.B) {
		f, err := bench.ProbeFsync(dir, b.N)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(f.P50Us, "p50-µs")
		b.ReportMetric(f.P90Us, "p90-µs")
		b.ReportMetric(0, "ns/op")
	})
	f := openFixture(b, filepath.Join(dir, "store.db"), Config{}, true)
	ctx := context.Background()
	db := f.st.DB()
	b.Run("sqlite", func(b *testing.B) {
		if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_rows (seq INTEGER PRIMARY KEY, payload TEXT NOT NULL, hash BLOB NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		ins, err := db.PrepareContext(ctx, `INSERT INTO bench_rows (payload, hash) VALUES (?, ?)`)
		if err != nil {
			b.Fatal(err)
		}
		defer ins.Close()
		payload := strings.Repeat("x", 700) // a decision entry's canonical payload
		hash := make([]byte, 32)
		lat := make([]time.Duration, 0, b.N)
		for i := range b.N {
			hash[0] = byte(i)
			t0 := time.Now()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, payload, hash); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportLatency(b, lat)
	})
	ins, err := db.PrepareContext(ctx, requestInsert)
	if err != nil {
		b.Fatal(err)
	}
	defer ins.Close()
	var id int64
	for _, withRow := range []bool{false, true} {
		name := "append"
		if withRow {
			name += "+request-row"
		}
		b.Run(name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for range b.N {
				id++
				dec, _ := statementRecords(id, ins, nil)
				if !withRow {
					dec.With = nil
				}
				t0 := time.Now()
				if _, err := f.lb.Append(ctx, dec); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatency(b, lat)
		})
	}
	// journal: a read's decision with its request row as a View, through
	// the journal (Config.Journal) as a node appends it on SQLite.
	b.Run("journal+request-row", func(b *testing.B) {
		path := filepath.Join(dir, "journal.db")
		jf := openFixture(b, path, Config{Journal: path + "-logbook"}, true)
		rq, err := store.NewRequests(ctx, jf.st)
		if err != nil {
			b.Fatal(err)
		}
		defer rq.Close()
		jf.append(Record{Kind: "decision", Payload: 0}) // the first batch commits in the store
		lat := make([]time.Duration, 0, b.N)
		for i := range b.N {
			rec := viewRecord(rq, i)
			t0 := time.Now()
			if _, err := jf.lb.Append(ctx, rec); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportLatency(b, lat)
	})
}

// reportLatency reports lat's median and 90th percentile in µs.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	us := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(us(0.5), "p50-µs")
	b.ReportMetric(us(0.9), "p90-µs")
	b.ReportMetric(0, "ns/op")
}
