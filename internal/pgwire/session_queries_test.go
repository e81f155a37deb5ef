package pgwire_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
)

// answer is one statement's result as the wire carries it: columns, type
// OIDs, rows in text ("<NULL>" for NULL), tag, or the error's SQLSTATE.
type answer struct {
	cols []string
	oids []uint32
	rows [][]string
	tag  string
	code string
}

func (a answer) String() string {
	if a.code != "" {
		return "error " + a.code
	}
	return fmt.Sprintf("%v %v %v %q", a.cols, a.oids, a.rows, a.tag)
}

func answersOf(results []*pgconn.Result, err error) []answer {
	var out []answer
	for _, r := range results {
		a := answer{tag: r.CommandTag.String()}
		for _, fd := range r.FieldDescriptions {
			a.cols = append(a.cols, fd.Name)
			a.oids = append(a.oids, fd.DataTypeOID)
		}
		for _, row := range r.Rows {
			var cells []string
			for _, v := range row {
				if v == nil {
					cells = append(cells, "<NULL>")
				} else {
					cells = append(cells, string(v))
				}
			}
			a.rows = append(a.rows, cells)
		}
		if r.Err != nil {
			a = answer{code: sqlstate(r.Err)}
		}
		out = append(out, a)
	}
	if err != nil && (len(out) == 0 || out[len(out)-1].code == "") {
		out = append(out, answer{code: sqlstate(err)})
	}
	return out
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return "not a PostgreSQL error: " + err.Error()
}

// simple sends sql as one Query message (the simple protocol).
func simple(ctx context.Context, c *pgconn.PgConn, sql string) []answer {
	return answersOf(c.Exec(ctx, sql).ReadAll())
}

// extended sends sql as Parse, Bind, Describe (portal), Execute, Sync,
// results in text.
func extended(ctx context.Context, c *pgconn.PgConn, sql string) answer {
	r := c.ExecParams(ctx, sql, nil, nil, nil, nil).Read()
	return answersOf([]*pgconn.Result{r}, nil)[0]
}

