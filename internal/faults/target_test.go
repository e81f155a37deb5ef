package faults_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/faults"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

// TestTargetCrash stops the target PostgreSQL abruptly (immediate
// shutdown) while a serve process has statements in flight, keeps it down
// a moment, and starts it again, round after round. Statements whose
// COMMIT's outcome was lost are resolved from the receipt by the node's
// own reconciliation, never retried: afterwards every request is final,
// each executed one has exactly one receipt, the tally's counters equal
// the executed increments, and no statement sent while the target was down
// was answered "executed" (the agent got an error or a referral).
// Measured: how long after the restart statements ran again.
func TestTargetCrash(t *testing.T) {
	t.Parallel()
	rounds := pick(3, 20)
	sb := newScoreboard(t, "target-crash")
	rng := newRand(t)
	ctx := t.Context()
	// Its own server, to crash: synchronous_commit on, so what the Pilot
	// was told committed survives the crash (fsync stays off: only the
	// process dies, not the machine).
	pg := pgtmptest.StartWith(t, map[string]string{"synchronous_commit": "on"})
	dsn := newTarget(t, pgtmptest.NewDatabase(t, pg))
	d := servetest.NewDeployment(t, servetest.Options{Name: "faults-target", TargetDSN: dsn,
		Delegations: map[string][]byte{"tally.yaml": tallyDelegation(t)}})
	verifier, err := logbook.NewCheckpointVerifier(d.Opts.Name, d.CPKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	srv := d.Start(t, "serve.log")
	var mu sync.Mutex
	outcomes := map[string]string{}
	var approved atomic.Int64
	l := startLoad(d, srv.Addr, rng.Uint64(), 4, &mu, outcomes, make(chan string, 1024), &approved)
	defer l.halt()

	type outage struct{ down, up time.Time }
	var outages []outage
	var worstResume time.Duration
	since := time.Time{}
	for r := range rounds {
		servetest.WaitUntil(t, "statements executing", func() bool { return l.executedSince(since) })
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		if err := pg.Crash(); err != nil {
			t.Fatal(err)
		}
		down := time.Now()
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		// No postmaster runs from down to restarting; it may accept
		// connections before Restart has seen it ready.
		restarting := time.Now()
		if err := pg.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		up := time.Now()
		outages = append(outages, outage{down, restarting})
		servetest.WaitUntil(t, "statements executing after the restart", func() bool { return l.executedSince(up) })
		since = up
		sb.run()
		var resume time.Duration
		l.mu.Lock()
		for _, s := range l.sent {
			if s.at.After(up) && s.outcome == gateway.OutcomeExecuted {
				resume = s.back.Sub(up)
				break
			}
		}
		l.mu.Unlock()
		worstResume = max(worstResume, resume)
		t.Logf("round %d: target down %s (%s to restart); statements ran again %s after it was ready", r+1, restarting.Sub(down), up.Sub(restarting), resume)
	}
	l.halt()

	// Sent while the target was down and answered before it was back:
	// never executed.
	failed, referred := 0, 0
	codes := map[string]int{}
	for _, s := range l.sent {
		for _, o := range outages {
			if !s.at.After(o.down) || !s.back.Before(o.up) {
				continue
			}
			switch s.outcome {
			case gateway.OutcomeExecuted:
				sb.violate("a statement sent %s into an outage was answered executed", s.at.Sub(o.down))
			case "":
				failed++
				var he *servetest.HTTPError
				if errors.As(s.err, &he) {
					codes[fmt.Sprintf("%d %s", he.Status, he.Code)]++
				} else {
					codes["transport"]++
				}
			default:
				referred++
			}
		}
	}
	t.Logf("during the outages: %d error answers %v, %d referrals", failed, codes, referred)
	if failed+referred == 0 {
		t.Errorf("no statement was answered during an outage: the scenario tested nothing")
	}

	// Requests whose COMMIT's outcome was lost stay running until the
	// node's reconciliation (every second, after twice the marque TTL).
	time.Sleep(2*d.Opts.MarqueTTL + 1500*time.Millisecond)
	check := func(when string) *faults.Report {
		st := openStore(t, d.StorePath)
		defer st.Close()
		mu.Lock()
		answered := maps.Clone(outcomes)
		mu.Unlock()
		rep := sb.check(ctx, faults.Check{Store: st, Origin: d.Opts.Name + "/logbook", Verifier: verifier,
			CheckpointEvery: int64(d.Opts.CheckpointEvery), TargetDSN: dsn, Answered: answered}, when)
		checkTally(t, sb, dsn, rep, when)
		return rep
	}
	check("reconciled, serve running")
	srv.Stop(t)
	if err := d.VerifyLogbook(t); err != nil {
		sb.violate("at the end: %v", err)
	}
	rep := check("at the end")
	sb.figure("executed", rep.Executed)
	sb.figure("voided", rep.Voided)
	sb.figure("outage_errors", failed)
	sb.figure("outage_referrals", referred)
	sb.figure("resume_ms", worstResume.Milliseconds())
	sb.figure("approved", approved.Load())
}
