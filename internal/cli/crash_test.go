package cli_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/faults"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// TestServeKilledMidLoad kills a real serve process (SIGKILL) while agents
// are sending statements, restarts it, and checks that the logbook
// verifies, every request was resolved by the restart's reconciliation,
// and every statement that ran did so exactly once: one receipt in the
// target per executed request and none for any other (faults.Check; the
// fault-injection suite in internal/faults repeats this at random points).
func TestServeKilledMidLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)

	// Keys, signers, the Tier A delegation (without its quota, so the load
	// stays on the fast path), and the config, as an operator writes them.
	d := servetest.NewDeployment(t, servetest.Options{Name: "crash-test", TargetDSN: dsn})

	// Load: agents send reads, updates (each stuck order can be unstuck
	// once; after that the fence refuses it) and statements that refer.
	srv := d.Start(t, "serve1.log")
	lctx, stopLoad := context.WithCancel(ctx)
	client := &http.Client{Timeout: 30 * time.Second}
	var mu sync.Mutex
	answered := map[string]string{} // request id -> outcome the agent saw
	var completed atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for lctx.Err() == nil {
				var sql string
				switch k := rng.IntN(10); {
				case k < 5:
					sql = fmt.Sprintf("SELECT id, status FROM orders WHERE id = %d", 1+rng.IntN(240))
				case k < 8:
					sql = fmt.Sprintf("UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = %d", 1+rng.IntN(50))
				default:
					sql = fmt.Sprintf("SELECT id, total_cents FROM orders WHERE id = %d", 1+rng.IntN(240))
				}
				r, err := servetest.Post(lctx, client, srv.Addr, gatewaytest.AgentToken, gatewaytest.Target, sql)
				if err != nil {
					continue // the server is being killed
				}
				mu.Lock()
				answered[r.RequestID] = r.Outcome
				mu.Unlock()
				completed.Add(1)
			}
		}()
	}
	servetest.WaitUntil(t, "40 answered statements", func() bool { return completed.Load() >= 40 })
	srv.Kill(t)
	stopLoad()
	wg.Wait()
	t.Logf("killed serve after %d answered statements", completed.Load())

	// Restart once the marques of the killed process have expired (the
	// restart reconciles requests older than twice the marque TTL).
	time.Sleep(2500 * time.Millisecond)
	srv2 := d.Start(t, "serve2.log")
	r, err := servetest.Post(ctx, client, srv2.Addr, gatewaytest.AgentToken, gatewaytest.Target, "SELECT id, status FROM orders WHERE id = 1")
	if err != nil || r.Outcome != "executed" {
		t.Fatalf("after the restart: %+v, %v\n%s", r, err, srv2.LogText())
	}
	answered[r.RequestID] = r.Outcome
	srv2.Stop(t)

	// The logbook verifies, with the command an auditor would run.
	if err := d.VerifyLogbook(t); err != nil {
		t.Fatal(err)
	}

	// Every request is resolved, and ran at most once.
	st, err := store.Open(ctx, d.StorePath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	verifier, err := logbook.NewCheckpointVerifier(d.Opts.Name, d.CPKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := faults.Check{Store: st, Origin: d.Opts.Name + "/logbook", Verifier: verifier,
		CheckpointEvery: int64(d.Opts.CheckpointEvery), TargetDSN: dsn, Answered: answered}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Error(v)
	}
	t.Log(rep.Summary())
	if rep.Executed == 0 || rep.Requests < 40 {
		t.Errorf("the load did too little to test anything: %s", rep.Summary())
	}
}
