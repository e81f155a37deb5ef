package logbook

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStatementPath models what the gateway asks of the logbook for
// one governed statement (DESIGN.md section 3, steps 6 and 9): a decision
// with four subjects whose With inserts the request row, appended before
// the marque exists, then an execution with three subjects whose With
// updates that row, appended lazily while the agent is answered (the
// gateway's recordLater: the appender goes on to its next statement and
// the execution rides on a later commit). One op is one statement.
//
// It reports CPU time per statement (process user+system, from getrusage:
// the writer, the appenders and SQLite together), statements and appends
// per second, and the decision append's median latency.
//
// Sub-benchmarks: appenders=N as above; ",window=off" without the commit
// window; ",pilot=1ms" with a millisecond between an appender's decision
// and its execution (the Pilot's work), so appends arrive spread out as
// they do in the gateway; ",rows=after" with the request rows written by
// Record.After instead of With.
func BenchmarkStatementPath(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		opt  pathOptions
	}{
		{"appenders=1", 1, pathOptions{}},
		{"appenders=16", 16, pathOptions{}},
		{"appenders=1,window=off", 1, pathOptions{cfg: Config{CommitWindow: -1}}},
		{"appenders=16,window=off", 16, pathOptions{cfg: Config{CommitWindow: -1}}},
		{"appenders=1,pilot=1ms", 1, pathOptions{pilot: time.Millisecond}},
		{"appenders=16,pilot=1ms", 16, pathOptions{pilot: time.Millisecond}},
		{"appenders=16,pilot=1ms,window=off", 16, pathOptions{pilot: time.Millisecond, cfg: Config{CommitWindow: -1}}},
		{"appenders=1,rows=after", 1, pathOptions{after: true}},
		{"appenders=16,rows=after", 16, pathOptions{after: true}},
	} {
		b.Run(c.name, func(b *testing.B) { benchStatementPath(b, c.n, c.opt) })
	}
}

type pathOptions struct {
	cfg   Config
	pilot time.Duration // between a decision and its execution
	after bool          // request rows by Record.After
}

// statementRecords is the decision and execution of statement id, with the
// gateway's request-row statements.
func statementRecords(id int64, ins, upd *sql.Stmt) (decision, execution Record) {
	req := fmt.Sprintf("r-%012d", id)
	marque := fmt.Sprintf("m-%012d", id)
	canonical := "UPDATE public.orders SET updated_at = now() WHERE id = " + fmt.Sprint(id%1000)
	now := time.Now().UnixNano()
	decision = Record{
		Kind:     "decision",
		Subjects: map[string]string{"request": req, "principal": "agent:ops-bot", "target": "shop", "delegation": "d-0123456789abcdef"},
		Payload: map[string]any{
			"request_id": req, "principal": "agent:ops-bot", "target": "shop",
			"statement": canonical, "canonical_sql": canonical, "statement_sha256": "9f2c6d1e0b7a4c3d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5",
			"outcome": "run", "path": "compiled", "delegation_id": "d-0123456789abcdef", "rule": 1,
			"reasons": []string{}, "evaluated": []map[string]any{{"delegation": "d-0123456789abcdef", "decision": "conforms", "rule": 1}},
			"judgment_id": "", "txid": "812345", "marque_id": marque,
		},
		With: func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.StmtContext(ctx, ins).ExecContext(ctx, req, "agent:ops-bot", "shop", canonical, canonical,
				"referred", "running", "compiled", "d-0123456789abcdef", 1, "[]", "", "812345", marque, now, now)
			return err
		},
	}
	execution = Record{
		Kind:     "execution",
		Subjects: map[string]string{"request": req, "target": "shop", "marque": marque},
		Payload: map[string]any{"request_id": req, "marque_id": marque, "outcome": "executed", "code": "",
			"rows_affected": 1, "reasons": []string{}, "txid": "812345", "executed_sql": canonical, "detail": ""},
		With: func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.StmtContext(ctx, upd).ExecContext(ctx, "executed", "executed", "[]", "", 1, "812345", marque, now, req)
			return err
		},
		Lazy: true,
	}
	return decision, execution
}

// requestInsert is the gateway's request row, as statementRecords writes it.
const requestInsert = `INSERT INTO requests (id, principal, target, sql, canonical, outcome,
		status, path, delegation_id, rule, reasons, detail, txid, marque_id, created_ns, updated_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

func benchStatementPath(b *testing.B, appenders int, opt pathOptions) {
	f := newFixture(b, opt.cfg)
	ctx := context.Background()
	db := f.st.DB()
	ins, err := db.PrepareContext(ctx, requestInsert)
	if err != nil {
		b.Fatal(err)
	}
	defer ins.Close()
	upd, err := db.PrepareContext(ctx, `UPDATE requests SET outcome = ?, status = ?, reasons = ?, detail = ?,
		rows_affected = ?, txid = ?, marque_id = ?, updated_ns = ? WHERE id = ?`)
	if err != nil {
		b.Fatal(err)
	}
	defer upd.Close()

	var next atomic.Int64
	var execs sync.WaitGroup
	lat := make([][]time.Duration, appenders)
	b.ResetTimer()
	start, cpu, sys0 := time.Now(), cpuTime(), sysTime()
	commits0 := f.lb.stats.commits.Load()
	var wg sync.WaitGroup
	for a := range appenders {
		wg.Go(func() {
			for {
				id := next.Add(1)
				if id > int64(b.N) {
					return
				}
				dec, exe := statementRecords(id, ins, upd)
				if opt.after {
					dec.With, dec.After = nil, dec.With
					exe.With, exe.After = nil, exe.With
				}
				t0 := time.Now()
				if _, err := f.lb.Append(ctx, dec); err != nil {
					b.Error(err)
					return
				}
				lat[a] = append(lat[a], time.Since(t0))
				if opt.pilot > 0 {
					time.Sleep(opt.pilot)
				}
				execs.Go(func() {
					if _, err := f.lb.Append(ctx, exe); err != nil {
						b.Error(err)
					}
				})
			}
		})
	}
	wg.Wait()
	execs.Wait()
	if opt.after {
		if err := f.lb.Settle(ctx); err != nil {
			b.Fatal(err)
		}
	}
	elapsed, used, sys := time.Since(start), cpuTime()-cpu, sysTime()-sys0
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(used)/1e3/float64(b.N), "cpu-µs/stmt")
	b.ReportMetric(float64(sys)/1e3/float64(b.N), "sys-µs/stmt")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "stmts/s")
	b.ReportMetric(2*float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(f.lb.stats.commits.Load()-commits0)/float64(b.N), "commits/stmt")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "decision-p50-µs")
	}
	b.ReportMetric(0, "ns/op")
}

func sysTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Stime.Nano()
}
