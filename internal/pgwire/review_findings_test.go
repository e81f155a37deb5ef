package pgwire_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
)

// Findings of the hostile review of the wire front (branch rv-wire). Each
// test reproduces one defect.

// TestReviewDeepStatementDoesNotCrash: the front parsed every text that
// is not a plain SELECT/INSERT/UPDATE/DELETE (a leading comment is enough)
// with the C parser before the statement path's precheck, which exists
// because that parser crashes the process (SIGSEGV in cgo, which recover
// cannot catch) on long chains of operators. 100,000 chained terms are
// 200 KB, under the 1 MiB message cap: one authenticated agent took the
// whole server down. The same text over HTTP is refused, recorded.
func TestReviewDeepStatementDoesNotCrash(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	deep := "/* x */ SELECT " + strings.Repeat("1+", 100000) + "1"
	for _, tc := range []struct {
		name string
		msgs []pgproto3.FrontendMessage
	}{
		{"simple query", []pgproto3.FrontendMessage{&pgproto3.Query{String: deep}}},
		{"parse", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: deep}, &pgproto3.Sync{}}},
		{"parse with a parameter", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: deep + "+$1"}, &pgproto3.Sync{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := f.hijack(t)
			for _, m := range tc.msgs {
				h.Frontend.Send(m)
			}
			if err := h.Frontend.Flush(); err != nil {
				t.Fatal(err)
			}
			code, msg := errorCode(receive(t, h.Frontend))
			if code != "54000" {
				t.Fatalf("a statement of 100,000 chained terms: %s %q, want 54000 (too deep)", code, msg)
			}
			readStillWorks(t, h.Frontend)
		})
	}
}

// TestReviewBindAmplification: a parameter used N times is inlined N
// times, and the front built the whole inlined statement (a clone of the
// tree, its protobuf, the deparsed text) before any limit: 20,000 uses of
// $1 fit a 60 KB Parse, and a 1 MiB value then makes a 20 GiB statement,
// enough to exhaust the server's memory from one Bind. The statement path
// refuses any text over 64 KiB, so the inlined text must be refused at
// Bind once it would pass that, before it is built.
func TestReviewBindAmplification(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.hijack(t)
	// 2,000 uses of a 100 KB value: a 200 MB statement, refused unbuilt.
	query := "SELECT id FROM orders WHERE status IN (" + strings.TrimSuffix(strings.Repeat("$1,", 2000), ",") + ")"
	value := []byte(strings.Repeat("x", 100<<10))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	h.Frontend.Send(&pgproto3.Parse{Query: query})
	h.Frontend.Send(&pgproto3.Bind{Parameters: [][]byte{value}})
	h.Frontend.Send(&pgproto3.Sync{})
	if err := h.Frontend.Flush(); err != nil {
		t.Fatal(err)
	}
	got := receive(t, h.Frontend)
	runtime.ReadMemStats(&after)
	code, msg := errorCode(got)
	if code != "54000" {
		t.Fatalf("a Bind inlining to 200 MB: %s %q (%v), want 54000 at Bind", code, msg, got)
	}
	for _, m := range got {
		if _, ok := m.(*pgproto3.BindComplete); ok {
			t.Fatalf("the Bind of a 200 MB statement completed: %v", got)
		}
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("refusing it allocated %d MiB: the inlined statement was built", alloc>>20)
	}
	t.Logf("refused in %v: %s", time.Since(start), msg)
	readStillWorks(t, h.Frontend)
}

// TestReviewHeldTreesCapped: the caps on what a session holds counted the
// prepared statements' text, but each holds its parse tree too, which is
// up to 240 times the text (a 64 KB select list of 32,000 columns is a
// 15 MB tree): 16 MiB of held text was near 4 GB of memory for one
// session, of 256. The cap must weigh the trees.
func TestReviewHeldTreesCapped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Parse alone, as a client that never describes: a Describe would
	// check (and refuse) the statement, which deparses past the statement
	// path's 64 KiB.
	h := f.hijack(t)
	wide := "SELECT " + strings.Repeat("id,", 20000) + "id FROM orders WHERE id = $1::int8"
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var refused, msg string
	held := 0
	for i := range 40 {
		if refused, msg = parseOnly(t, h.Frontend, fmt.Sprintf("w%d", i), wide); refused != "" {
			break
		}
		held++
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("held %d statements of %d bytes; the heap grew %d MiB", held, len(wide), grown>>20)
	if refused == "" {
		t.Fatalf("40 statements of %d bytes (trees of about 10 MB each) were all held", len(wide))
	}
	if refused != "54000" || !strings.Contains(msg, "prepared statement") {
		t.Fatalf("refused with %s %q, want 54000 for the prepared statements' cap", refused, msg)
	}
	if grown > 64<<20 {
		t.Errorf("the held statements grew the heap by %d MiB, past the 16 MiB a session may hold", grown>>20)
	}
}

