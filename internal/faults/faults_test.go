package faults_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/harbormaster-dev/harbormaster/internal/cli"
	"github.com/harbormaster-dev/harbormaster/internal/faults"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

var (
	long = flag.Bool("faults.long", os.Getenv("HARBORMASTER_FAULTS_LONG") == "1",
		"run the long fault scenarios (50 kills, more rounds); also HARBORMASTER_FAULTS_LONG=1")
	seedFlag = flag.Uint64("faults.seed", 0, "seed of the scenarios' random choices; 0 picks one (logged, to replay a run)")
)

var shared pgtmptest.Shared

// mainM runs the tests, then stops the shared PostgreSQL server.
type mainM struct{ m *testing.M }

func (w mainM) Run() int { return shared.Run(w.m) }

// TestMain makes this test binary double as the harbormaster command
// (servetest): the serve processes the scenarios kill run the code under
// test, built once with the test binary.
func TestMain(m *testing.M) {
	testscript.Main(mainM{m}, map[string]func(){
		"harbormaster": func() { os.Exit(cli.Do(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// pick returns n for the short run and longN for the long one.
func pick(n, longN int) int {
	if *long {
		return longN
	}
	return n
}

// newRand is a scenario's source of random choices, seeded from
// -faults.seed (or afresh) and logged so a failure can be replayed.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("fault seed=%d (replay: go test ./internal/faults -run '^%s$' -faults.seed %d)", seed, t.Name(), seed)
	return rand.New(rand.NewPCG(seed, 0x6861726d))
}

// scoreboard counts a scenario's runs and invariant violations and logs
// them as one line when the test ends, with the scenario's figures.
type scoreboard struct {
	t          *testing.T
	name       string
	mu         sync.Mutex
	runs       int
	violations int
	figures    map[string]string
}

func newScoreboard(t *testing.T, name string) *scoreboard {
	s := &scoreboard{t: t, name: name, figures: map[string]string{}}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		keys := make([]string, 0, len(s.figures))
		for k := range s.figures {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		fmt.Fprintf(&b, "fault scenario=%s runs=%d violations=%d", s.name, s.runs, s.violations)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, s.figures[k])
		}
		t.Log(b.String())
	})
	return s
}

func (s *scoreboard) run() {
	s.mu.Lock()
	s.runs++
	s.mu.Unlock()
}

// violate records an invariant violation and fails the test.
func (s *scoreboard) violate(format string, args ...any) {
	s.t.Helper()
	s.mu.Lock()
	s.violations++
	s.mu.Unlock()
	s.t.Errorf("violation: "+format, args...)
}

func (s *scoreboard) figure(k string, v any) {
	s.mu.Lock()
	s.figures[k] = fmt.Sprint(v)
	s.mu.Unlock()
}

// check runs the invariant check and records every violation.
func (s *scoreboard) check(ctx context.Context, c faults.Check, when string) *faults.Report {
	s.t.Helper()
	rep, err := c.Run(ctx)
	if err != nil {
		s.t.Fatalf("%s: %v", when, err)
	}
	for _, v := range rep.Violations {
		s.violate("%s: %s", when, v)
	}
	s.t.Logf("%s: %s", when, rep.Summary())
	return rep
}

// The tally: a table whose counter an executed write increments exactly
// once, so the target's rows say how many times each statement ran.
const (
	tallyRows  = 20
	tallyTable = `CREATE TABLE public.tally (id int PRIMARY KEY, n int NOT NULL DEFAULT 0, note text NOT NULL DEFAULT '');
INSERT INTO public.tally (id) SELECT generate_series(1, 20);`
)

// tallyDelegation is a Tier A delegation over the tally: reads, and an
// increment of one row at a time. A write of note is not covered: it
// refers, and an approver can approve it.
func tallyDelegation(t testing.TB) []byte {
	t.Helper()
	y := `sentence: Count visits in the tally.
grantee: agent:demo
target: shop
expires: EXPIRES
allow:
  - op: select
    table: public.tally
    columns: [id, n, note]
    max_rows: 100
  - op: update
    table: public.tally
    columns: [n]
    fence: id <= 20
    max_rows: 1
`
	return gatewaytest.WithExpiry([]byte(y), time.Now().Add(7*24*time.Hour).Truncate(time.Hour))
}

// newTarget is a fresh shop database with the tally, on srv.
func newTarget(t *testing.T, dsn string) string {
	t.Helper()
	gatewaytest.LoadShop(t, dsn)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), tallyTable); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// Statements of the load.
func incr(id int) string { return fmt.Sprintf("UPDATE tally SET n = n + 1 WHERE id = %d", id) }
func read(id int) string { return fmt.Sprintf("SELECT id, n FROM tally WHERE id = %d", id) }
func noted(id int) string {
	return fmt.Sprintf("UPDATE tally SET n = n + 1, note = 'approved' WHERE id = %d", id)
}
func randomStatement(rng *rand.Rand) (sql string, kind string) {
	id := 1 + rng.IntN(tallyRows)
	switch k := rng.IntN(10); {
	case k < 4:
		return incr(id), "write"
	case k < 8:
		return read(id), "read"
	default:
		return noted(id), "referral"
	}
}

var incrRE = regexp.MustCompile(`(?i)^UPDATE\s+(?:public\.)?tally\s+SET\s.*\bn\s*=\s*n\s*\+\s*1\b.*WHERE\s+id\s*=\s*(\d+)\s*$`)

// checkTally records tallyViolations as violations.
func checkTally(t *testing.T, s *scoreboard, dsn string, rep *faults.Report, when string) {
	t.Helper()
	for _, v := range tallyViolations(t, dsn, rep) {
		s.violate("%s: %s", when, v)
	}
}

// tallyViolations compares each counter with the executed increments of
// its row (rep.ExecutedSQL): an increment that ran twice, or ran without
// being executed in the store, shows as a difference.
func tallyViolations(t *testing.T, dsn string, rep *faults.Report) []string {
	t.Helper()
	want := map[int]int{}
	for _, sql := range rep.ExecutedSQL {
		if m := incrRE.FindStringSubmatch(strings.TrimSpace(sql)); m != nil {
			var id int
			fmt.Sscan(m[1], &id)
			want[id]++
		}
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), "SELECT id, n FROM tally ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		if n != want[id] {
			out = append(out, fmt.Sprintf("tally row %d is %d, but %d increments of it executed", id, n, want[id]))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// openStore opens a control store for a check (it may be in use).
func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