// noneDecided fails t when the logbook holds a decision or the queue a
// request: a session query answered at the front is neither.
func noneDecided(t *testing.T, f *fixture) {
	t.Helper()
	n := 0
	if err := f.sys.Logbook.Iterate(t.Context(), logbook.Query{Kind: logbook.KindDecision}, func(logbook.Entry) error {
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	q, err := f.sys.Gateway.Queue(t.Context(), []string{gatewaytest.Target})
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 || len(q) != 0 {
		t.Fatalf("session queries left %d decisions in the logbook and %d requests in the queue; want none", n, len(q))
	}
}

// constantQueries are FROM-less SELECTs of constants (and casts of them)
// the front answers, each exactly as PostgreSQL does: column names, type
// OIDs, text, tag, or the error's SQLSTATE.
var constantQueries = []string{
	"SELECT 1",
	"SELECT 1 AS x",
	"SELECT 'a'::text",
	"SELECT NULL",
	"SELECT 'a'",
	"SELECT true, false",
	"SELECT 1.50, -1, 3000000000, -2147483648, 2147483648, 99999999999999999999, 007",
	"SELECT 1e3, 1.5e-3, .5, 5., -0.0, 0.000, 1.50e1, 007.50, -00.5e1",
	"SELECT '00012.5'::numeric, ' 0005 '::int2",
	"SELECT '5'::int2, ' 7 '::int4, '-9'::int8, '+3'::integer, 'yes'::bool, 'of'::boolean, ' TRUE '::bool, 1::bool, 0::bool",
	"SELECT 'x'::varchar, 'y'::name, 1::text, true::text, 1.5::text, 3000000000::numeric, true::int4",
	"SELECT '12.340'::numeric, ' -0.50 '::numeric, '1e2'::numeric, 7::numeric, NULL::int4, NULL::text::int8",
	`SELECT 'a' AS "Mixed Case", 1 AS x, 2 AS x`,
	"SELECT 'a'::text::name::varchar",
	"SELECT 1+1 AS result, 2 * 3, 7 - 10, 32767::int2 - 1::int2, 2147483647 + 1::int8, 1::int2 * 3, (2 + 3) * 4, NULL::int4 + 1",
	"SELECT 2147483647 + 1",
	"SELECT 32767::int2 + 1::int2",
	"SELECT 9223372036854775807 * 2",
	"SELECT pg_catalog.version() IS NULL", // not answered: an operator
	"SELECT 'abc'::int4",
	"SELECT '99999'::int2",
	"SELECT 'maybe'::bool",
	"SELECT 3000000000::int4",
	"SELECT 'x'::numeric",
	"SELECT ''::int8",
}

// TestSessionQueriesLikePostgres: the constant SELECTs clients send
// answer on the front as on PostgreSQL itself, in the simple and the
// extended protocol, and none of them is decided, recorded or queued.
func TestSessionQueriesLikePostgres(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	front := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable").PgConn()
	direct, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(context.Background())
	for _, q := range constantQueries {
		if q == "SELECT pg_catalog.version() IS NULL" {
			continue // below: it takes the statement path
		}
		want := simple(ctx, direct.PgConn(), q)
		if got := simple(ctx, front, q); !reflect.DeepEqual(got, want) {
			t.Errorf("%s (simple)\n front: %v\n  want: %v", q, got, want)
		}
		if got := extended(ctx, front, q); !reflect.DeepEqual(got, want[0]) {
			t.Errorf("%s (extended)\n front: %v\n  want: %v", q, got, want[0])
		}
	}
	noneDecided(t, f)

	// A FROM-less SELECT of another function, or of an operator, is not
	// evaluated at the front: it takes the statement path, which decides
	// it (here: referred or refused, with its request id).
	for _, q := range []string{"SELECT pg_sleep(1)", "SELECT current_setting('search_path')", "SELECT 1 / 1", "SELECT 1.5 + 1", "SELECT '1' + 1",
		"SELECT random()", "SELECT pg_catalog.version() IS NULL", "SELECT upper('a')", "SELECT 0x1F", "SELECT 1.5::float8",
		"SELECT ARRAY[1]", "SELECT 'a'::varchar(3)"} {
		start := time.Now()
		_, err := front.Exec(ctx, q).ReadAll()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Where, "req_") {
			t.Errorf("%s: %v; want a decision of the statement path, with its request id", q, err)
		}
		if q == "SELECT pg_sleep(1)" && time.Since(start) >= time.Second {
			t.Errorf("%s slept", q)
		}
	}
}

// TestSessionFunctions: version(), current_user, current_database(),
// current_schema(s) and now() answer from the session, with PostgreSQL's
// column names and types; nothing is decided or queued.
func TestSessionFunctions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	conn := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	front := conn.PgConn()
	direct, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(context.Background())
	before := time.Now().UTC().Truncate(time.Microsecond)
	for _, c := range []struct {
		sql  string
		rows [][]string // nil: not compared
	}{
		{"SELECT version()", [][]string{{"PostgreSQL 15.0 (Harbormaster wire front)"}}},
		{"select pg_catalog.version()", [][]string{{"PostgreSQL 15.0 (Harbormaster wire front)"}}},
		{"SELECT current_database()", [][]string{{"shop"}}},
		{"SELECT current_user, session_user, user, current_role, current_catalog, current_schema",
			[][]string{{"agent:demo", "agent:demo", "agent:demo", "agent:demo", "shop", "public"}}},
		{"SELECT current_schema()", [][]string{{"public"}}},
		{"SELECT current_schemas(true), current_schemas(false), current_schemas(NULL)", [][]string{{"{pg_catalog,public}", "{public}", "<NULL>"}}},
		{"SELECT * FROM current_schema()", [][]string{{"public"}}},
		{"SELECT * FROM pg_catalog.current_database() AS db", [][]string{{"shop"}}},
		{"SELECT current_user::text AS who, version()::varchar", [][]string{{"agent:demo", "PostgreSQL 15.0 (Harbormaster wire front)"}}},
		{"SELECT pg_advisory_unlock_all()", [][]string{{""}}},
		{"SELECT now(), current_timestamp", nil},
	} {
		want := simple(ctx, direct.PgConn(), c.sql)[0]
		for _, got := range []answer{simple(ctx, front, c.sql)[0], extended(ctx, front, c.sql)} {
			if got.code != "" || !reflect.DeepEqual(got.cols, want.cols) || !reflect.DeepEqual(got.oids, want.oids) || got.tag != want.tag {
				t.Errorf("%s\n front: %v\n  want: %v", c.sql, got, want)
			}
			if c.rows != nil && !reflect.DeepEqual(got.rows, c.rows) {
				t.Errorf("%s: rows %v, want %v", c.sql, got.rows, c.rows)
			}
		}
	}
	// now() is the front's clock, in UTC, to the microsecond.
	var now, ts time.Time
	if err := conn.QueryRow(ctx, "SELECT now(), current_timestamp").Scan(&now, &ts); err != nil {
		t.Fatal(err)
	}
	if now.Before(before) || now.After(time.Now()) || !ts.Equal(now) {
		t.Errorf("now() = %v, current_timestamp %v; want the same instant, from %v to now", now, ts, before)
	}
	// pgx's own decoding: current_schemas is name[].
	var path []string
	if err := conn.QueryRow(ctx, "SELECT current_schemas(true)").Scan(&path); err != nil || !reflect.DeepEqual(path, []string{"pg_catalog", "public"}) {
		t.Errorf("current_schemas(true) = %v (%v)", path, err)
	}
	noneDecided(t, f)
}

