package bench

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses: fields count from the last ')'.
	line := "4242 (postgres: a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 31 7 5 20 0 1 0 123 456 789"
	st, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st.comm != "postgres: a (b) c" || st.ppid != 17 || st.own != 281*tick || st.children != 12*tick {
		t.Fatalf("parsed %+v", st)
	}
	for _, bad := range []string{"", "12 postgres S 1", "12 (postgres) S 1 2 3", "12 (p) S x 0 0 0 0 0 0 0 0 0 1 2 3 4"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) = nil error", bad)
		}
	}
}

func TestParseMachineBusy(t *testing.T) {
	t.Parallel()
	// user nice system idle iowait irq softirq steal guest guest_nice
	d, err := parseMachineBusy("cpu  100 2 30 9000 50 4 6 1 7 3\ncpu0 1 2 3 4 5 6 7 8\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := 142 * tick; d != want {
		t.Fatalf("busy %s, want %s", d, want)
	}
	if _, err := parseMachineBusy("intr 1 2 3\n"); err == nil {
		t.Error("no cpu line: nil error")
	}
}

func TestOwnProcess(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		// The CPU split reads /proc: under CI (Linux) its absence is a failure.
		if os.Getenv("CI") == "true" {
			t.Fatalf("no /proc: %v", err)
		}
		t.Skip("no /proc")
	}
	st, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != os.Getppid() {
		t.Fatalf("parent %d, want %d", st.ppid, os.Getppid())
	}
	if _, err := machineBusy(); err != nil {
		t.Fatal(err)
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	var xs []time.Duration
	for i := 1; i <= 1000; i++ {
		xs = append(xs, time.Duration(i))
	}
	for _, c := range []struct {
		n    int
		q    float64
		want time.Duration
	}{
		{1000, 0.5, 500}, {1000, 0.99, 990}, {1000, 1, 1000}, {100, 0.99, 99}, {100, 0.5, 50}, {1, 0.99, 1}, {7, 0.5, 4}, {0, 0.5, 0},
	} {
		if got := percentile(xs[:c.n], c.q); got != c.want {
			t.Errorf("percentile(1..%d, %v) = %d, want %d", c.n, c.q, got, c.want)
		}
	}
}

func TestWorkload(t *testing.T) {
	t.Parallel()
	w, err := NewWorkload(DefaultFirstID, DefaultLastID, 16)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int64]int{}
	total := 0
	for c := range 16 {
		total += w.Rows(c)
		for i := range 3 * w.Rows(c) {
			id := w.Row(c, i)
			if id < DefaultFirstID || id > DefaultLastID {
				t.Fatalf("client %d row %d: id %d out of range", c, i, id)
			}
			if o, ok := owner[id]; ok && o != c {
				t.Fatalf("row %d belongs to clients %d and %d", id, o, c)
			}
			owner[id] = c
		}
	}
	if n := DefaultLastID - DefaultFirstID + 1; total != n || len(owner) != n {
		t.Fatalf("clients own %d rows (%d seen), want %d", total, len(owner), n)
	}
	seen := map[string]bool{}
	for i := range 1000 {
		s := w.Statement(w.AnyRow(i))
		if seen[s] {
			t.Fatalf("statement %q twice", s)
		}
		seen[s] = true
	}
	for _, c := range []struct {
		first, last int64
		clients     int
	}{{1, 10, 11}, {0, 10, 1}, {5, 4, 1}, {1, 10, 0}} {
		if _, err := NewWorkload(c.first, c.last, c.clients); err == nil {
			t.Errorf("NewWorkload(%d, %d, %d): nil error", c.first, c.last, c.clients)
		}
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	c := Config{API: "http://x/", Token: "t", DSN: "d"}.WithDefaults()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if c.API != "http://x" || c.Target != "shop" || c.Statements != 1000 || c.Clients != 16 || c.Duration != 3*time.Second ||
		c.FirstID != DefaultFirstID || c.LastID != DefaultLastID || c.Warmup != 20 {
		t.Fatalf("defaults: %+v", c)
	}
	for name, bad := range map[string]Config{
		"API":        {Token: "t", DSN: "d"},
		"Token":      {API: "a", DSN: "d"},
		"DSN":        {API: "a", Token: "t"},
		"Statements": {API: "a", Token: "t", DSN: "d", Statements: -1},
		"Duration":   {API: "a", Token: "t", DSN: "d", Duration: -time.Second},
		"Clients":    {API: "a", Token: "t", DSN: "d", Clients: -2},
		"NodePID":    {API: "a", Token: "t", DSN: "d", NodePID: -1},
	} {
		if err := bad.WithDefaults().validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming it", name, err)
		}
	}
}

func TestNotExecutedError(t *testing.T) {
	t.Parallel()
	e := &NotExecutedError{Governed: true, SQL: "UPDATE x", Outcome: "referred", RequestID: "req_1", Reasons: []string{"a", "b"}}
	if got, want := e.Error(), `bench: governed statement "UPDATE x" was referred (request req_1): a; b`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	e = &NotExecutedError{SQL: "UPDATE x", Rows: 0}
	if got, want := e.Error(), `bench: direct statement "UPDATE x" affected 0 rows, want 1`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
