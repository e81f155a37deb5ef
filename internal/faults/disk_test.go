package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/faults"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// A filler makes the control store unwritable and writable again.
type filler interface {
	fill(t *testing.T)
	free(t *testing.T)
}

// diskFiller fills the file system the store is on (a small tmpfs) with
// a file until the kernel says ENOSPC; free removes it.
type diskFiller struct{ dir string }

func (f diskFiller) fill(t *testing.T) {
	t.Helper()
	file, err := os.Create(filepath.Join(f.dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := file.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

func (f diskFiller) free(t *testing.T) {
	t.Helper()
	if err := os.Remove(filepath.Join(f.dir, "filler")); err != nil {
		t.Fatal(err)
	}
}

// pageFiller caps the store's size at its current size on both write
// connections (PRAGMA max_page_count): SQLite answers every write that
// needs a new page with SQLITE_FULL, "database or disk is full", as on a
// full disk. It needs no privilege, so it is the fallback where no tmpfs
// can be mounted.
type pageFiller struct{ st *store.Store }

func (f pageFiller) set(t *testing.T, max string) {
	t.Helper()
	for _, db := range []string{"write", "ops"} {
		h := f.st.DB()
		if db == "ops" {
			h = f.st.OpsDB()
		}
		q := "PRAGMA max_page_count = " + max
		if max == "" {
			var n int64
			if err := h.QueryRowContext(t.Context(), "PRAGMA page_count").Scan(&n); err != nil {
				t.Fatal(err)
			}
			q = fmt.Sprintf("PRAGMA max_page_count = %d", n)
		}
		if _, err := h.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
}

func (f pageFiller) fill(t *testing.T) { f.set(t, "") }
func (f pageFiller) free(t *testing.T) { f.set(t, "4294967294") }

// TestLogbookFull makes the logbook unwritable while agents send
// statements: the control store's disk is filled (a 16 MiB tmpfs, where
// this process may mount one; CI runs as root) or, where it may not, the
// store is capped at its size (pageFiller): SQLite's own "database or disk
// is full" either way. Once the logbook has failed, nothing runs on the
// target that has no decision entry, and while the logbook takes no entry
// at all nothing runs (no receipt, no "executed"; agents get an error or a
// referral); it recovers by itself once space is freed. (A capped store
// still takes the odd entry that fits in its last pages: that statement
// may run, its decision recorded.)
// The invariants hold afterwards. Measured: how long after the fill the
// first failure came, and after the freeing the first statement ran.
func TestLogbookFull(t *testing.T) {
	t.Parallel()
	variants := []string{"disk"}
	if *long {
		variants = append(variants, "page-limit")
	}
	for _, v := range variants {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			logbookFull(t, v)
		})
	}
}

func logbookFull(t *testing.T, variant string) {
	rounds := pick(2, 10)
	sb := newScoreboard(t, "logbook-full-"+variant)
	rng := newRand(t)
	ctx := t.Context()
	dsn := newTarget(t, pgtmptest.NewDatabase(t, shared.Server(t)))
	dir := t.TempDir()
	useDisk := false
	if variant == "disk" {
		unmount, err := mountTmpfs(dir, 16<<20)
		if err != nil {
			t.Logf("no tmpfs (%v): the store is capped at its size instead (PRAGMA max_page_count)", err)
		} else {
			useDisk = true
			t.Cleanup(func() {
				if err := unmount(); err != nil {
					t.Errorf("unmount: %v", err)
				}
			})
		}
	}
	opt := gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(dir, "store.db"), Keys: gatewaytest.NewKeys(t), MarqueTTL: time.Second}
	opt.Gateway.ReconcileAfter = 2 * time.Second
	sys := gatewaytest.Start(t, opt)
	y := tallyDelegation(t)
	sig := gatewaytest.Sign(t, sys.Opts.Keys.Grantor, gatewaytest.Canonical(t, y, sys.Pilot.Catalog()))
	if _, _, err := sys.Gateway.AddDelegation(ctx, y, sig, "tally.yaml"); err != nil {
		t.Fatal(err)
	}
	var f filler = pageFiller{sys.Store}
	if useDisk {
		f = diskFiller{dir}
	}
	sb.figure("filler", map[bool]string{true: "tmpfs", false: "max_page_count"}[useDisk])

	var mu sync.Mutex
	answered := map[string]string{}
	var log []sent
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
			for lctx.Err() == nil {
				sql, _ := randomStatement(r)
				s := sent{at: time.Now()}
				resp, err := sys.Gateway.Submit(lctx, gatewaytest.Agent, gatewaytest.Target, sql)
				s.back, s.err = time.Now(), err
				mu.Lock()
				if err == nil {
					s.outcome = resp.Outcome
					answered[resp.RequestID] = resp.Outcome
				}
				log = append(log, s)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	first := func(from time.Time, ok func(sent) bool) (sent, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range log {
			if s.at.After(from) && ok(s) {
				return s, true
			}
		}
		return sent{}, false
	}
	executed := func(s sent) bool { return s.outcome == gateway.OutcomeExecuted }
	logFailed := func(s sent) bool { return errors.Is(s.err, gateway.ErrLogUnavailable) }
	waitFor := func(d time.Duration, cond func() bool) bool {
		deadline := time.Now().Add(d)
		for !cond() {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(10 * time.Millisecond)
		}
		return true
	}
	var worstFail, worstRecover time.Duration
	unwritable := 0 // rounds in which the logbook took no entry at all
	since := time.Time{}
	for r := range rounds {
		when := fmt.Sprintf("round %d", r+1)
		if !waitFor(time.Minute, func() bool { _, ok := first(since, executed); return ok }) {
			t.Fatalf("%s: nothing executes", when)
		}
		filled := time.Now()
		f.fill(t)
		if !waitFor(30*time.Second, func() bool { _, ok := first(filled, logFailed); return ok }) {
			sb.violate("%s: the store's disk is full, yet the logbook never failed in 30s", when)
			f.free(t)
			continue
		}
		failed, _ := first(filled, logFailed)
		// While it stays full: a statement runs only if its decision entry
		// was written. If the logbook took no entry at all, nothing runs.
		time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
		windowStart := time.Now()
		headBefore, receiptsBefore := logHead(t, sys.Store), receiptCount(t, dsn)
		time.Sleep(500 * time.Millisecond)
		headFull, receiptsFull := logHead(t, sys.Store), receiptCount(t, dsn)
		freed := time.Now()
		f.free(t)
		if !waitFor(30*time.Second, func() bool { _, ok := first(freed, executed); return ok }) {
			sb.violate("%s: space freed, yet nothing executed within 30s", when)
			continue
		}
		back, _ := first(freed, executed)
		sb.run()
		since = freed
		var ranWhileFull, errs, refs int
		mu.Lock()
		for _, s := range log {
			if !s.at.After(windowStart) || !s.back.Before(freed) {
				continue
			}
			switch {
			case s.outcome == gateway.OutcomeExecuted:
				ranWhileFull++
			case s.err != nil:
				errs++
			default:
				refs++
			}
		}
		mu.Unlock()
		t.Logf("%s: first logbook failure %s after the fill; while full: logbook head %d -> %d, %d executed, %d errors, %d referrals, receipts %d -> %d; first ran %s after the freeing",
			when, failed.back.Sub(filled), headBefore, headFull, ranWhileFull, errs, refs, receiptsBefore, receiptsFull, back.back.Sub(freed))
		if headFull == headBefore {
			unwritable++
			if ranWhileFull > 0 || receiptsFull != receiptsBefore {
				sb.violate("%s: while the logbook took no entry, %d statements executed and %d receipts were written", when, ranWhileFull, receiptsFull-receiptsBefore)
			}
		}
		if errs == 0 {
			sb.violate("%s: no agent got an error while the logbook could not be written", when)
		}
		worstFail = max(worstFail, failed.back.Sub(filled))
		worstRecover = max(worstRecover, back.back.Sub(freed))
	}
	if unwritable == 0 {
		sb.violate("in no round did the fill stop the logbook taking entries: the scenario tested nothing")
	}
	sb.figure("unwritable_rounds", unwritable)
	stop()
	wg.Wait()
	sys.Gateway.Drain()
	// Requests whose execution entry failed stay running until the node
	// reconciles them from their receipts.
	time.Sleep(opt.Gateway.ReconcileAfter + 1500*time.Millisecond)
	if _, err := sys.Logbook.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ans := answered
	mu.Unlock()
	rep := sb.check(ctx, faults.Check{Store: sys.Store, Origin: sys.Opts.Logbook.Origin, Verifier: sys.CheckpointVerifier,
		TargetDSN: dsn, Answered: ans}, "at the end")
	checkTally(t, sb, dsn, rep, "at the end")
	sb.figure("executed", rep.Executed)
	sb.figure("first_failure_ms", worstFail.Milliseconds())
	sb.figure("recover_ms", worstRecover.Milliseconds())
}

func logHead(t *testing.T, st *store.Store) int64 {
	t.Helper()
	var n int64
	if err := st.ReadDB().QueryRowContext(t.Context(), "SELECT coalesce(max(seq), 0) FROM logbook_entries").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func receiptCount(t *testing.T, dsn string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM harbormaster.receipts").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
