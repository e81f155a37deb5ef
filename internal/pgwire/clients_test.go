package pgwire_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/testtools"
)

// The client matrix: the client stacks agent developers use, each driven
// by a small program under testdata/clients against a real node, each
// step reported as one JSON line. Every step not listed in the client's
// expected failures must work; every listed one must still fail, so that
// a step that starts working fails the test until its line is removed
// (an xfail with strict=True). docs/pgwire.md has the table.

// The steps a client reports, in the order it runs them. A client that
// has no reflection API leaves out introspect; one without transactions
// leaves out the tx_ steps.
const (
	stepConnect    = "connect"     // connect, with its connect-time session queries
	stepIntrospect = "introspect"  // its reflection (table and column names)
	stepRead       = "read"        // the seed rows, read
	stepReadParam  = "read_param"  // one seed row, by a bound parameter
	stepTxCommit   = "tx_commit"   // insert and update in a transaction, commit, read back
	stepTxRollback = "tx_rollback" // insert in a transaction, roll back, check nothing changed
	stepTxReferral = "tx_referral" // a statement outside the bound in a transaction: an HM error, nothing changed
	stepClose      = "close"       // its session reset and close path
)

// notesDDL is the matrix's own table: two seed rows every client reads;
// each client writes rows of its own from its base id on.
const notesDDL = `CREATE TABLE public.notes (id bigint PRIMARY KEY, client text NOT NULL, body text NOT NULL);
INSERT INTO public.notes VALUES (1, 'seed', 'first'), (2, 'seed', 'second');`

// notesDelegation lets the agent read the notes, add some and change the
// body of those that are not seed rows; it has no delete rule, so a
// DELETE is outside its bound (referred, HM001).
func notesDelegation(exp time.Time) []byte {
	return fmt.Appendf(nil, `sentence: Keep the client matrix's notes.
grantee: agent:demo
target: shop
expires: %s
allow:
  - op: select
    table: public.notes
    columns: [id, client, body]
    max_rows: 100
  - op: insert
    table: public.notes
    columns: [id, client, body]
    max_rows: 5
  - op: update
    table: public.notes
    columns: [body]
    fence: id >= 1000
    max_rows: 5
`, exp.UTC().Format(time.RFC3339))
}

// matrixClient is one client stack of the matrix.
type matrixClient struct {
	name string
	lang string // python, node, java
	// module and debian: the Python module a python client imports, and
	// the Debian package that has it.
	module, debian string
	steps          []string
	// xfail: the steps expected to fail today, each with the reason.
	xfail map[string]string
}

var (
	allSteps  = []string{stepConnect, stepIntrospect, stepRead, stepReadParam, stepTxCommit, stepTxRollback, stepTxReferral, stepClose}
	noReflect = []string{stepConnect, stepRead, stepReadParam, stepTxCommit, stepTxRollback, stepTxReferral, stepClose}
	noTx      = []string{stepConnect, stepIntrospect, stepRead, stepReadParam, stepClose}
)

// matrix is the client matrix and what fails today. Keep docs/pgwire.md's
// table in step with it.
var matrix = []matrixClient{
	// psycopg2 in its default mode: a transaction opened implicitly before
	// the first statement.
	{name: "psycopg2", lang: "python", module: "psycopg2", debian: "python3-psycopg2", steps: noReflect},
	// psycopg 3 with autocommit=True and conn.transaction() blocks (its
	// COMMIT and ROLLBACK go as portals of the extended protocol).
	{name: "psycopg3", lang: "python", module: "psycopg", debian: "python3-psycopg", steps: noReflect},
	// asyncpg prepares every statement and takes its columns (and its
	// parameters' types) from the statement's Describe.
	{name: "asyncpg", lang: "python", module: "asyncpg", debian: "python3-asyncpg", steps: noReflect},
	// SQLAlchemy 1.4 over psycopg2 with a default engine: each new
	// connection looks up hstore's OIDs in pg_type (the shadow catalog).
	{name: "sqlalchemy", lang: "python", module: "sqlalchemy", debian: "python3-sqlalchemy", steps: allSteps},
	// SQLAlchemy with create_engine(use_native_hstore=False).
	{name: "sqlalchemy-nohstore", lang: "python", module: "sqlalchemy", debian: "python3-sqlalchemy", steps: allSteps},
	// pandas.read_sql over sqlalchemy-nohstore's engine; read_sql_table
	// reflects.
	{name: "pandas", lang: "python", module: "pandas", debian: "python3-pandas", steps: noTx},
	{name: "pg", lang: "node", steps: noReflect},
	// postgres.js prepares its tagged templates and takes their columns
	// from the statement's Describe.
	{name: "postgres.js", lang: "node", steps: noReflect},
	{name: "knex", lang: "node", steps: allSteps},
	// Sequelize reads type OIDs from pg_type (WITH ranges AS ...) on its
	// first connection.
	{name: "sequelize", lang: "node", steps: allSteps},
	{name: "typeorm", lang: "node", steps: allSteps},
	// LangChain's SqlDatabase (@langchain/classic) over a TypeORM
	// DataSource: it reflects the tables when made, describes them for the
	// model, runs its SQL (read makes one without reflection if need be).
	{name: "langchain", lang: "node", steps: []string{stepConnect, stepIntrospect, stepRead, stepClose}},
	// Prisma 7: its query compiler (WebAssembly) over the pg driver adapter,
	// interactive $transaction; no reflection (prisma db pull needs the
	// schema engine, a binary it downloads), so the schema is written out.
	{name: "prisma", lang: "node", steps: noReflect},
	{name: "jdbc", lang: "java", steps: allSteps},
}