// TestReviewBinaryInfinityNotNull: a date or timestamp column holding
// 'infinity' (a common "valid until further notice") came back as NULL in
// binary format, pgx's default for those types, while the text format
// and HTTP show infinity: the binary encoding failed and the front sent
// NULL in its place. A value the front cannot encode must never be sent
// as another value.
func TestReviewBinaryInfinityNotNull(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	direct, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = direct.Exec(ctx, `INSERT INTO public.kinds (id, day, at) VALUES (2, 'infinity', 'infinity'), (3, '-infinity', '-infinity')`)
	direct.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	for _, format := range []int16{pgtype.TextFormatCode, pgtype.BinaryFormatCode} {
		res := c.PgConn().ExecParams(ctx, "SELECT id, day, at FROM kinds WHERE id >= $1::int8 ORDER BY id", [][]byte{[]byte("2")}, nil, nil, []int16{format}).Read()
		if res.Err != nil {
			t.Fatalf("format %d: %v", format, res.Err)
		}
		if len(res.Rows) != 2 {
			t.Fatalf("format %d: %d rows, want 2", format, len(res.Rows))
		}
		for _, r := range res.Rows {
			for i, v := range r {
				if v == nil {
					t.Errorf("format %d: column %s of row %x is NULL; the target holds an infinity", format, res.FieldDescriptions[i].Name, r[0])
				}
			}
		}
	}
	// pgx reads them as infinities.
	var day pgtype.Date
	var at pgtype.Timestamptz
	if err := c.QueryRow(ctx, "SELECT day, at FROM kinds WHERE id = $1", 2).Scan(&day, &at); err != nil {
		t.Fatal(err)
	}
	if !day.Valid || day.InfinityModifier != pgtype.Infinity || !at.Valid || at.InfinityModifier != pgtype.Infinity {
		t.Errorf("pgx read %+v and %+v, want infinity", day, at)
	}
}

// TestReviewUnknownUserSaltSurvivesRestart: SCRAM asks an unknown user
// for a stand-in salt so that a login does not tell which users are
// agents. An agent's salt is its verifier's, the same after every
// restart; the stand-in was keyed by a secret drawn at random when the
// front starts, so it changed at each restart: salts asked before and
// after a restart (a deploy) told the agents, whose salt stayed, from
// the names that are none. PostgreSQL keys its mock salt with a secret
// that persists (pg_control's mock authentication nonce); the front now
// derives its key from the agents' token hashes.
func TestReviewUnknownUserSaltSurvivesRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := pgwire.Config{Agents: []pgwire.Agent{{Principal: gatewaytest.Agent, TokenSHA256: httpapi.HashToken(gatewaytest.AgentToken),
		SCRAM: pgwire.NewVerifier(gatewaytest.AgentToken)}}}
	salts := func(t *testing.T) (agent, unknown string) {
		t.Helper()
		addr := serveFront(t, f, cfg) // a start of the front, as after a restart
		return scramSalt(t, addr, gatewaytest.Agent), scramSalt(t, addr, "agent:nobody")
	}
	a1, u1 := salts(t)
	a2, u2 := salts(t)
	if a1 != a2 {
		t.Fatalf("the agent's salt changed across a restart: %s, %s", a1, a2)
	}
	if u1 != u2 {
		t.Errorf("an unknown user's salt changed across a restart (%s, then %s) while the agent's stayed %s: a login tells agents from other names", u1, u2, a1)
	}
}

// scramSalt is the salt the server-first-message of a SCRAM login as user
// names.
func scramSalt(t *testing.T, addr, user string) string {
	t.Helper()
	return scramFirst(t, addr, user)["s"]
}

