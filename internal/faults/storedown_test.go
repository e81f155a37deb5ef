package faults_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/faults"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// A store fault: how the PostgreSQL control store becomes unavailable.
type storeFault struct {
	kind string        // "crash", "lock" or "pause"
	hold time.Duration // how long it lasts
}

// TestStoreDown runs two serve nodes on one PostgreSQL control store (a
// server of its own, separate from the target's, with fsync on) while
// agents send statements to both and an approver approves referrals, and
// makes the store unavailable, round after round:
//
//   - crash: the store's server stopped by an immediate shutdown, later
//     started again (crash recovery);
//   - lock: another session holds the logbook's append lock
//     (pg_advisory_lock(store.LockLogbookAppend)), so every append waits
//     up to the store's lock_timeout (its busy timeout, 5s) and fails;
//   - pause (long run): every process of the store's server stopped with
//     SIGSTOP, later SIGCONT: a store that hangs, neither answering nor
//     refusing.
//
// While the store is unavailable nothing runs without its decision entry:
// no decision entry is committed (crash, lock), every statement that ran
// during the outage had its decision entry written before it began, and
// no statement sent into it is answered executed before it ends. The
// fast path stops and comes back by itself on both nodes. Measured: from
// the outage to the last statement that ran and to the first refusal or
// error, and from its end to the first statement that ran; they are
// compared with the documented bounds in docs/faults.md (the store's lock
// timeout, services.delegations_stale). The invariants hold afterwards
// (faults.Check, the tally, logbook verify).
func TestStoreDown(t *testing.T) {
	t.Parallel()
	plan := []storeFault{{"crash", 1500 * time.Millisecond}, {"lock", store.DefaultBusyTimeout + 1500*time.Millisecond}}
	if *long {
		plan = []storeFault{{"crash", time.Second}, {"lock", 2 * time.Second}, {"pause", 2 * time.Second},
			{"crash", 7 * time.Second}, {"lock", 7 * time.Second}, {"pause", 7 * time.Second},
			{"crash", 3 * time.Second}, {"lock", 10 * time.Second}, {"crash", 12 * time.Second}}
	}
	sb := newScoreboard(t, "store-down")
	rng := newRand(t)
	ctx := t.Context()
	// The store's own server: durable (the store refuses fsync=off), so
	// that a crash keeps every commit it acknowledged.
	storePG := pgtmptest.StartWith(t, map[string]string{"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"})
	storeURL := pgtmptest.NewDatabase(t, storePG)
	dsn := newTarget(t, pgtmptest.NewDatabase(t, shared.Server(t)))
	d := servetest.NewDeployment(t, servetest.Options{Name: "faults-storedown", TargetDSN: dsn,
		Delegations: map[string][]byte{"tally.yaml": tallyDelegation(t)},
		Extra:       "queue:\n  max_waiting: -1\n"})
	withPostgresStore(t, d, storeURL)
	verifier, err := logbook.NewCheckpointVerifier(d.Opts.Name, d.CPKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	nodes := []*servetest.Proc{d.Start(t, "serve-a.log"), d.Start(t, "serve-b.log")}
	var mu sync.Mutex
	outcomes := map[string]string{}
	referred := make(chan string, 1024)
	var approved atomic.Int64
	var loads []*load
	for _, n := range nodes {
		loads = append(loads, startLoad(d, n.Addr, rng.Uint64(), 2, &mu, outcomes, referred, &approved))
	}
	halted := false
	halt := func() {
		if !halted {
			for _, l := range loads {
				l.halt()
			}
			halted = true
		}
	}
	defer halt()
	everyNodeRan := func(since time.Time) bool {
		for _, l := range loads {
			if !l.executedSince(since) {
				return false
			}
		}
		return true
	}

	var worstStop, worstFirstRefusal, worstResume time.Duration
	firstRefusal := map[string]time.Duration{}
	since := time.Time{}
	for i, f := range plan {
		when := fmt.Sprintf("round %d (%s %s)", i+1, f.kind, f.hold)
		servetest.WaitUntil(t, "statements executing on every node", func() bool { return everyNodeRan(since) })
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		var down, up time.Time
		switch f.kind {
		case "crash":
			if err := storePG.Crash(); err != nil {
				t.Fatal(err)
			}
			down = time.Now()
			time.Sleep(f.hold)
			up = time.Now() // no postmaster from down to here
			if err := storePG.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		case "lock":
			conn, err := pgx.Connect(ctx, storeURL)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", store.LockLogbookAppend); err != nil {
				t.Fatal(err)
			}
			down = time.Now()
			time.Sleep(f.hold)
			// The outage ends when the unlock is sent: a writer waiting
			// on the lock takes it and dates its entry as soon as the
			// store runs the unlock, before its answer reaches this test.
			up = time.Now()
			if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", store.LockLogbookAppend); err != nil {
				t.Fatal(err)
			}
			conn.Close(ctx)
		case "pause":
			procs := serverProcesses(t, storePG)
			for _, p := range procs {
				_ = syscall.Kill(p, syscall.SIGSTOP)
			}
			down = time.Now()
			time.Sleep(f.hold)
			up = time.Now()
			for _, p := range procs {
				_ = syscall.Kill(p, syscall.SIGCONT)
			}
		}
		servetest.WaitUntil(t, "the fast path back on every node", func() bool { return everyNodeRan(up) })
		since = up
		sb.run()

		// What ran during the outage: only statements decided before it.
		decided := decisionTimes(t, d.StorePath, d.Opts.Name+"/logbook")
		ran := receiptsBetween(t, dsn, down, up)
		var lastRun time.Time
		for _, r := range ran {
			lastRun = r.at
			dt, ok := decided[r.request]
			switch {
			case !ok:
				sb.violate("%s: request %s ran %s into the outage with no decision entry", when, r.request, r.at.Sub(down))
			case !dt.Before(down):
				sb.violate("%s: request %s ran %s into the outage; its decision entry is from %s into it", when, r.request, r.at.Sub(down), dt.Sub(down))
			}
		}
		if f.kind != "pause" {
			// A pause can stop the server between an append's time stamp
			// and its commit: the entry is dated inside the pause and
			// committed after it. A crash or the held lock cannot.
			for id, dt := range decided {
				if dt.After(down) && dt.Before(up) {
					sb.violate("%s: the decision of request %s was committed %s into the outage", when, id, dt.Sub(down))
				}
			}
		}
		var refusal, resume time.Time
		for _, l := range loads {
			l.mu.Lock()
			for _, s := range l.sent {
				if s.at.After(down) && s.back.Before(up) && s.outcome == gateway.OutcomeExecuted {
					sb.violate("%s: a statement sent %s into the outage was answered executed %s into it", when, s.at.Sub(down), s.back.Sub(down))
				}
				if s.at.After(down) && s.outcome != gateway.OutcomeExecuted && (refusal.IsZero() || s.back.Before(refusal)) {
					refusal = s.back
				}
				if s.at.After(up) && s.outcome == gateway.OutcomeExecuted && (resume.IsZero() || s.back.Before(resume)) {
					resume = s.back
				}
			}
			l.mu.Unlock()
		}
		stop := time.Duration(0) // nothing ran during the outage
		if !lastRun.IsZero() {
			stop = lastRun.Sub(down)
		}
		fr := refusal.Sub(down)
		t.Logf("%s: the last statement ran %s into the outage; the first refusal or error came %s into it; after it the first statement ran %s later",
			when, stop, fr, resume.Sub(up))
		if refusal.IsZero() {
			t.Errorf("%s: no statement sent into the outage was answered: it tested nothing", when)
		}
		worstStop = max(worstStop, stop)
		worstResume = max(worstResume, resume.Sub(up))
		firstRefusal[f.kind] = max(firstRefusal[f.kind], fr)
		worstFirstRefusal = max(worstFirstRefusal, fr)
	}
	halt()

	// What a failed write left running is reconciled by the nodes.
	st := openPostgresStore(t, d.StorePath)
	servetest.WaitUntil(t, "no request left running", func() bool {
		for _, s := range requestStatuses(t, st) {
			if s == string(gateway.StatusRunning) {
				return false
			}
		}
		return true
	})
	var stale int
	if err := st.ReadDB().QueryRowContext(ctx, "SELECT count(*) FROM requests WHERE reasons LIKE '%could not be read from the store%'").Scan(&stale); err != nil {
		t.Fatal(err)
	}
	st.Close()
	check := func(when string) *faults.Report {
		st := openPostgresStore(t, d.StorePath)
		defer st.Close()
		mu.Lock()
		answered := maps.Clone(outcomes)
		mu.Unlock()
		rep := sb.check(ctx, faults.Check{Store: st, Origin: d.Opts.Name + "/logbook", Verifier: verifier,
			CheckpointEvery: int64(d.Opts.CheckpointEvery), TargetDSN: dsn, Answered: answered}, when)
		checkTally(t, sb, dsn, rep, when)
		return rep
	}
	check("reconciled, nodes running")
	for _, n := range nodes {
		n.Stop(t)
	}
	if err := d.VerifyLogbook(t); err != nil {
		sb.violate("at the end: %v", err)
	}
	rep := check("at the end")
	sb.figure("nodes", len(nodes))
	sb.figure("executed", rep.Executed)
	sb.figure("approved", approved.Load())
	sb.figure("voided", rep.Voided)
	sb.figure("stop_ms", worstStop.Milliseconds())
	sb.figure("resume_ms", worstResume.Milliseconds())
	sb.figure("stale_referrals", stale)
	for k, v := range firstRefusal {
		sb.figure("first_refusal_"+k+"_ms", v.Milliseconds())
	}
	if rep.Executed == 0 {
		t.Errorf("the load did too little to test anything: %s", rep.Summary())
	}
}

