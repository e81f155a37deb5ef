package faults_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
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

// TestKillPilot kills the remote Pilot process (harbormaster pilot) with
// SIGKILL at random points of the statement path while agents send
// compiled-path writes, reads and referrals, and an approver approves
// referrals, through a serve process that stays up; then starts the Pilot
// again on the same address. A statement whose Execute lost its answer
// (the Pilot died after the request left serve) stays running, its agent
// answered with an error, until serve's reconciliation settles it from
// the receipt (VoidReceipt: a conflict means it committed, a success burns
// the marque); then it is final. After each round the invariants hold
// (faults.Check), the tally's counters equal the executed increments, no
// statement sent while the Pilot was down was answered executed, and each
// request left running at the kill was answered an error and ends
// executed with its receipt or burned by a void one.
func TestKillPilot(t *testing.T) {
	t.Parallel()
	kills := pick(4, 50)
	sb := newScoreboard(t, "kill-pilot")
	rng := newRand(t)
	ctx := t.Context()
	dsn := newTarget(t, pgtmptest.NewDatabase(t, shared.Server(t)))
	d := servetest.NewDeployment(t, servetest.Options{Name: "faults-pilot", TargetDSN: dsn,
		Delegations: map[string][]byte{"tally.yaml": tallyDelegation(t)},
		// Every statement the outage fails waits for a human; the long run
		// makes more of them than the default cap per agent.
		Extra: "queue:\n  max_waiting: -1\n"})
	rp := withRemotePilot(t, d)
	verifier, err := logbook.NewCheckpointVerifier(d.Opts.Name, d.CPKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	outcomes := map[string]string{}
	referred := make(chan string, 1024)
	var approved atomic.Int64
	client := &http.Client{Timeout: 30 * time.Second}
	st := openStore(t, d.StorePath)
	defer st.Close()
	check := func(when string) *faults.Report {
		mu.Lock()
		answered := maps.Clone(outcomes)
		mu.Unlock()
		rep := sb.check(ctx, faults.Check{Store: st, Origin: d.Opts.Name + "/logbook", Verifier: verifier,
			CheckpointEvery: int64(d.Opts.CheckpointEvery), TargetDSN: dsn, Answered: answered}, when)
		checkTally(t, sb, dsn, rep, when)
		return rep
	}
	running := func() map[string]bool {
		out := map[string]bool{}
		for id, s := range requestStatuses(t, st) {
			if s == string(gateway.StatusRunning) {
				out[id] = true
			}
		}
		return out
	}

	pilotProc := rp.start(t, "pilot-0.log")
	srv := d.Start(t, "serve.log")

	type outage struct{ down, up time.Time }
	var outages []outage
	var all []sent                // every load's statements
	leftRunning := 0              // requests running just after a kill
	everLeft := map[string]bool{} // their ids
	var worstResume, worstSettle time.Duration
	for k := range kills {
		when := fmt.Sprintf("after kill %d", k+1)
		l := startLoad(d, srv.Addr, rng.Uint64(), 4, &mu, outcomes, referred, &approved)
		// A few statements through, then a random point of the
		// statement path.
		servetest.WaitUntil(t, "answered statements", func() bool { return l.answered.Load() >= 5 })
		time.Sleep(time.Duration(rng.IntN(800)) * time.Millisecond)
		pilotProc.Kill(t)
		down := time.Now()
		sb.run()
		// What the kill left running: looked at once the calls it cut
		// have returned (a reset connection is seen at once), long before
		// reconciliation may touch them (twice the marque TTL).
		time.Sleep(100 * time.Millisecond)
		left := running()
		time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
		restarting := time.Now()
		pilotProc = rp.start(t, fmt.Sprintf("pilot-%d.log", k+1))
		up := time.Now()
		outages = append(outages, outage{down, restarting})
		servetest.WaitUntil(t, "statements executing after the Pilot's restart", func() bool { return l.executedSince(up) })
		l.halt()
		// A referral answered before the kill can be approved after it,
		// through the restarted Pilot.
		select {
		case id := <-referred:
			v, err := approveFresh(ctx, d, client, srv.Addr, id)
			var he *servetest.HTTPError
			switch {
			case errors.As(err, &he) && he.Status == http.StatusConflict:
				t.Logf("%s: request %s is no longer waiting (%s)", when, id, he.Message)
			case err != nil:
				sb.violate("%s: approving %s: %v", when, id, err)
			case v.Status != gateway.StatusExecuted:
				sb.violate("%s: approved %s is %s: %q (detail %q)", when, id, v.Status, v.Reasons, v.Detail)
			default:
				approved.Add(1)
			}
		default:
			t.Logf("%s: no referral left to approve", when)
		}
		var resume time.Duration
		for _, s := range l.sent {
			if s.at.After(up) && s.outcome == gateway.OutcomeExecuted {
				resume = s.back.Sub(up)
				break
			}
		}
		worstResume = max(worstResume, resume)
		all = append(all, l.sent...)

		// Reconciliation settles what the kill left running (and what the
		// halted load's last statements may have).
		servetest.WaitUntil(t, "the requests the kill left running settled", func() bool { return len(running()) == 0 })
		worstSettle = max(worstSettle, time.Since(down))
		leftRunning += len(left)
		for id := range left {
			everLeft[id] = true
		}
		t.Logf("%s: %d requests left running, all settled %s after the kill; Pilot down %s, statements ran again %s after its restart",
			when, len(left), time.Since(down).Round(time.Millisecond), restarting.Sub(down).Round(time.Millisecond), resume)
		check(when)
	}

	// Sent while the Pilot was down and answered before it was back:
	// never executed.
	failed, referrals := 0, 0
	codes := map[string]int{}
	for _, s := range all {
		for _, o := range outages {
			if !s.at.After(o.down) || !s.back.Before(o.up) {
				continue
			}
			switch s.outcome {
			case gateway.OutcomeExecuted:
				sb.violate("a statement sent %s into a Pilot outage was answered executed", s.at.Sub(o.down))
			case "":
				failed++
				var he *servetest.HTTPError
				if errors.As(s.err, &he) {
					codes[fmt.Sprintf("%d %s", he.Status, he.Code)]++
				} else {
					codes["transport"]++
				}
			default:
				referrals++
			}
		}
	}
	t.Logf("during the outages: %d error answers %v, %d referrals", failed, codes, referrals)
	if failed+referrals == 0 {
		t.Errorf("no statement was answered while the Pilot was down: the scenario tested nothing")
	}

	// The lost answers: settled by reconciliation, executed under a
	// receipt or burned by a void one, and never answered executed.
	lostExecuted, lostVoided := 0, 0
	statuses := requestStatuses(t, st)
	receipts := receiptsByMarque(t, dsn)
	for id, r := range reconciledRequests(t, st, d.Opts.Name+"/logbook") {
		void, ok := receipts[r.marque]
		if !everLeft[id] {
			var created, updated int64
			var path string
			if err := st.ReadDB().QueryRowContext(ctx, "SELECT created_ns, updated_ns, path FROM requests WHERE id = '"+id+"'").Scan(&created, &updated, &path); err != nil {
				t.Fatal(err)
			}
			var rel []string
			for _, o := range outages {
				rel = append(rel, fmt.Sprintf("created %s, updated %s after down, up at %s", time.Unix(0, created).Sub(o.down), time.Unix(0, updated).Sub(o.down), o.up.Sub(o.down)))
			}
			var lines []string
			for _, line := range strings.Split(srv.LogText(), "\n") {
				if strings.Contains(line, id) {
					lines = append(lines, line)
				}
			}
			sb.violate("request %s (%s) was settled by reconciliation but was not running just after a kill: %q\n%s", id, path, rel, strings.Join(lines, "\n"))
		}
		switch {
		case r.executed && statuses[id] == string(gateway.StatusExecuted) && ok && !void:
			lostExecuted++
		case !r.executed && statuses[id] == string(gateway.StatusWaiting) && ok && void:
			lostVoided++
		case !r.executed && statuses[id] == string(gateway.StatusExecuted) && ok && void && r.rerun != "" && !receipts[r.rerun]:
			// Burned by a void receipt, waiting again, then approved again
			// and run under a marque of its own, whose receipt is real.
			t.Logf("request %s: voided under %s, approved again and run under %s", id, r.marque, r.rerun)
			if _, found := receipts[r.rerun]; !found {
				sb.violate("request %s was approved again and answered executed, but its marque %s has no receipt", id, r.rerun)
			}
			lostVoided++
		default:
			sb.violate("request %s, reconciled (executed=%v), is %q with receipt=%v void=%v", id, r.executed, statuses[id], ok, void)
		}
		mu.Lock()
		if outcomes[id] == gateway.OutcomeExecuted {
			sb.violate("request %s, whose outcome reconciliation settled, was answered executed", id)
		}
		mu.Unlock()
	}
	if lostExecuted+lostVoided == 0 {
		t.Errorf("no kill cut an Execute: the scenario did not test a lost answer")
	}
	srv.Stop(t)
	pilotProc.Stop(t)
	if err := d.VerifyLogbook(t); err != nil {
		sb.violate("at the end: %v", err)
	}
	rep := check("at the end")
	sb.figure("executed", rep.Executed)
	sb.figure("approved", approved.Load())
	sb.figure("voided", rep.Voided)
	sb.figure("left_running", leftRunning)
	sb.figure("lost_executed", lostExecuted)
	sb.figure("lost_voided", lostVoided)
	sb.figure("outage_errors", failed)
	sb.figure("outage_referrals", referrals)
	sb.figure("resume_ms", worstResume.Milliseconds())
	sb.figure("max_settle_ms", worstSettle.Milliseconds())
	if rep.Executed == 0 || approved.Load() == 0 {
		t.Errorf("the load did too little to test anything: %s, %d approved", rep.Summary(), approved.Load())
	}
}