// scramFirst is the attributes of the server-first-message of a SCRAM
// login as user.
func scramFirst(t *testing.T, addr, user string) map[string]string {
	t.Helper()
	c := dial(t, addr)
	fe := pgproto3.NewFrontend(c, c)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": user, "database": gatewaytest.Target}})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := fe.Receive(); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*pgproto3.AuthenticationSASL); !ok {
		t.Fatalf("%s: asked with %T, want SASL", user, m)
	}
	fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=rOprNGfwEbeRWgbNEkqO")})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	m, err := fe.Receive()
	if err != nil {
		t.Fatal(err)
	}
	cont, ok := m.(*pgproto3.AuthenticationSASLContinue)
	if !ok {
		t.Fatalf("%s: %T, want the server-first-message", user, m)
	}
	attrs := map[string]string{}
	for _, attr := range strings.Split(string(cont.Data), ",") {
		if k, v, ok := strings.Cut(attr, "="); ok {
			attrs[k] = v
		}
	}
	if attrs["s"] == "" || attrs["i"] == "" {
		t.Fatalf("%s: no salt or iteration count in %q", user, cont.Data)
	}
	return attrs
}

// TestReviewStandInLooksLikeAgents: an unknown user's stand-in verifier
// had 4096 iterations and a 16-byte salt whatever the agents' verifiers
// have. A verifier taken from PostgreSQL (pg_authid, scram_iterations
// set) has its own count: the "i=" of the server-first-message then told
// the agents from the other names. The stand-in takes the count and salt
// length most agents have.
func TestReviewStandInLooksLikeAgents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	salt := make([]byte, 20)
	v := pgwire.Verifier{Iterations: 10000, Salt: salt, StoredKey: make([]byte, 32), ServerKey: make([]byte, 32)}
	addr := serveFront(t, f, pgwire.Config{Agents: []pgwire.Agent{{Principal: gatewaytest.Agent,
		TokenSHA256: httpapi.HashToken(gatewaytest.AgentToken), SCRAM: v.String()}}})
	agent, unknown := scramFirst(t, addr, gatewaytest.Agent), scramFirst(t, addr, "agent:nobody")
	if agent["i"] != unknown["i"] || len(agent["s"]) != len(unknown["s"]) {
		t.Errorf("the agent is asked with i=%s and a salt of %d base64 characters, an unknown user with i=%s and %d", agent["i"], len(agent["s"]), unknown["i"], len(unknown["s"]))
	}
}

// TestReviewPortalsEndAtSync: outside a transaction block, PostgreSQL
// closes every portal at Sync (the implicit transaction ends). The front
// kept named portals, each with its statement's whole result, across
// Syncs: results no cap weighs (the held-portal cap weighs texts and
// trees), held for the session's life.
func TestReviewPortalsEndAtSync(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.hijack(t)
	h.Frontend.Send(&pgproto3.Parse{Name: "s", Query: "SELECT id FROM orders WHERE id < $1::int8"})
	h.Frontend.Send(&pgproto3.Bind{PreparedStatement: "s", DestinationPortal: "p", Parameters: [][]byte{[]byte("5")}})
	h.Frontend.Send(&pgproto3.Describe{ObjectType: 'P', Name: "p"})
	h.Frontend.Send(&pgproto3.Sync{})
	if err := h.Frontend.Flush(); err != nil {
		t.Fatal(err)
	}
	if code, msg := errorCode(receive(t, h.Frontend)); code != "" {
		t.Fatalf("the read: %s %s", code, msg)
	}
	h.Frontend.Send(&pgproto3.Execute{Portal: "p"})
	h.Frontend.Send(&pgproto3.Sync{})
	if err := h.Frontend.Flush(); err != nil {
		t.Fatal(err)
	}
	got := receive(t, h.Frontend)
	if code, _ := errorCode(got); code != "34000" {
		t.Fatalf("the portal after Sync: %v, want 34000 (it ended with the Sync)", got)
	}
	// The prepared statement outlives the Sync, as in PostgreSQL.
	h.Frontend.Send(&pgproto3.Bind{PreparedStatement: "s", DestinationPortal: "p", Parameters: [][]byte{[]byte("5")}})
	h.Frontend.Send(&pgproto3.Execute{Portal: "p"})
	h.Frontend.Send(&pgproto3.Sync{})
	if err := h.Frontend.Flush(); err != nil {
		t.Fatal(err)
	}
	if code, msg := errorCode(receive(t, h.Frontend)); code != "" {
		t.Fatalf("a new portal of the prepared statement: %s %s", code, msg)
	}
}

