package faults_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/faults"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// load is agents sending statements to one serve process, and an approver
// approving some of their referrals, until stopped.
type load struct {
	stop     context.CancelFunc
	wg       sync.WaitGroup
	answered atomic.Int64

	mu       *sync.Mutex
	outcomes map[string]string // request id -> outcome the agent saw
	sent     []sent            // every statement of this load, in order answered
	referred chan string       // referrals an approver may approve
	approved *atomic.Int64
}

// startLoad starts agents (writes, reads and referrals) and an approver
// against addr. outcomes and referred outlive one load (they span kills).
func startLoad(d *servetest.Deployment, addr string, seed uint64, agents int, mu *sync.Mutex, outcomes map[string]string, referred chan string, approved *atomic.Int64) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{stop: cancel, mu: mu, outcomes: outcomes, referred: referred, approved: approved}
	client := &http.Client{Timeout: 30 * time.Second}
	for w := range agents {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for ctx.Err() == nil {
				sql, kind := randomStatement(rng)
				s := sent{at: time.Now()}
				a, err := servetest.Post(ctx, client, addr, gatewaytest.AgentToken, gatewaytest.Target, sql)
				s.back, s.err = time.Now(), err
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				if err == nil {
					s.outcome = a.Outcome
					l.outcomes[a.RequestID] = a.Outcome
				}
				l.sent = append(l.sent, s)
				l.mu.Unlock()
				if err != nil {
					continue // killed, or an error answer: not an outcome
				}
				l.answered.Add(1)
				if kind == "referral" && a.Outcome == gateway.OutcomeReferred {
					select {
					case referred <- a.RequestID:
					default:
					}
				}
			}
		}()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			select {
			case id := <-referred:
				v, err := d.Approve(ctx, client, addr, id)
				var he *servetest.HTTPError
				switch {
				case err == nil && v.Status == gateway.StatusExecuted:
					approved.Add(1)
				case errors.As(err, &he) && he.Status == http.StatusConflict:
					// Not waiting (or not previewable): leave it.
				case err != nil && ctx.Err() == nil:
					// Killed mid-approval, most likely: try it again later.
					select {
					case referred <- id:
					default:
					}
				}
			default:
			}
		}
	}()
	return l
}

// approveFresh approves request id; when its run finds that the rows
// changed since the preview its approval signed (the load wrote them
// meanwhile), the request is back in the queue for a fresh preview, as a
// human would find it, and is approved once more against that one. The
// second approval waits for the next second: a signed request is good
// once (the same request signed by the same key in the same second is a
// replay), as it is for a human's CLI.
func approveFresh(ctx context.Context, d *servetest.Deployment, client *http.Client, addr, id string) (*gateway.RequestView, error) {
	v, err := d.Approve(ctx, client, addr, id)
	if err == nil && v.Status == gateway.StatusWaiting && slices.Contains(v.Reasons, pilot.MessageApprovalDrift) {
		now := time.Now()
		time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now))
		return d.Approve(ctx, client, addr, id)
	}
	return v, err
}

// executedSince reports whether a statement sent after from was answered
// executed.
func (l *load) executedSince(from time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sent {
		if s.at.After(from) && s.outcome == gateway.OutcomeExecuted {
			return true
		}
	}
	return false
}

func (l *load) halt() {
	l.stop()
	l.wg.Wait()
}

// TestKillNode kills a real serve process with SIGKILL at random points of
// the statement path, again and again, restarting it on the same store:
// agents send compiled-path writes and reads and statements that refer,
// an approver approves referrals. After each restart (and at the end) the
// invariants hold (faults.Check), the tally's counters equal the executed
// increments, and a referral answered before the kill is approved after
// it and executes once.
func TestKillNode(t *testing.T) {
	t.Parallel()
	kills := pick(5, 50)
	sb := newScoreboard(t, "kill-node")
	rng := newRand(t)
	ctx := t.Context()
	dsn := newTarget(t, pgtmptest.NewDatabase(t, shared.Server(t)))
	d := servetest.NewDeployment(t, servetest.Options{Name: "faults-kill", TargetDSN: dsn,
		Delegations: map[string][]byte{"tally.yaml": tallyDelegation(t)}})
	verifier, err := logbook.NewCheckpointVerifier(d.Opts.Name, d.CPKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	outcomes := map[string]string{}
	referred := make(chan string, 1024)
	var approved atomic.Int64
	client := &http.Client{Timeout: 30 * time.Second}
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

	srv := d.Start(t, "serve-0.log")
	var answeredTotal int64
	var restart time.Duration
	for k := range kills {
		l := startLoad(d, srv.Addr, rng.Uint64(), 4, &mu, outcomes, referred, &approved)
		// At least a few statements through, then a random point.
		servetest.WaitUntil(t, "answered statements", func() bool { return l.answered.Load() >= 5 })
		time.Sleep(time.Duration(rng.IntN(800)) * time.Millisecond)
		srv.Kill(t)
		l.halt()
		answeredTotal += l.answered.Load()
		sb.run()

		// Restart once the killed process's marques have expired: the
		// restart reconciles requests older than twice the marque TTL.
		time.Sleep(2*d.Opts.MarqueTTL + 200*time.Millisecond)
		began := time.Now()
		srv = d.Start(t, fmt.Sprintf("serve-%d.log", k+1))
		restart = max(restart, time.Since(began))
		check(fmt.Sprintf("after kill %d", k+1))

		// A referral answered before the kill can be approved after it.
		var id string
		select {
		case id = <-referred:
		default:
		}
		if id == "" {
			t.Logf("after kill %d: no referral left to approve", k+1)
			continue
		}
		v, err := approveFresh(ctx, d, client, srv.Addr, id)
		var he *servetest.HTTPError
		switch {
		case errors.As(err, &he) && he.Status == http.StatusConflict:
			// Approved (or refused by its guards) before the kill.
			t.Logf("after kill %d: request %s is no longer waiting (%s)", k+1, id, he.Message)
		case err != nil:
			sb.violate("after kill %d: approving %s: %v\n%s", k+1, id, err, srv.LogText())
		case v.Status != gateway.StatusExecuted:
			sb.violate("after kill %d: approved %s is %s: %q (detail %q)", k+1, id, v.Status, v.Reasons, v.Detail)
		default:
			approved.Add(1)
		}
	}
	srv.Stop(t)
	if err := d.VerifyLogbook(t); err != nil {
		sb.violate("at the end: %v", err)
	}
	rep := check("at the end")
	sb.figure("answered", answeredTotal)
	sb.figure("executed", rep.Executed)
	sb.figure("approved", approved.Load())
	sb.figure("voided", rep.Voided)
	sb.figure("orphan_decisions", rep.Orphans)
	sb.figure("max_restart_ms", restart.Milliseconds())
	if rep.Executed == 0 || approved.Load() == 0 || rep.Requests < 5*kills {
		t.Errorf("the load did too little to test anything: %s, %d approved", rep.Summary(), approved.Load())
	}
}
