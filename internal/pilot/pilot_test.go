package pilot_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/examples"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

var shared pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

// fixture is a target loaded with the demo schema and data, a grantor
// (alice) allowed to sign for it, a control-plane key and a Pilot.
type fixture struct {
	dsn     string
	pilot   *pilot.Pilot
	minter  *marque.Minter
	alice   *signing.PrivateKey
	signers *signing.AllowedSigners
	bounds  map[string][]byte // example file -> canonical bytes
	sigs    map[string][]byte

	pilotVerifier *marque.Verifier
}

func readExample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := examples.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"shop.sql", "shop_data.sql"} {
		if _, err := conn.Exec(ctx, string(readExample(t, f)), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	conn.Close(ctx)
	if err := pilot.InitTarget(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	priv, pub, err := signing.GenerateEd25519("alice")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := signing.ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	line, err := signing.AllowedSignersLine([]string{"alice@shop"}, []string{signing.NamespaceDelegation}, pub)
	if err != nil {
		t.Fatal(err)
	}
	signers, err := signing.ParseAllowedSigners([]byte(line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	cpPub, cpPriv, _ := ed25519.GenerateKey(rand.Reader)
	minter, err := marque.NewMinter(marque.MinterConfig{Issuer: "test", Key: cpPriv, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := marque.NewVerifier(marque.VerifierConfig{Issuer: "test", Key: cpPub, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pilot.New(ctx, pilot.Config{Target: "shop", DSN: dsn}, verifier, signers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	f := &fixture{dsn: dsn, pilot: p, minter: minter, alice: alice, signers: signers, bounds: map[string][]byte{}, sigs: map[string][]byte{}, pilotVerifier: verifier}
	for _, name := range []string{"unstick-orders.yaml", "fix-name-typos.yaml"} {
		f.addBound(t, name, readExample(t, name))
	}
	return f
}

// mustRefuse executes sql under the bound named example and fails the test
// unless the Pilot refuses it with code ("": any) and a reason holding
// why; what it wants says why it must be refused.
func (f *fixture) mustRefuse(t *testing.T, example, sql, code, why, wants string) *pilot.Result {
	t.Helper()
	res, err := f.pilot.Execute(t.Context(), f.request(t, example, sql))
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if res.Outcome != pilot.Refused || code != "" && res.Code != code || !strings.Contains(fmt.Sprint(res.Reasons), why) {
		t.Errorf("%s: %s %s %v columns %v rows %v affected %d, want it refused: %s", sql, res.Outcome, res.Code, res.Reasons, res.Columns, res.Rows, res.RowsAffected, wants)
	}
	return res
}

// execute runs sql under the delegation example; an error fails the test.
func (f *fixture) execute(t *testing.T, example, sql string) *pilot.Result {
	t.Helper()
	res, err := f.pilot.Execute(t.Context(), f.request(t, example, sql))
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return res
}

// addBound compiles a delegation and has alice sign it, under name.
func (f *fixture) addBound(t testing.TB, name string, yaml []byte) {
	t.Helper()
	d, err := bound.Parse(yaml, name)
	if err != nil {
		t.Fatal(err)
	}
	b, rep := bound.Compile(d, f.pilot.Catalog(), bound.Options{})
	if !rep.Signable {
		t.Fatalf("%s: %v", name, rep.Problems)
	}
	canon, _ := b.Canonical()
	sig, err := f.alice.Sign(signing.NamespaceDelegation, canon)
	if err != nil {
		t.Fatal(err)
	}
	f.bounds[name], f.sigs[name] = canon, sig
}

// auth is the example delegation's signed part of a marque.
func (f *fixture) auth(example string) marque.Auth {
	canon := f.bounds[example]
	return marque.Auth{Kind: marque.AuthDelegation, DelegationID: bound.ID(canon), BoundSHA256: bound.SHA256(canon),
		Signer: "alice", Signature: string(f.sigs[example])}
}

// request checks sql against the example delegation and mints a marque for
// it as the control plane would.
func (f *fixture) request(t *testing.T, example, sql string) pilot.Request {
	t.Helper()
	canon := f.bounds[example]
	b, err := bound.ParseCanonical(canon)
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := b.CheckRules()
	d := (&sqlcheck.Checker{Catalog: f.pilot.Catalog()}).Check(sql, rules)
	path := marque.PathCompiled
	if d.Outcome == sqlcheck.Survey {
		path = marque.PathSurveyed
	}
	claims := marque.Claims{RequestID: "req_" + t.Name(), Principal: b.Grantee, Target: "shop",
		StatementHash: marque.StatementHash(d.CanonicalSQL), Path: path, RuleIndex: d.Rule,
		Auth: marque.Auth{Kind: marque.AuthDelegation, DelegationID: bound.ID(canon), BoundSHA256: bound.SHA256(canon),
			Signer: "alice", Signature: string(f.sigs[example])}}
	if path == marque.PathSurveyed {
		claims.JudgmentID = "jdg_test"
	}
	tok, _, err := f.minter.Mint(claims)
	if err != nil {
		t.Fatal(err)
	}
	return pilot.Request{Marque: tok, SQL: d.CanonicalSQL, Bound: canon}
}

func (f *fixture) snapshot(t *testing.T, table string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var s string
	if err := conn.QueryRow(t.Context(), "SELECT string_agg(t::text, E'\\n' ORDER BY id) FROM "+table+" t").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fixture) receipts(t *testing.T) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM harbormaster.receipts").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGuards(t *testing.T) {
	f := newFixture(t)
	const orders = "unstick-orders.yaml"
	cases := []struct {
		name    string
		sql     string
		outcome pilot.Outcome
		code    string
		rows    int64
	}{
		{"inside the fence", "UPDATE orders SET status = 'failed', updated_at = now() WHERE id = 3", pilot.Executed, "", 1},
		{"a recent pending order is outside the fence", "UPDATE orders SET status = 'failed' WHERE id = 45", pilot.Refused, pilot.RefusedFence, 0},
		{"a shipped order is outside the fence", "UPDATE orders SET status = 'failed' WHERE id = 60", pilot.Refused, pilot.RefusedFence, 0},
		{"OR 1 = 1 cannot widen the WHERE", "UPDATE orders SET status = 'retrying' WHERE id = 4 OR 1 = 1 AND id > 40", pilot.Refused, pilot.RefusedFence, 0},
		// Every order is reached, and the write stops as it writes its
		// 21st row, before it meets an order outside the fence (the fence
		// raises first only where one is among the first 21 it reaches).
		{"OR 1 = 1 stops at max_rows", "UPDATE orders SET status = 'retrying' WHERE id = 4 OR 1 = 1", pilot.Refused, pilot.RefusedMaxRows, 0},
		{"the check holds on new rows", "UPDATE orders SET status = 'shipped' WHERE id = 5", pilot.Refused, pilot.RefusedCheckRow, 0},
		{"max_rows is exact", "UPDATE orders SET status = 'retrying' WHERE id BETWEEN 11 AND 40", pilot.Refused, pilot.RefusedMaxRows, 0},
		{"twenty rows is allowed", "UPDATE orders SET status = 'retrying' WHERE id BETWEEN 11 AND 30", pilot.Executed, "", 20},
		{"no matching row", "UPDATE orders SET status = 'failed' WHERE id = 100000", pilot.Executed, "", 0},
		{"a NULL fence is a violation", "UPDATE orders SET status = 'failed' WHERE id = 46 OR id = 6", pilot.Refused, pilot.RefusedFence, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.snapshot(t, "orders")
			res, err := f.pilot.Execute(t.Context(), f.request(t, orders, c.sql))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != c.outcome || res.Code != c.code {
				t.Fatalf("got %s/%s %v, want %s/%s", res.Outcome, res.Code, res.Reasons, c.outcome, c.code)
			}
			if res.Outcome == pilot.Executed && res.RowsAffected != c.rows {
				t.Fatalf("rows affected %d, want %d", res.RowsAffected, c.rows)
			}
			if res.Outcome == pilot.Refused && f.snapshot(t, "orders") != before {
				t.Fatal("a refused statement changed the table")
			}
		})
	}
}

func TestReadsAreFencedAndCapped(t *testing.T) {
	f := newFixture(t)
	res, err := f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", "SELECT id, name, region FROM customers ORDER BY id"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || len(res.Rows) != 20 {
		t.Fatalf("got %s %v, %d rows; want 20 EU rows", res.Outcome, res.Reasons, len(res.Rows))
	}
	for _, r := range byName(res) {
		if r["region"] != "EU" {
			t.Fatalf("a row outside the read fence came back: %v", r)
		}
	}
	// A subquery naming the same table is fenced too.
	res, err = f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", "SELECT count(*) AS n FROM customers WHERE id IN (SELECT id FROM customers)"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || len(res.Rows) != 1 || byName(res)[0]["n"] != int64(20) {
		t.Fatalf("got %s %v %v", res.Outcome, res.Reasons, res.Rows)
	}
	// The cap: max_rows 500 on orders, 240 rows; the typo select has 200 and 20 rows visible.
	res, err = f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml", "SELECT id FROM orders"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 240 || res.Truncated {
		t.Fatalf("got %d rows truncated=%v", len(res.Rows), res.Truncated)
	}
}

func TestSurveyedPathNeedsSurveyedMarque(t *testing.T) {
	f := newFixture(t)
	req := f.request(t, "fix-name-typos.yaml", "UPDATE customers SET name = 'John Smith' WHERE id = 3")
	res, err := f.pilot.Execute(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || res.RowsAffected != 1 {
		t.Fatalf("surveyed marque: %s %v", res.Outcome, res.Reasons)
	}
	// Even with a surveyed marque, the bound holds. A US customer is outside
	// the read fence too, so the WHERE never sees it: no row changes.
	before := f.snapshot(t, "customers")
	res, err = f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", "UPDATE customers SET name = 'X' WHERE id = 25"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || res.RowsAffected != 0 || f.snapshot(t, "customers") != before {
		t.Fatalf("US customer: %s %d rows %v", res.Outcome, res.RowsAffected, res.Reasons)
	}
	// Two EU rows past max_rows: 1.
	res, err = f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", "UPDATE customers SET name = 'X' WHERE id IN (4, 5)"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Refused || res.Code != pilot.RefusedMaxRows || f.snapshot(t, "customers") != before {
		t.Fatalf("two rows: %s %s", res.Outcome, res.Code)
	}
}

func TestReplayExecutesOnce(t *testing.T) {
	f := newFixture(t)
	req := f.request(t, "unstick-orders.yaml", "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 7")
	first, err := f.pilot.Execute(t.Context(), req)
	if err != nil || first.Outcome != pilot.Executed {
		t.Fatalf("first: %v %v", first, err)
	}
	second, err := f.pilot.Execute(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if second.Outcome != pilot.Refused || second.Code != pilot.RefusedReplay {
		t.Fatalf("second: %s %s", second.Outcome, second.Code)
	}
	// Two Pilots, one marque, at once.
	other, err := pilot.New(t.Context(), pilot.Config{Target: "shop", DSN: f.dsn}, verifierOf(t, f), f.signers)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	req = f.request(t, "unstick-orders.yaml", "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 8")
	var wg sync.WaitGroup
	results := make([]*pilot.Result, 8)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p := f.pilot
			if i%2 == 1 {
				p = other
			}
			r, err := p.Execute(context.Background(), req)
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = r
		}(i)
	}
	wg.Wait()
	executed := 0
	for _, r := range results {
		if r != nil && r.Outcome == pilot.Executed {
			executed++
		}
	}
	if executed != 1 {
		t.Fatalf("executed %d times, want exactly once", executed)
	}
	if n := f.receipts(t); n != 2 {
		t.Fatalf("%d receipts, want 2", n)
	}
}

// verifierOf returns the verifier the fixture's Pilot uses.
func verifierOf(t *testing.T, f *fixture) *marque.Verifier {
	t.Helper()
	return f.pilotVerifier
}

func TestTamperedDelegationRefused(t *testing.T) {
	f := newFixture(t)
	req := f.request(t, "unstick-orders.yaml", "UPDATE orders SET status = 'failed' WHERE id <= 30")
	// Widen max_rows in the signed bytes: the hash no longer matches.
	req.Bound = []byte(strings.Replace(string(req.Bound), `"max_rows":20`, `"max_rows":2000`, 1))
	res, err := f.pilot.Execute(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Refused || res.Code != pilot.RefusedBound {
		t.Fatalf("got %s %s", res.Outcome, res.Code)
	}
	// A different statement than the marque names.
	req = f.request(t, "unstick-orders.yaml", "UPDATE orders SET status = 'failed' WHERE id = 9")
	req.SQL = "UPDATE orders SET status = 'failed' WHERE id = 10"
	res, _ = f.pilot.Execute(t.Context(), req)
	if res.Outcome != pilot.Refused || res.Code != pilot.RefusedMarque {
		t.Fatalf("got %s %s", res.Outcome, res.Code)
	}
	// A statement outside the bound, with a marque for it (a compromised
	// control plane): the Pilot's own check refuses it.
	req = f.request(t, "unstick-orders.yaml", "UPDATE orders SET total_cents = 0 WHERE id = 9")
	res, _ = f.pilot.Execute(t.Context(), req)
	if res.Outcome != pilot.Refused || res.Code != pilot.RefusedCheck {
		t.Fatalf("got %s %s", res.Outcome, res.Code)
	}
}

// A rehearsal inside the bound shows the rows before and after, and changes
// nothing.
func TestRehearsalImages(t *testing.T) {
	f := newFixture(t)
	before := f.snapshot(t, "customers")
	res, err := f.pilot.Rehearse(t.Context(), "UPDATE customers SET name = 'John Smith' WHERE id = 3", f.bounds["fix-name-typos.yaml"], f.auth("fix-name-typos.yaml"), "agent:demo", "surveyed")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Rehearsed || res.RowsAffected != 1 {
		t.Fatalf("got %s %d %v", res.Outcome, res.RowsAffected, res.Reasons)
	}
	if len(res.Rehearsal.Before) != 1 || res.Rehearsal.Before[0]["name"] != "Jonh Smith" {
		t.Fatalf("before images %v", res.Rehearsal.Before)
	}
	if len(res.Rehearsal.After) != 1 || res.Rehearsal.After[0]["name"] != "John Smith" {
		t.Fatalf("after images %v", res.Rehearsal.After)
	}
	if res.Rehearsal.BeforeDigest == "" || res.Rehearsal.RowsReached != 1 {
		t.Fatal("no before digest")
	}
	if f.snapshot(t, "customers") != before {
		t.Fatal("a rehearsal changed the table")
	}
}

// TestRememberedChecksFollowTheBound: the Pilot remembers statements it has
// checked and guarded, keyed by the bound's bytes too, so the same text
// under another delegation gets that delegation's fences, not the first's.
func TestRememberedChecksFollowTheBound(t *testing.T) {
	f := newFixture(t)
	const narrow = `sentence: Read the first ten orders.
grantee: agent:demo
target: shop
expires: 2099-01-01T00:00:00Z
allow:
  - op: select
    table: public.orders
    columns: [id, status]
    fence: id <= 10
    max_rows: 100
`
	f.addBound(t, "narrow.yaml", []byte(narrow))
	const sql = "SELECT id, status FROM orders WHERE id BETWEEN 1 AND 20"
	for _, c := range []struct {
		bound string
		rows  int
	}{{"unstick-orders.yaml", 20}, {"narrow.yaml", 10}, {"unstick-orders.yaml", 20}, {"narrow.yaml", 10}} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, c.bound, sql))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pilot.Executed || len(res.Rows) != c.rows {
			t.Fatalf("under %s: %s %v with %d rows, want executed with %d", c.bound, res.Outcome, res.Reasons, len(res.Rows), c.rows)
		}
	}
}