// TestReviewDuplicateColumnNames: the statement path answers each row as
// a map from column name to value, so two result columns of one name (a
// join's o.id and c.id) carry one value, the last: the wire front sent it
// in both columns, under both columns' types. A reader got the customer's
// id as the order's, silently. The front cannot tell the values apart, so
// it must say so rather than show one column's value as another's.
func TestReviewDuplicateColumnNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		var a, b any
		err := c.QueryRow(t.Context(), "SELECT id, i8 AS id FROM kinds WHERE id = 1", mode).Scan(&a, &b)
		if err == nil {
			if fmt.Sprint(a, b) != "1 7000000000" {
				t.Errorf("%v: the columns id and i8 AS id read %v and %v, want 1 and 7000000000 (or an error)", mode, a, b)
			}
			continue
		}
		pe := pgErr(t, err, "0A000")
		if !strings.Contains(pe.Message, `"id"`) {
			t.Errorf("%v: %q does not name the column", mode, pe.Message)
		}
	}
}

// TestReviewOneAgentCannotTakeEverySlot: the front's connection cap is one
// pool for every agent (and for clients still in their 10 s startup): one
// agent opening MaxConnections sessions, or anyone holding that many
// startups open, refuses every other agent (53300). PostgreSQL answers
// this with a per-role CONNECTION LIMIT and reserved slots.
func TestReviewOneAgentCannotTakeEverySlot(t *testing.T) {
	// Fixed: one principal holds at most MaxPerAgent sessions (half the
	// slots by default). Clients that never finish their startup still
	// hold slots for StartupTimeout, as in PostgreSQL (not fixed).
	t.Parallel()
	f := newFixture(t)
	addr := serveFront(t, f, pgwire.Config{MaxConnections: 4, Agents: []pgwire.Agent{
		{Principal: gatewaytest.Agent, TokenSHA256: httpapi.HashToken(gatewaytest.AgentToken), SCRAM: pgwire.NewVerifier(gatewaytest.AgentToken)},
		{Principal: gatewaytest.Other, TokenSHA256: httpapi.HashToken(gatewaytest.OtherToken), SCRAM: pgwire.NewVerifier(gatewaytest.OtherToken)},
	}})
	url := func(user, token string) string {
		return "postgres://" + strings.ReplaceAll(user, ":", "%3A") + ":" + token + "@" + addr + "/" + gatewaytest.Target + "?sslmode=disable"
	}
	held := 0
	for i := range 4 {
		c, err := pgx.Connect(t.Context(), url(gatewaytest.Agent, gatewaytest.AgentToken))
		if err != nil {
			pgErr(t, err, "53300")
			t.Logf("the agent's session %d: %v", i+1, err)
			break
		}
		held++
		defer c.Close(context.Background())
	}
	if held != 2 {
		t.Errorf("one agent opened %d sessions of 4 slots, want 2 (half)", held)
	}

	c, err := pgx.Connect(t.Context(), url(gatewaytest.Other, gatewaytest.OtherToken))
	if err != nil {
		t.Fatalf("another agent could not connect once one agent held the sessions: %v", err)
	}
	c.Close(context.Background())
}

