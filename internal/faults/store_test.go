package faults_test

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/faults"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// sent is one statement an agent sent and what came back.
type sent struct {
	at, back time.Time
	outcome  string // "" for an error answer
	err      error
	kind     string // randomStatement's
}

// TestStoreLocked has another process (this test) hold an exclusive write
// lock on a serve process's SQLite store while agents send statements,
// for less and for more than the store's busy timeout (5s), then release
// it. While it is held nothing runs that was decided after it was taken:
// no decision entry is committed during the hold, and no statement sent
// into it is answered "executed" before the release; statements wait,
// then are referred (their marque expired while the decision waited; a
// read, which runs while its decision is made, is answered once its
// decision and outcome commit together after the release) or,
// past the busy timeout, answered with an error. Released, the fast path comes back by
// itself. The invariants hold after each round. Measured: how long after
// the lock the last statement ran and the first error came, and how long
// after the release the first statement ran.
func TestStoreLocked(t *testing.T) {
	t.Parallel()
	// Past the busy timeout the logbook writer's batches fail. It commits
	// one batch (or subject-index catch-up) at a time, each waiting up to
	// the busy timeout, so a decision queued behind others may wait several
	// busy timeouts before its own fails or commits: an agent is answered
	// an error only when the hold outlasts every wait ahead of it, which is
	// measured (first_error_ms), not assumed.
	holds := []time.Duration{store.DefaultBusyTimeout + 2*time.Second}
	if *long {
		holds = []time.Duration{time.Second, 3 * time.Second, 7 * time.Second, 12 * time.Second, 2 * time.Second, 17 * time.Second}
	}
	sb := newScoreboard(t, "store-locked")
	rng := newRand(t)
	ctx := t.Context()
	dsn := newTarget(t, pgtmptest.NewDatabase(t, shared.Server(t)))
	d := servetest.NewDeployment(t, servetest.Options{Name: "faults-store", TargetDSN: dsn,
		Delegations: map[string][]byte{"tally.yaml": tallyDelegation(t)}})
	verifier, err := logbook.NewCheckpointVerifier(d.Opts.Name, d.CPKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	srv := d.Start(t, "serve.log")

	// The other process's handle: BEGIN EXCLUSIVE takes the write lock at
	// once (in WAL mode readers go on).
	locker, err := sql.Open(store.DriverName, d.StorePath+"?_busy_timeout=30000&_txlock=exclusive")
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	locker.SetMaxOpenConns(1)

	var mu sync.Mutex
	outcomes := map[string]string{}
	var log []sent
	client := &http.Client{Timeout: time.Minute}
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
			for lctx.Err() == nil {
				sql, kind := randomStatement(r)
				s := sent{at: time.Now(), kind: kind}
				a, err := servetest.Post(lctx, client, srv.Addr, gatewaytest.AgentToken, gatewaytest.Target, sql)
				s.back, s.err = time.Now(), err
				if lctx.Err() != nil {
					return
				}
				mu.Lock()
				if err == nil {
					s.outcome = a.Outcome
					outcomes[a.RequestID] = a.Outcome
				}
				log = append(log, s)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	defer func() { stopLoad(); wg.Wait() }()
	// executedSince reports a write answered executed, sent after from:
	// what ran is timed by the receipts, which reads do not write.
	executedSince := func(from time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range log {
			if s.kind == "write" && s.at.After(from) && s.outcome == gateway.OutcomeExecuted {
				return true
			}
		}
		return false
	}
	servetest.WaitUntil(t, "statements executing", func() bool { return executedSince(time.Time{}) })

	var worstStop, worstResume, worstFirstError time.Duration
	for i, hold := range holds {
		when := fmt.Sprintf("round %d (held %s)", i+1, hold)
		tx, err := locker.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The lock is ours from here: any write of serve's waits.
		if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS faults_lock (x INTEGER)"); err != nil {
			t.Fatal(err)
		}
		locked := time.Now()
		time.Sleep(hold)
		released := time.Now()
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		servetest.WaitUntil(t, "the fast path back", func() bool { return executedSince(released) })
		sb.run()

		// What ran during the hold: only statements decided before it.
		lastRun, firstRun, err := receiptsAround(ctx, dsn, released)
		if err != nil {
			t.Fatal(err)
		}
		st := openStore(t, d.StorePath)
		var late int
		err = st.ReadDB().QueryRowContext(ctx, `SELECT count(*) FROM logbook_entries WHERE kind = 'decision' AND time_ns > ? AND time_ns < ?`,
			locked.UnixNano(), released.UnixNano()).Scan(&late)
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		if late != 0 {
			sb.violate("%s: %d decision entries were committed while another process held the store's write lock", when, late)
		}
		mu.Lock()
		var firstErr time.Time
		intoHold := 0
		for _, s := range log {
			if s.at.After(locked) && s.back.Before(released) && s.outcome == gateway.OutcomeExecuted {
				sb.violate("%s: a statement sent %s into the hold was answered executed %s into it", when, s.at.Sub(locked), s.back.Sub(locked))
			}
			// Its marque was minted when it was sent; its decision could
			// commit only after the release, by when the marque expired
			// (past its TTL and the verifier's leeway for clock skew). A
			// read runs while its decision is made, and is answered once
			// its decision and outcome commit together after the release
			// (faults.Check holds it to that): it may be answered executed.
			if s.kind != "read" && s.at.After(locked) && s.at.Before(released.Add(-d.Opts.MarqueTTL-marque.DefaultLeeway-time.Second)) && s.outcome == gateway.OutcomeExecuted {
				sb.violate("%s: a statement sent %s into the hold, its marque expired by the release, was answered executed %s after the lock",
					when, s.at.Sub(locked), s.back.Sub(locked))
			}
			if s.at.After(locked) && s.at.Before(released) {
				intoHold++
			}
			var he *servetest.HTTPError
			if s.err != nil && s.back.After(locked) && (firstErr.IsZero() || s.back.Before(firstErr)) {
				if errors.As(s.err, &he) {
					firstErr = s.back
				}
			}
		}
		mu.Unlock()
		stop := max(0, lastRun.Sub(locked))
		resume := firstRun.Sub(released)
		t.Logf("%s: last statement ran %s after the lock, first ran %s after the release; first error answer %s after the lock; %d statements sent into the hold",
			when, stop, resume, errAfter(firstErr, locked), intoHold)
		worstStop, worstResume = max(worstStop, stop), max(worstResume, resume)
		if intoHold == 0 {
			t.Errorf("%s: no statement was sent into the hold: it tested nothing", when)
		}
		if !firstErr.IsZero() && firstErr.Before(released) {
			worstFirstError = max(worstFirstError, firstErr.Sub(locked))
		}
	}
	stopLoad()
	wg.Wait()
	// Requests a failed logbook write left running are reconciled by the
	// node itself after twice the marque TTL.
	time.Sleep(2*d.Opts.MarqueTTL + 500*time.Millisecond)
	check := func(when string) {
		st := openStore(t, d.StorePath)
		defer st.Close()
		mu.Lock()
		answered := maps.Clone(outcomes)
		mu.Unlock()
		rep := sb.check(ctx, faults.Check{Store: st, Origin: d.Opts.Name + "/logbook", Verifier: verifier,
			CheckpointEvery: int64(d.Opts.CheckpointEvery), TargetDSN: dsn, Answered: answered}, when)
		checkTally(t, sb, dsn, rep, when)
		sb.figure("executed", rep.Executed)
	}
	check("after the rounds")
	srv.Stop(t)
	if err := d.VerifyLogbook(t); err != nil {
		sb.violate("at the end: %v", err)
	}
	check("at the end")
	sb.figure("stop_ms", worstStop.Milliseconds())
	sb.figure("resume_ms", worstResume.Milliseconds())
	sb.figure("first_error_ms", worstFirstError.Milliseconds()) // 0: none during a hold
	sb.figure("answered", len(log))
}

func errAfter(t, from time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(from).String()
}

// receiptsAround returns the last receipt's time before released (the last
// statement that ran while the lock was held, or before it) and the first
// one after released.
func receiptsAround(ctx context.Context, dsn string, released time.Time) (last, first time.Time, err error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return last, first, err
	}
	defer conn.Close(context.Background())
	var l, f *time.Time
	err = conn.QueryRow(ctx, `SELECT (SELECT max(executed_at) FROM harbormaster.receipts WHERE NOT void AND executed_at < $1),
		(SELECT min(executed_at) FROM harbormaster.receipts WHERE NOT void AND executed_at >= $1)`, released).Scan(&l, &f)
	if err != nil {
		return last, first, err
	}
	if l == nil || f == nil {
		return last, first, fmt.Errorf("no receipt before or after the hold")
	}
	return *l, *f, nil
}
