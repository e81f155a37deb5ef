package logbook

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/store/storetest"
)

// checkOneChain verifies the log f reads and checks that it holds want
// entries, is signed as the writers promise, and that a lookup by subject
// finds each writer's entries.
func checkOneChain(t *testing.T, f *fixture, want int64, writers int, every int64) {
	t.Helper()
	ctx := context.Background()
	rep := f.verify()
	if !rep.OK || rep.Entries != want || rep.TailTooLong {
		t.Fatalf("Verify = %v; want one intact chain of %d entries", rep, want)
	}
	cps, err := f.lb.Checkpoints(ctx)
	if err != nil || len(cps) == 0 {
		t.Fatalf("checkpoints: %v, %v", cpSizes(cps), err)
	}
	// Every checkpoint signs a distinct size; the writers sign when the
	// unsigned tail reaches every entries, whoever extended it.
	seen := map[int64]bool{}
	for _, cp := range cps {
		if seen[cp.Size] {
			t.Fatalf("two checkpoints at size %d", cp.Size)
		}
		seen[cp.Size] = true
	}
	if f.cancel != nil { // a running writer; lookups do not need it settled
		if err := f.lb.Settle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var total int64
	for w := range writers {
		es, err := f.lb.Find(ctx, Query{SubjectKey: "writer", SubjectValue: strconv.Itoa(w)})
		if err != nil {
			t.Fatal(err)
		}
		total += int64(len(es))
	}
	if total != want {
		t.Fatalf("lookups by subject found %d entries, want %d", total, want)
	}
}

// Several Logbooks, each on its own Store (as several nodes would be),
// append at once to one store, with small batches and frequent
// checkpoints: they produce one chain that Verify accepts.
func TestSeveralWritersOneChain(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		ctx := context.Background()
		const writers, appenders, each, every = 3, 4, 40, 7
		fs := make([]*fixture, writers)
		for i := range fs {
			fs[i] = openFixture(t, loc.Path, Config{CheckpointEvery: every, CheckpointInterval: 5 * time.Millisecond, MaxBatch: 8, IndexBatch: 16}, true)
		}
		var wg sync.WaitGroup
		for w, f := range fs {
			for a := range appenders {
				wg.Go(func() {
					for j := range each {
						_, err := f.lb.Append(ctx, Record{Kind: "decision",
							Subjects: map[string]string{"writer": strconv.Itoa(w), "request": fmt.Sprintf("r-%d-%d-%d", w, a, j)},
							Payload:  map[string]any{"w": w, "a": a, "j": j}})
						if err != nil {
							t.Errorf("writer %d: Append: %v", w, err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		checkOneChain(t, fs[0], writers*appenders*each, writers, every)
		for _, f := range fs {
			f.stop()
		}
		checkOneChain(t, fs[0], writers*appenders*each, writers, every)
	})
}

// envAppend asks TestAppendProcess to run as a child: the store location,
// its writer number and how many entries to append.
const envAppend = "HM_LOGBOOK_APPEND_CHILD"

// TestAppendProcess is the child of TestSeveralProcessesOneChain: it is a
// no-op unless envAppend is set.
func TestAppendProcess(t *testing.T) {
	spec := os.Getenv(envAppend)
	if spec == "" {
		return
	}
	var loc string
	var w, n int
	if _, err := fmt.Sscanf(spec, "%d %d %s", &w, &n, &loc); err != nil {
		t.Fatalf("%s=%q: %v", envAppend, spec, err)
	}
	f := openFixture(t, loc, Config{CheckpointEvery: 7, CheckpointInterval: 5 * time.Millisecond}, true)
	var wg sync.WaitGroup
	for a := range 4 {
		wg.Go(func() {
			for j := a; j < n; j += 4 {
				if _, err := f.lb.Append(context.Background(), Record{Kind: "decision",
					Subjects: map[string]string{"writer": strconv.Itoa(w), "request": fmt.Sprintf("r-%d-%d", w, j)},
					Payload:  map[string]any{"w": w, "j": j}}); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	f.stop()
}

// Three processes append to one store at once: one chain, verified.
func TestSeveralProcessesOneChain(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		const procs, each = 3, 60
		// Migrate first: the children then only open.
		first := openFixture(t, loc.Path, Config{CheckpointEvery: 7}, false)
		var wg sync.WaitGroup
		for w := range procs {
			wg.Go(func() {
				cmd := exec.Command(os.Args[0], "-test.run=^TestAppendProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %s", envAppend, w, each, loc.Path))
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Run(); err != nil {
					t.Errorf("child %d: %v\n%s", w, err, out.String())
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		checkOneChain(t, first, procs*each, procs, 7)
	})
}

// BenchmarkAppendWriters measures the durable append rate of 1 and 3
// writers (each a Logbook on its own Store, as separate nodes) sharing one
// store, with 16 concurrent appenders per writer. PostgreSQL runs with
// fsync on, as in production; SQLite with WAL and synchronous=FULL.
func BenchmarkAppendWriters(b *testing.B) {
	for _, d := range storetest.Drivers() {
		for _, writers := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/writers=%d", d, writers), func(b *testing.B) {
				loc := filepathFor(b, d)
				fs := make([]*fixture, writers)
				for i := range fs {
					fs[i] = openFixture(b, loc, Config{}, true)
				}
				ctx := context.Background()
				const appenders = 16
				per := b.N/(writers*appenders) + 1
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for _, f := range fs {
					for range appenders {
						wg.Go(func() {
							for j := range per {
								if _, err := f.lb.Append(ctx, Record{Kind: "decision",
									Subjects: map[string]string{"request": fmt.Sprintf("r-%d", j), "principal": "agent:ops-bot"},
									Payload:  map[string]any{"outcome": "conforms", "canonical_sql": "UPDATE public.orders SET status = 'failed' WHERE id = 42"}}); err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
				}
				wg.Wait()
				n := per * writers * appenders
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "appends/s")
				var commits int64
				for _, f := range fs {
					commits += f.lb.stats.commits.Load()
				}
				b.ReportMetric(float64(n)/float64(max(commits, 1)), "entries/commit")
			})
		}
	}
}

// durable is a PostgreSQL server with fsync on, for the benchmark.
var durable struct {
	once sync.Once
	srv  *pgtmp.Server
	err  error
}

func filepathFor(b *testing.B, d store.Driver) string {
	if d == store.SQLite {
		return storetest.New(b, d, &pg).Path
	}
	durable.once.Do(func() {
		durable.srv, durable.err = pgtmp.Start(context.Background(), pgtmp.Config{StartTimeout: 3 * time.Minute})
	})
	if durable.err != nil {
		b.Fatalf("durable PostgreSQL: %v", durable.err)
	}
	b.Cleanup(func() {}) // the server stops with the process's temp dir
	name := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	url, err := durable.srv.CreateDatabase(context.Background(), name)
	if err != nil {
		b.Fatal(err)
	}
	return url
}
