package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/harbormaster-dev/harbormaster/internal/bench"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

// benchDelegation lets the benchmark update the same rows over and over.
const benchDelegation = `sentence: Touch the update time of the first forty orders.
grantee: agent:demo
target: shop
expires: 2099-01-01T00:00:00Z
allow:
  - op: select
    table: public.orders
    columns: [id, total_cents]
    max_rows: 100
  - op: update
    table: public.orders
    columns: [updated_at]
    fence: id <= 40
    max_rows: 1
`

// BenchmarkGovernedVsDirect measures what Harbormaster adds to a Tier A
// single-row UPDATE: the same kind of statement, a new text every time
// (bench.Workload), through POST /v1/statements and directly with pgx
// (bench.ExecDirect), side by side in one run. It reports the p50 and p99
// latency added at one client and the throughput ratio at 16 clients.
// BenchmarkHonestGovernedVsDirect runs the clients in a process of their
// own and splits the CPU time by process.
//
//	go test -run '^$' -bench GovernedVsDirect -benchtime 400x ./internal/gateway/
func BenchmarkGovernedVsDirect(b *testing.B) {
	srv, pool, client := benchSystem(b, benchDelegation, 64)
	w, err := bench.NewWorkload(1, 40, 16)
	if err != nil {
		b.Fatal(err)
	}

	governed := func(id int) error {
		return postStatement(client, srv.URL, w.Statement(int64(id)))
	}
	direct := func(id int) error {
		ctx := context.Background()
		return pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return bench.ExecDirect(ctx, c.Conn().PgConn(), w.Statement(int64(id))) })
	}

	// One client, interleaved, so both see the same machine state.
	var gLat, dLat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := 1 + i%40
		t0 := time.Now()
		if err := direct(id); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := governed(id); err != nil {
			b.Fatal(err)
		}
		dLat = append(dLat, t1.Sub(t0))
		gLat = append(gLat, time.Since(t1))
	}
	b.StopTimer()
	p := func(xs []time.Duration, q float64) time.Duration {
		s := append([]time.Duration(nil), xs...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[int(q*float64(len(s)-1))]
	}
	b.ReportMetric(float64(p(dLat, 0.5).Microseconds())/1000, "direct-p50-ms")
	b.ReportMetric(float64((p(gLat, 0.5)-p(dLat, 0.5)).Microseconds())/1000, "added-p50-ms")
	b.ReportMetric(float64((p(gLat, 0.99)-p(dLat, 0.99)).Microseconds())/1000, "added-p99-ms")

	// Sixteen clients, each for a fixed time. Alongside: the whole
	// machine's CPU time per statement (every process: PostgreSQL, the
	// control plane, the benchmark's own clients), which is what bounds
	// throughput when they share the machine's cores.
	var cpuPer [2]float64
	phase := 0
	through := func(f func(int) error) float64 {
		busy0, ok0 := machineBusy()
		defer func() { phase++ }()
		var n atomic.Int64
		var wg sync.WaitGroup
		stop := time.Now().Add(3 * time.Second)
		for c := 0; c < 16; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for i := 0; time.Now().Before(stop); i++ {
					// Each client owns rows so clients do not queue on row locks.
					if err := f(1 + (c+16*i)%40); err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			}(c)
		}
		wg.Wait()
		if busy1, ok1 := machineBusy(); ok0 && ok1 && n.Load() > 0 {
			cpuPer[phase] = float64((busy1 - busy0).Microseconds()) / float64(n.Load())
		}
		return float64(n.Load()) / 3
	}
	d16 := through(direct)
	g16 := through(governed)
	b.ReportMetric(d16, "direct-16c-stmt/s")
	b.ReportMetric(g16, "governed-16c-stmt/s")
	b.ReportMetric(g16/d16, "throughput-ratio-16c")
	if cpuPer[0] > 0 && cpuPer[1] > 0 {
		b.ReportMetric(cpuPer[0], "direct-machine-cpu-µs/stmt")
		b.ReportMetric(cpuPer[1], "governed-machine-cpu-µs/stmt")
	}
}

// benchSystem starts a system over a fresh demo target with delegation
// signed and added, its API on an HTTP server, a direct pgx pool on the
// target and an HTTP client keeping conns idle connections; all are closed
// when b ends.
func benchSystem(b *testing.B, delegation string, conns int) (*httptest.Server, *pgxpool.Pool, *http.Client) {
	b.Helper()
	dsn := pgtmptestDatabase(b)
	sys := gatewaytest.Start(b, gatewaytest.Options{TargetDSN: dsn, StorePath: storeLocation(b), Keys: gatewaytest.NewKeys(b)})
	canon := gatewaytest.Canonical(b, []byte(delegation), sys.Pilot.Catalog())
	if _, _, err := sys.Gateway.AddDelegation(context.Background(), []byte(delegation), gatewaytest.Sign(b, sys.Opts.Keys.Grantor, canon), "bench"); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(sys.API.Handler())
	b.Cleanup(srv.Close)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return srv, pool, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
}

// postStatement sends sql as the demo agent through POST /v1/statements
// and fails unless it executed.
func postStatement(client *http.Client, url, sql string) error {
	body, _ := json.Marshal(map[string]string{"target": "shop", "sql": sql})
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/statements", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+gatewaytest.AgentToken)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Outcome string   `json:"outcome"`
		Reasons []string `json:"reasons"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err
	}
	if r.Outcome != "executed" {
		return fmt.Errorf("governed statement %q: %s %v", sql, r.Outcome, r.Reasons)
	}
	return nil
}

// machineBusy is the CPU time all processes on the machine have spent so
// far (Linux /proc/stat: every state but idle and iowait), false elsewhere.
func machineBusy() (time.Duration, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(busy) * 10 * time.Millisecond, true
}

func pgtmptestDatabase(b *testing.B) string {
	b.Helper()
	dsn := pgtmptest.NewDatabase(b, shared.Server(b))
	gatewaytest.LoadShop(b, dsn)
	return dsn
}