// clientResult is one line a client program prints: a step's outcome,
// or (without a step) the client's version.
type clientResult struct {
	Client  string `json:"client"`
	Step    string `json:"step"`
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Version string `json:"version"`
}

// TestClientMatrix runs every client of the matrix against one node, one
// after the other (the machine has two cores), and checks each step
// against what is expected of it today.
func TestClientMatrix(t *testing.T) {
	f := newFixture(t)
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), notesDDL, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	f.sys.RefreshCatalog(t)
	y := notesDelegation(time.Now().Add(7 * 24 * time.Hour).Truncate(time.Hour))
	sig := gatewaytest.Sign(t, f.sys.Opts.Keys.Grantor, gatewaytest.Canonical(t, y, f.sys.Pilot.Catalog()))
	if _, _, err := f.sys.Gateway.AddDelegation(t.Context(), y, sig, "notes.yaml"); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(f.addr, ":")
	env := []string{
		"HM_PG_HOST=" + host, "HM_PG_PORT=" + port, "HM_PG_DATABASE=" + gatewaytest.Target,
		"HM_PG_USER=" + gatewaytest.Agent, "HM_PG_PASSWORD=" + gatewaytest.AgentToken,
	}
	var table []string
	for i, c := range matrix {
		base := 1000 * (i + 1)
		t.Run(c.name, func(t *testing.T) {
			cmd := clientCommand(t, c)
			cmd.Env = append(os.Environ(), append(env, "HM_CLIENT="+c.name, "HM_BASE_ID="+strconv.Itoa(base))...)
			version, got := runClient(t, cmd, c.name)
			table = append(table, checkClient(t, c, version, got))
			checkNotes(t, conn, c, base, got)
		})
	}
	t.Logf("client matrix:\n%s", strings.Join(table, "\n"))
}

// clientCommand is the command that runs client c, its runtime found
// and its dependencies installed (or the test skipped, failed under CI).
func clientCommand(t *testing.T, c matrixClient) *exec.Cmd {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "clients", c.lang))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	switch c.lang {
	case "python":
		// Debian's python3, which has the Debian client packages (not a
		// pyenv one earlier on PATH).
		py := "/usr/bin/python3"
		if _, err := os.Stat(py); err != nil {
			testtools.Missing(t, "Debian's /usr/bin/python3 is not installed (Debian: apt-get install python3)")
		}
		if out, err := exec.Command(py, "-c", "import "+c.module).CombinedOutput(); err != nil {
			testtools.Missing(t, fmt.Sprintf("python module %s is not installed (Debian: apt-get install %s): %s", c.module, c.debian, out))
		}
		cmd := exec.CommandContext(ctx, py, "-B", "matrix.py", c.name)
		cmd.Dir = dir
		return cmd
	case "node":
		node := testtools.Need(t, "node", "Debian: apt-get install nodejs")
		testtools.NPMCI(t, dir, "prisma")
		cmd := exec.CommandContext(ctx, node, "matrix.mjs", c.name)
		cmd.Dir = dir
		return cmd
	case "java":
		javac := testtools.Need(t, "javac", "Debian: apt-get install default-jdk-headless")
		java := testtools.Need(t, "java", "Debian: apt-get install default-jdk-headless")
		jar := "/usr/share/java/postgresql.jar"
		if _, err := os.Stat(jar); err != nil {
			testtools.Missing(t, "the PostgreSQL JDBC driver is not installed (Debian: apt-get install libpostgresql-jdbc-java): "+err.Error())
		}
		classes := t.TempDir()
		if out, err := exec.CommandContext(ctx, javac, "-d", classes, "-cp", jar, filepath.Join(dir, "Matrix.java")).CombinedOutput(); err != nil {
			t.Fatalf("javac Matrix.java: %v\n%s", err, out)
		}
		return exec.CommandContext(ctx, java, "-cp", classes+string(os.PathListSeparator)+jar, "Matrix")
	}
	t.Fatalf("client %s: unknown language %q", c.name, c.lang)
	return nil
}