// TestSessionShow: SHOW of the settings clients read answers with the
// column PostgreSQL names and the session's value; a prepared SHOW or
// SELECT is described before it is bound (Describe of the statement).
func TestSessionShow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	front := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable").PgConn()
	direct, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(context.Background())
	for _, c := range []struct{ sql, value string }{
		{"SHOW server_version", "15.0"},
		{"SHOW server_version_num", "150000"},
		{"SHOW transaction isolation level", "read committed"},
		{"SHOW TRANSACTION ISOLATION LEVEL", "read committed"},
		{"SHOW default_transaction_isolation", "read committed"},
		{"SHOW standard_conforming_strings", "on"},
		{"SHOW client_encoding", "UTF8"},
		{"SHOW DateStyle", "ISO, MDY"},
		{"SHOW TimeZone", "UTC"},
		{"show timezone", "UTC"},
		{"SHOW integer_datetimes", "on"},
		{"SHOW max_identifier_length", "63"},
		{"SHOW application_name", ""},
		{"SHOW search_path", "public"},
		{"SHOW statement_timeout", "5s"},
		{"SHOW lock_timeout", "2s"},
		{"SHOW idle_in_transaction_session_timeout", "0"},
		{"SHOW session_authorization", "agent:demo"},
	} {
		want := simple(ctx, direct.PgConn(), c.sql)[0]
		for _, got := range []answer{simple(ctx, front, c.sql)[0], extended(ctx, front, c.sql)} {
			if !reflect.DeepEqual(got.cols, want.cols) || !reflect.DeepEqual(got.oids, want.oids) || got.tag != want.tag ||
				!reflect.DeepEqual(got.rows, [][]string{{c.value}}) {
				t.Errorf("%s\n front: %v\n  want: %v with %q", c.sql, got, want, c.value)
			}
		}
	}
	// Describe of a prepared statement answered here has its row
	// description (asyncpg and JDBC describe before they bind).
	for sql, cols := range map[string]string{"SELECT version()": "version", "SHOW TimeZone": "TimeZone",
		"SELECT 1 AS x, current_schemas(false)": "x,current_schemas", "SET application_name = 'x'": ""} {
		sd, err := front.Prepare(ctx, "", sql, nil)
		if err != nil {
			t.Fatalf("prepare %s: %v", sql, err)
		}
		var names []string
		for _, fd := range sd.Fields {
			names = append(names, fd.Name)
		}
		if strings.Join(names, ",") != cols {
			t.Errorf("Describe of %q: columns %v, want %q", sql, names, cols)
		}
	}
	_, err = front.Exec(ctx, "SHOW no_such_setting").ReadAll()
	pgErr(t, err, "42704")
	noneDecided(t, f)
}