// openPostgresStore opens the PostgreSQL control store for a check.
func openPostgresStore(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// decisionTimes maps each request to its decision entry's time.
func decisionTimes(t *testing.T, url, origin string) map[string]time.Time {
	t.Helper()
	st := openPostgresStore(t, url)
	defer st.Close()
	lb, err := logbook.New(st, nil, nil, nil, logbook.Config{Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	err = lb.Iterate(t.Context(), logbook.Query{Kind: "decision"}, func(e logbook.Entry) error {
		if id := e.Subjects["request"]; id != "" {
			out[id] = e.Time
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type ranAt struct {
	request string
	at      time.Time
}

// receiptsBetween lists the statements that ran (receipts, not void)
// whose transaction began in [from, to), in order.
func receiptsBetween(t *testing.T, dsn string, from, to time.Time) []ranAt {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT request_id, executed_at FROM harbormaster.receipts
		WHERE NOT void AND executed_at >= $1 AND executed_at < $2 ORDER BY executed_at`, from, to)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []ranAt
	for rows.Next() {
		var r ranAt
		if err := rows.Scan(&r.request, &r.at); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// serverProcesses are the PostgreSQL server's processes: the postmaster
// (the first line of postmaster.pid) and its children, postmaster first.
func serverProcesses(t *testing.T, s *pgtmp.Server) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.DataDir(), "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	out := []int{pm}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after ")".
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(pm) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		out = append(out, pid)
	}
	if len(out) < 2 {
		t.Fatalf("found no child of the postmaster %d", pm)
	}
	return out
}