// runClient runs a client program and returns its version and its steps'
// outcomes by step. A line that is not one of the client's results fails
// the test, and so does a program that exits with an error.
func runClient(t *testing.T, cmd *exec.Cmd, name string) (string, map[string]clientResult) {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	version, got := "", map[string]clientResult{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var r clientResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Client != name {
			t.Errorf("%s printed a line that is not one of its results: %q", name, sc.Text())
			continue
		}
		t.Logf("%s", sc.Text())
		switch {
		case r.Step == "":
			version = r.Version
		case got[r.Step] != (clientResult{}):
			t.Errorf("%s reported step %s twice", name, r.Step)
		default:
			got[r.Step] = r
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("%s: %v\nstderr: %s", name, err, stderr.String())
	}
	return version, got
}

// checkClient checks each step of c against its expectation and returns
// the client's line of the matrix.
func checkClient(t *testing.T, c matrixClient, version string, got map[string]clientResult) string {
	t.Helper()
	if version == "" {
		t.Errorf("%s did not report its version", c.name)
	}
	for step := range got {
		if !slices.Contains(c.steps, step) {
			t.Errorf("%s reported step %s, which is not one of its steps %v", c.name, step, c.steps)
		}
	}
	for step := range c.xfail {
		if !slices.Contains(c.steps, step) {
			t.Errorf("%s: expected failure of step %s, which is not one of its steps %v", c.name, step, c.steps)
		}
	}
	var works, fails []string
	for _, step := range c.steps {
		r, ok := got[step]
		reason, expectFail := c.xfail[step]
		switch {
		case !ok:
			t.Errorf("%s did not report step %s", c.name, step)
		case r.OK && expectFail:
			t.Errorf("%s %s works now: remove it from the expected failures (%s)", c.name, step, reason)
		case !r.OK && !expectFail:
			t.Errorf("%s %s failed: %s", c.name, step, r.Error)
		}
		if r.OK {
			works = append(works, step)
		} else {
			fails = append(fails, step)
		}
	}
	return fmt.Sprintf("%-12s %-8s works: %s; fails: %s", c.name, version, strings.Join(works, " "), strings.Join(fails, " "))
}

// checkNotes checks the client's rows in the target itself, whatever the
// client reported: a rolled-back or referred write is not there, the
// seed rows are intact, and the committed row is there exactly when the
// client says its commit worked.
func checkNotes(t *testing.T, conn *pgx.Conn, c matrixClient, base int, got map[string]clientResult) {
	t.Helper()
	rows, err := conn.Query(t.Context(), "SELECT id, client, body FROM public.notes WHERE id = ANY($1) OR client = 'seed' ORDER BY id",
		[]int64{int64(base + 1), int64(base + 2), int64(base + 3)})
	if err != nil {
		t.Fatal(err)
	}
	have := map[int]string{}
	for rows.Next() {
		var id int
		var client, body string
		if err := rows.Scan(&id, &client, &body); err != nil {
			t.Fatal(err)
		}
		have[id] = client + "/" + body
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if have[1] != "seed/first" || have[2] != "seed/second" {
		t.Errorf("%s: the target's notes are %v: want the seed rows 1 and 2 intact", c.name, have)
	}
	if b, ok := have[base+2]; ok {
		t.Errorf("%s: row %d, written in a transaction that rolled back, is in the target (%s)", c.name, base+2, b)
	}
	if b, ok := have[base+3]; ok {
		t.Errorf("%s: row %d, written in a transaction a referral aborted, is in the target (%s)", c.name, base+3, b)
	}
	want := c.name + "/committed, updated"
	b, ok := have[base+1]
	switch committed := got[stepTxCommit].OK; {
	case committed && b != want:
		t.Errorf("%s: tx_commit reported ok, but the target's row %d is %q, want %q", c.name, base+1, b, want)
	case !committed && ok:
		if reason, x := c.xfail[stepTxCommit]; x {
			// A commit the client was told failed; the reason says so.
			t.Logf("%s: tx_commit failed as expected (%s), and the target has its row %d (%s)", c.name, reason, base+1, b)
			break
		}
		t.Errorf("%s: tx_commit did not work, but the target has its row %d (%s)", c.name, base+1, b)
	}
}