// TestSessionSettings: SET of a UTC time zone, of timeouts that keep or
// tighten the operator's, of the pinned search path; a loosening timeout
// and another zone are refused with the reason; the startup message takes
// the same.
func TestSessionSettings(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	conn := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	c := conn.PgConn()
	show := func(name string) string {
		t.Helper()
		a := simple(ctx, c, "SHOW "+name)
		if len(a) != 1 || a[0].code != "" || len(a[0].rows) != 1 {
			t.Fatalf("SHOW %s: %v", name, a)
		}
		return a[0].rows[0][0]
	}
	for _, sql := range []string{"SET TIME ZONE 'UTC'", "SET TIME ZONE INTERVAL '+00:00' HOUR TO MINUTE", "SET timezone TO 'Etc/UTC'",
		"SET timezone TO 'GMT'", "SET TIME ZONE 0", "SET TIME ZONE LOCAL", "SET application_name = 'pool'", "SET client_encoding = 'UTF8'",
		"SET extra_float_digits = 3", "SET DateStyle = 'ISO'", "SET datestyle TO 'ISO, MDY'", "SET search_path TO public",
		"SET search_path = 'public'", "SET SESSION AUTHORIZATION DEFAULT", "RESET SESSION AUTHORIZATION"} {
		if a := simple(ctx, c, sql); len(a) != 1 || a[0].code != "" {
			t.Errorf("%s: %v", sql, a)
		}
	}
	if show("TimeZone") != "UTC" || c.ParameterStatus("TimeZone") != "UTC" || show("application_name") != "pool" {
		t.Errorf("after the SETs: TimeZone %q (status %q), application_name %q", show("TimeZone"), c.ParameterStatus("TimeZone"), show("application_name"))
	}
	for _, c2 := range []struct{ sql, code string }{
		{"SET TIME ZONE 'Europe/Paris'", "22023"},
		{"SET TIME ZONE INTERVAL '+01:00' HOUR TO MINUTE", "22023"},
		{"SET DateStyle = 'ISO, DMY'", "22023"},
		{"SET search_path = secret", "0A000"},
		{"SET search_path TO public, secret", "0A000"},
		{"SET SESSION AUTHORIZATION 'agent:other'", "42501"},
		{"SET statement_timeout = 0", "42501"},
		{"SET statement_timeout = '6s'", "42501"},
		{"SET lock_timeout = '1min'", "42501"},
		{"SET lock_timeout = 0", "42501"},
		{"SET statement_timeout = 'soon'", "22023"},
		{"SET statement_timeout = '1S'", "22023"},
		{"SET statement_timeout = -1", "22023"},
		{"SET role = 'postgres'", "0A000"},
	} {
		a := simple(ctx, c, c2.sql)
		if len(a) != 1 || a[0].code != c2.code {
			t.Errorf("%s: %v, want %s", c2.sql, a, c2.code)
		}
	}
	_, err := c.Exec(ctx, "SET statement_timeout = 0").ReadAll()
	if pe := pgErr(t, err, "42501"); !strings.Contains(pe.Message, "loosen the operator's limit of 5s") {
		t.Errorf("the refusal does not say why: %s", pe.Message)
	}
	// Keeping or tightening the operator's limits.
	for sql, want := range map[string][2]string{
		"SET statement_timeout = '1s'":                    {"statement_timeout", "1s"},
		"SET statement_timeout = 1500":                    {"statement_timeout", "1500ms"},
		"SET statement_timeout TO '5s'":                   {"statement_timeout", "5s"},
		"SET lock_timeout = '500ms'":                      {"lock_timeout", "500ms"},
		"SET idle_in_transaction_session_timeout = '30s'": {"idle_in_transaction_session_timeout", "30s"},
		"SET idle_in_transaction_session_timeout = 0":     {"idle_in_transaction_session_timeout", "0"},
	} {
		if a := simple(ctx, c, sql); len(a) != 1 || a[0].code != "" {
			t.Errorf("%s: %v", sql, a)
		} else if got := show(want[0]); got != want[1] {
			t.Errorf("after %s, SHOW %s = %q, want %q", sql, want[0], got, want[1])
		}
	}
	simple(ctx, c, "SET statement_timeout = '1s'")
	if a := simple(ctx, c, "RESET ALL"); len(a) != 1 || a[0].tag != "RESET" {
		t.Fatalf("RESET ALL: %v", a)
	}
	if show("statement_timeout") != "5s" || show("application_name") != "" {
		t.Errorf("after RESET ALL: statement_timeout %q, application_name %q", show("statement_timeout"), show("application_name"))
	}
	// Startup parameters, on the same rules.
	base := f.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	sc, err := pgx.Connect(ctx, base+"&options=-c%20search_path%3Dpublic%20-c%20lock_timeout%3D1s&statement_timeout=3000&application_name=app&extra_float_digits=3&DateStyle=ISO")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(context.Background())
	for name, want := range map[string]string{"statement_timeout": "3s", "lock_timeout": "1s", "search_path": "public", "application_name": "app"} {
		var got string
		if err := sc.QueryRow(ctx, "SHOW "+name).Scan(&got); err != nil || got != want {
			t.Errorf("SHOW %s after the startup = %q (%v), want %q", name, got, err, want)
		}
	}
	// RESET restores the startup's value, as in PostgreSQL.
	var st string
	if _, err := sc.Exec(ctx, "SET statement_timeout = '1s'"); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Exec(ctx, "RESET statement_timeout"); err != nil {
		t.Fatal(err)
	}
	if err := sc.QueryRow(ctx, "SHOW statement_timeout").Scan(&st); err != nil || st != "3s" {
		t.Errorf("RESET statement_timeout: %q (%v), want the startup's 3s", st, err)
	}
	for _, q := range []string{"statement_timeout=0", "lock_timeout=10s", "options=-c%20statement_timeout%3D1h", "options=-c%20search_path%3Dsecret"} {
		_, err := pgx.Connect(ctx, base+"&"+q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Severity != "FATAL" || pe.Code != "42501" && pe.Code != "0A000" {
			t.Errorf("startup with %s: %v, want a FATAL refusal", q, err)
		}
	}
	noneDecided(t, f)
	// A governed read still runs, under the operator's settings.
	var id int64
	if err := conn.QueryRow(ctx, "SELECT id FROM orders WHERE id = 2").Scan(&id); err != nil || id != 2 {
		t.Fatalf("a read after the settings: %v", err)
	}
}

// TestSessionResets: the batches pools send when they give a connection
// back are answered statement by statement with PostgreSQL's tags, and
// reset what they say.
func TestSessionResets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	front := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable").PgConn()
	direct, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(context.Background())
	for _, sql := range []string{
		// asyncpg's reset query (Connection._get_reset_query), since 0.30.
		"SELECT pg_advisory_unlock_all();\nCLOSE ALL;\nUNLISTEN *;\nRESET ALL;",
		// Before 0.30, with its DO block.
		`SELECT pg_advisory_unlock_all();
CLOSE ALL;

                DO $$
                BEGIN
                    PERFORM * FROM pg_listening_channels() LIMIT 1;
                    IF FOUND THEN
                        UNLISTEN *;
                    END IF;
                END;
                $$;
            
RESET ALL;`,
		"DISCARD ALL",
		"DEALLOCATE ALL",
		"RESET ALL",
		"UNLISTEN *",
		"CLOSE ALL",
		"SET SESSION AUTHORIZATION DEFAULT",
		"SET SESSION AUTHORIZATION DEFAULT; RESET ALL",
		"DISCARD PLANS; DISCARD SEQUENCES",
		"RESET ALL; DISCARD ALL",
		"CLOSE nosuch",
		"DEALLOCATE nosuch",
	} {
		want := simple(ctx, direct.PgConn(), sql)
		if got := simple(ctx, front, sql); !reflect.DeepEqual(got, want) {
			t.Errorf("%q\n front: %v\n  want: %v", sql, got, want)
		}
	}
	// DISCARD ALL forgets the prepared statements and the settings.
	if _, err := front.Prepare(ctx, "kept", "SELECT 1", nil); err != nil {
		t.Fatal(err)
	}
	simple(ctx, front, "SET application_name = 'borrowed'")
	simple(ctx, front, "DISCARD ALL")
	if front.ParameterStatus("application_name") != "" {
		t.Errorf("application_name %q after DISCARD ALL", front.ParameterStatus("application_name"))
	}
	if a := simple(ctx, front, "DEALLOCATE kept"); len(a) != 1 || a[0].code != "26000" {
		t.Errorf("a statement prepared before DISCARD ALL: %v", a)
	}
	noneDecided(t, f)
}