// TestTxnOpenedAhead: a transaction opened with Begin carries its id; the
// statement runs in it and its receipt names that id; it runs one
// statement only; one closed unused aborts and leaves nothing.
func TestTxnOpenedAhead(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	txn, err := f.pilot.BeginTxn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if txn.ID() == "" {
		t.Fatal("Begin returned no transaction id")
	}
	req := f.request(t, "unstick-orders.yaml", "UPDATE orders SET status = 'failed', updated_at = now() WHERE id = 3")
	res, err := f.pilot.ExecuteIn(ctx, req, txn)
	if err != nil || res.Outcome != pilot.Executed || res.TxID != txn.ID() {
		t.Fatalf("execute in the opened transaction: %+v, %v; want executed in %s", res, err, txn.ID())
	}
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var txid string
	if err := conn.QueryRow(ctx, "SELECT txid::text FROM harbormaster.receipts WHERE marque_id IS NOT NULL").Scan(&txid); err != nil || txid != txn.ID() {
		t.Fatalf("receipt txid %q, %v; want %s", txid, err, txn.ID())
	}
	if st, err := f.pilot.XactStatus(ctx, txn.ID()); err != nil || st != "committed" {
		t.Fatalf("status of the used transaction: %q, %v", st, err)
	}

	// A used transaction runs nothing more.
	again := f.request(t, "unstick-orders.yaml", "UPDATE orders SET status = 'failed', updated_at = now() WHERE id = 4")
	before := f.snapshot(t, "orders")
	if res, err := f.pilot.ExecuteIn(ctx, again, txn); err == nil {
		t.Fatalf("a second statement in one transaction: %+v", res)
	}
	if f.snapshot(t, "orders") != before {
		t.Fatal("a second statement in a used transaction changed the table")
	}

	// One opened and closed unused aborts.
	unused, err := f.pilot.BeginTxn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unused.Close()
	unused.Close() // idempotent
	if st, err := f.pilot.XactStatus(ctx, unused.ID()); err != nil || st != "aborted" {
		t.Fatalf("status of an unused, closed transaction: %q, %v; want aborted", st, err)
	}
	if f.receipts(t) != 1 {
		t.Fatalf("%d receipts, want 1", f.receipts(t))
	}
}