// TestReviewSetsApplyWhole: a Query of several SETs, one refused, is one
// error in PostgreSQL and changes nothing (its implicit transaction rolls
// back). The front applied the SETs before the refused one without a
// ParameterStatus for them: the client's idea of its settings and SHOW's
// parted.
func TestReviewSetsApplyWhole(t *testing.T) {
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

// TestReviewBinaryJSONParameterKept: a json or jsonb parameter sent in
// binary format was decoded into Go values (numbers as float64) and
// encoded again as the text inlined in the statement: a number past
// float64's precision changed, silently, in what the statement wrote.
// PostgreSQL keeps a jsonb number exactly, and so does the front for the
// same parameter sent as text.
func TestReviewBinaryJSONParameterKept(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	doc := `{"n": 12345678901234567890, "x": 0.10000000000000000001}`
	for i, oid := range []uint32{3802, 114} {
		h := f.hijack(t)
		id := fmt.Sprint(10 + i)
		raw := []byte(doc)
		if oid == 3802 {
			raw = append([]byte{1}, raw...) // jsonb's binary form: a version byte, then the text
		}
		h.Frontend.Send(&pgproto3.Parse{Query: "INSERT INTO kinds (id, doc) VALUES (" + id + ", $1::jsonb)", ParameterOIDs: []uint32{oid}})
		h.Frontend.Send(&pgproto3.Bind{ParameterFormatCodes: []int16{1}, Parameters: [][]byte{raw}})
		h.Frontend.Send(&pgproto3.Execute{})
		h.Frontend.Send(&pgproto3.Sync{})
		if err := h.Frontend.Flush(); err != nil {
			t.Fatal(err)
		}
		if code, msg := errorCode(receive(t, h.Frontend)); code != "" {
			t.Fatalf("OID %d: the insert: %s %s", oid, code, msg)
		}
		direct, err := pgx.Connect(t.Context(), f.dsn)
		if err != nil {
			t.Fatal(err)
		}
		var got, want string
		err = direct.QueryRow(t.Context(), "SELECT doc::text, $1::jsonb::text FROM kinds WHERE id = "+id, doc).Scan(&got, &want)
		direct.Close(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("a binary OID %d parameter %s was written as %s", oid, want, got)
		}
	}
	// A binary jsonb[] keeps its elements exactly too: the rows just
	// written match them, and a NULL element stays NULL.
	m := pgtype.NewMap()
	arr, err := m.Encode(3807, pgtype.BinaryFormatCode, []json.RawMessage{json.RawMessage(doc), nil, json.RawMessage(`"q\"uote"`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	res := c.PgConn().ExecParams(t.Context(), "SELECT id FROM kinds WHERE doc = ANY($1::jsonb[]) ORDER BY id", [][]byte{arr}, []uint32{3807}, []int16{1}, nil).Read()
	if res.Err != nil {
		t.Fatalf("a binary jsonb[] parameter: %v", res.Err)
	}
	var ids []string
	for _, r := range res.Rows {
		ids = append(ids, string(r[0]))
	}
	if fmt.Sprint(ids) != "[10 11]" {
		t.Errorf("rows matching a binary jsonb[] of the written document: %v, want [10 11]", ids)
	}
}

// TestReviewJSONResultNumbersKept: the Pilot reads a json or jsonb value
// into Go values (numbers as float64) and the front renders it again, so a
// number past float64's precision is answered rounded, over the wire and
// over HTTP: the agent reads a value the target does not hold.
func TestReviewJSONResultNumbersKept(t *testing.T) {
	// Fixed: the Pilot answers json and jsonb as the target's own text.
	t.Parallel()
	f := newFixture(t)
	direct, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = direct.Exec(t.Context(), `INSERT INTO public.kinds (id, doc) VALUES (20, '{"n": 12345678901234567890}')`)
	direct.Close(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	var doc string
	if err := c.QueryRow(t.Context(), "SELECT doc FROM kinds WHERE id = 20", pgx.QueryExecModeSimpleProtocol).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	if doc != `{"n": 12345678901234567890}` && doc != `{"n":12345678901234567890}` {
		t.Errorf("the target holds {\"n\": 12345678901234567890}; the wire answered %s", doc)
	}
}

// TestReviewStartupOptionsNotIgnored: a client that asks at startup for a
// restriction (options=-c default_transaction_read_only=on, a
// statement_timeout, a search_path) got a session without it and no word
// of it: the front drops startup settings it does not take, where SET of
// the same setting is refused. A tool that connects read-only to be safe
// then writes. Fail closed: refuse the connection (as SET is refused).
func TestReviewStartupOptionsNotIgnored(t *testing.T) {
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

// TestReviewStartupOptionsTaken: the settings a startup may ask for that
// the front takes are applied, and the others refuse the connection with
// the SET refusal's words.
func TestReviewStartupOptionsTaken(t *testing.T) {
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

// readStillWorks: after a refusal, the session reads as before.
func readStillWorks(t *testing.T, fe *pgproto3.Frontend) {
	t.Helper()
	fe.Send(&pgproto3.Query{String: "SELECT id FROM orders WHERE id = 1"})
	_ = fe.Flush()
	if code, msg := errorCode(receive(t, fe)); code != "" {
		t.Fatalf("after it, a read: %s %s", code, msg)
	}
}

// serveFront serves a front of its own with cfg over f's gateway until t
// ends, and returns its address.
func serveFront(t *testing.T, f *fixture, cfg pgwire.Config) string {
	t.Helper()
	front, err := pgwire.New(f.sys.Gateway, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- front.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}