// TestSessionSearchPathPinned: with a target whose Pilot pins another
// search path, the session answers that one, and SET may name it only.
func TestSessionSearchPathPinned(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(o *gatewaytest.Options) { o.Pilot.SearchPath = []string{"sales", "public"} })
	ctx := t.Context()
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable").PgConn()
	want := map[string][][]string{
		"SHOW search_path": {{"sales, public"}},
		"SELECT current_schema, current_schemas(true)":       {{"sales", "{pg_catalog,sales,public}"}},
		"SET search_path TO sales, public; SHOW search_path": nil,
	}
	for sql, rows := range want {
		a := simple(ctx, c, sql)
		if a[len(a)-1].code != "" || rows != nil && !reflect.DeepEqual(a[0].rows, rows) {
			t.Errorf("%s: %v, want %v", sql, a, rows)
		}
	}
	_, err := c.Exec(ctx, "SET search_path TO public").ReadAll()
	if pe := pgErr(t, err, "0A000"); !strings.Contains(pe.Message, "pinned to sales, public") {
		t.Errorf("the refusal does not name the pinned path: %s", pe.Message)
	}
	base := f.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	ok, err := pgx.Connect(ctx, base+"&options=-c%20search_path%3Dsales%2C%5C%20public")
	if err != nil {
		t.Fatalf("startup with the pinned search path: %v", err)
	}
	ok.Close(context.Background())
	if _, err := pgx.Connect(ctx, base+"&options=-c%20search_path%3Dpublic"); err == nil {
		t.Error("startup with another search path than the pinned one was taken")
	}
	noneDecided(t, f)
}