// TestUninitializedTargetRefused: a target without Harbormaster's schema
// (no `target init`) is refused when the Pilot starts, with the command
// that fixes it, not at the first marque.
func TestUninitializedTargetRefused(t *testing.T) {
	f := newFixture(t)
	bare := pgtmptest.NewDatabase(t, shared.Server(t))
	_, err := pilot.New(t.Context(), pilot.Config{Target: "shop", DSN: bare}, f.pilotVerifier, f.signers)
	if err == nil || !strings.Contains(err.Error(), "harbormaster target init") {
		t.Fatalf("a Pilot on an uninitialized target: %v; want an error naming target init", err)
	}
}

// TestRehearsalNeedsTheGrantorsSignature: a rehearsal inside a bound runs
// only on the grantor's signature over it, verified by the Pilot, for the
// bound's grantee: a caller holding the bytes of a bound but not a valid
// signature reads nothing through a rehearsal.
func TestRehearsalNeedsTheGrantorsSignature(t *testing.T) {
	f := newFixture(t)
	const typos = "fix-name-typos.yaml"
	sql := "UPDATE customers SET name = 'John Smith' WHERE id = 3"
	other := "unstick-orders.yaml"
	cases := []struct {
		name      string
		auth      func(marque.Auth) marque.Auth
		principal string
		code      string
	}{
		{"another bound's signature", func(a marque.Auth) marque.Auth { a.Signature = string(f.sigs[other]); return a }, "agent:demo", pilot.RefusedSignature},
		{"no signature", func(a marque.Auth) marque.Auth { a.Signature = ""; return a }, "agent:demo", pilot.RefusedSignature},
		{"another signer named", func(a marque.Auth) marque.Auth { a.Signer = "mallory"; return a }, "agent:demo", pilot.RefusedSignature},
		{"another bound's hash", func(a marque.Auth) marque.Auth { a.BoundSHA256 = f.auth(other).BoundSHA256; return a }, "agent:demo", pilot.RefusedBound},
		{"another grantee", func(a marque.Auth) marque.Auth { return a }, "agent:other", pilot.RefusedBound},
	}
	for _, c := range cases {
		res, err := f.pilot.Rehearse(t.Context(), sql, f.bounds[typos], c.auth(f.auth(typos)), c.principal, marque.PathSurveyed)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Outcome != pilot.Refused || res.Code != c.code || res.Rehearsal != nil {
			t.Errorf("%s: %s %s (rehearsal %v), want refused %s and no rows", c.name, res.Outcome, res.Code, res.Rehearsal != nil, c.code)
		}
	}
	res, err := f.pilot.Rehearse(t.Context(), sql, f.bounds[typos], f.auth(typos), "agent:demo", marque.PathSurveyed)
	if err != nil || res.Outcome != pilot.Rehearsed {
		t.Fatalf("the signed bound: %+v, %v", res, err)
	}
}

// withSchema runs ddl on the fixture's target and gives the fixture a
// Pilot that read its catalog afterwards.
func (f *fixture) withSchema(t *testing.T, ddl string) {
	t.Helper()
	if _, err := f.pilotConn(t).Exec(t.Context(), ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	p, err := pilot.New(t.Context(), pilot.Config{Target: "shop", DSN: f.dsn}, f.pilotVerifier, f.signers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	f.pilot = p
}

func (f *fixture) count(t *testing.T, query string) int64 {
	t.Helper()
	var n int64
	if err := f.pilotConn(t).QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