// TestSessionQueriesPsql: psql's own session queries, answered.
func TestSessionQueriesPsql(t *testing.T) {
	t.Parallel()
	bin := needTool(t, "psql")
	f := newFixture(t)
	u := f.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	out, errs, ok := psql(t, bin, u, "-c", "SELECT version()", "-c", "SHOW server_version_num", "-c", "SELECT current_database(), current_user",
		"-c", "SELECT 1 AS one", "-c", "SET TIME ZONE INTERVAL '+00:00' HOUR TO MINUTE", "-c", "SHOW transaction isolation level")
	if !ok || out != "PostgreSQL 15.0 (Harbormaster wire front)\n150000\nshop|agent:demo\n1\nSET\nread committed\n" {
		t.Fatalf("psql: %q %q", out, errs)
	}
	noneDecided(t, f)
}

// TestSetsApplyWhole: a Query of several SETs, one refused, is one
// error in PostgreSQL and changes nothing (its implicit transaction rolls
// back). The front applied the SETs before the refused one without a
// ParameterStatus for them: the client's idea of its settings and SHOW's
// parted.
// Found in the hostile review of the wire front (review 1, rv-wire).
func TestSetsApplyWhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	_, err := c.Exec(t.Context(), "SET application_name = 'changed'; SET search_path = secret", pgx.QueryExecModeSimpleProtocol)
	pgErr(t, err, "0A000")
	var name string
	if err := c.QueryRow(t.Context(), "SHOW application_name", pgx.QueryExecModeSimpleProtocol).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != c.PgConn().ParameterStatus("application_name") || name == "changed" {
		t.Errorf("after a refused pair of SETs, SHOW application_name is %q and the client was told %q; want neither changed", name, c.PgConn().ParameterStatus("application_name"))
	}
}

// TestStartupOptionsNotIgnored: a client that asks at startup for a
// restriction (options=-c default_transaction_read_only=on, a
// statement_timeout, a search_path) got a session without it and no word
// of it: the front drops startup settings it does not take, where SET of
// the same setting is refused. A tool that connects read-only to be safe
// then writes. Fail closed: refuse the connection (as SET is refused).
// Found in the hostile review of the wire front (review 1, rv-wire).
func TestStartupOptionsNotIgnored(t *testing.T) {
	// Fixed: refused at startup, as SET is.
	t.Parallel()
	f := newFixture(t)
	before := gatewaytest.Snapshot(t, f.dsn, "kinds")
	c, err := pgx.Connect(t.Context(), f.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable")+"&options=-c%20default_transaction_read_only%3Don")
	if err != nil {
		pgErr(t, err, "0A000")
		return
	}
	defer c.Close(context.Background())
	_, err = c.Exec(t.Context(), "INSERT INTO kinds (id) VALUES (30)")
	if err == nil || gatewaytest.Snapshot(t, f.dsn, "kinds") != before {
		t.Fatalf("a session asked read-only at startup wrote a row (%v)", err)
	}
}

// TestStartupOptionsTaken: the settings a startup may ask for that
// the front takes are applied, and the others refuse the connection with
// the SET refusal's words.
// Found in the hostile review of the wire front (review 1, rv-wire).
func TestStartupOptionsTaken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := f.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	c, err := pgx.Connect(t.Context(), base+"&options=-c%20application_name%3Dfrom\\%20options%20--bytea_output%3Dhex&extra_float_digits=3")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if got := c.PgConn().ParameterStatus("application_name"); got != "from options" {
		t.Errorf("application_name %q, want the one the options set", got)
	}
	for _, q := range []string{"options=-c%20search_path%3Dsecret", "options=-B%2010", "statement_timeout=0", "DateStyle=German", "search_path=secret"} {
		_, err := pgx.Connect(t.Context(), base+"&"+q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Severity != "FATAL" || pe.Code != "0A000" && pe.Code != "22023" && pe.Code != "42501" {
			t.Errorf("startup with %s: %v, want a FATAL refusal", q, err)
		}
	}
}
