package remote_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/pilot/remote"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

var shared pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

// kindsSQL is a table of the value types a row can carry, for exact round
// trips.
const kindsSQL = `
CREATE TABLE public.kinds (
    id bigint PRIMARY KEY,
    n numeric, j jsonb, u uuid, b bytea, i interval, ts timestamptz, big bigint,
    t text, f double precision, ok boolean, arr integer[], d date
);
INSERT INTO public.kinds VALUES
    (1, 12345678901234567890.123456789, '{"a": [1, 2.5, "x"], "b": null, "c": {"d": "<&>"}}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
     '\xdeadbeef', '1 day 02:03:04', '2024-02-29 12:34:56.789+00', 9223372036854775807, 'quote " and <html> & \u00e9',
     0.1, true, '{1,2,3}', '2024-01-31'),
    (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
    (3, -0.5, '[]', '00000000-0000-0000-0000-000000000000', '', '-1 mons', '1970-01-01 00:00:00+00', -9223372036854775808, '', 1e300, false, '{}', '0001-01-01');
`

const kindsDelegation = `sentence: Read the kinds.
grantee: agent:demo
target: shop
expires: 2099-01-01T00:00:00Z
allow:
  - op: select
    table: public.kinds
    columns: [id, n, j, u, b, i, ts, big, t, f, ok, arr, d]
    max_rows: 10
`

// fixture is a target (the demo shop plus kinds), an in-process Pilot,
// the same Pilot served by a remote.Server over mutual TLS, and a
// remote.Client connected to it.
type fixture struct {
	dsn     string
	pilot   *pilot.Pilot
	client  *remote.Client
	addr    string
	certs   remote.CertFiles
	minter  *marque.Minter
	keys    *gatewaytest.Keys
	bounds  map[string][]byte
	sigs    map[string][]byte
	stopSrv func()
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	gatewaytest.LoadShop(t, dsn)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, kindsSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	keys := gatewaytest.NewKeys(t)
	cpPub := keys.ControlPlane.Public().(ed25519.PublicKey)
	minter, err := marque.NewMinter(marque.MinterConfig{Issuer: "test", Key: keys.ControlPlane, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := marque.NewVerifier(marque.VerifierConfig{Issuer: "test", Key: cpPub, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pilot.New(ctx, pilot.Config{Target: "shop", DSN: dsn}, verifier, keys.Signers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	f := &fixture{dsn: dsn, pilot: p, minter: minter, keys: keys, bounds: map[string][]byte{}, sigs: map[string][]byte{}}
	for _, name := range []string{gatewaytest.Orders, gatewaytest.Customers} {
		f.addBound(t, name, gatewaytest.Example(t, name))
	}
	f.addBound(t, "kinds", []byte(kindsDelegation))

	f.certs, err = remote.WriteCerts(t.TempDir(), []string{"127.0.0.1", "localhost"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f.addr = f.serve(t, p)
	f.client = f.connect(t, f.certs.CA, f.certs.ClientCert, f.certs.ClientKey)
	return f
}

// serve serves pilots from a remote.Server with the fixture's
// certificates until the test ends, and returns its address.
func (f *fixture) serve(t *testing.T, pilots ...pilot.Executor) string {
	t.Helper()
	stls, err := remote.ServerTLS(f.certs.PilotCert, f.certs.PilotKey, f.certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := remote.NewServer(remote.ServerConfig{TLS: stls}, pilots...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return ln.Addr().String()
}

func (f *fixture) connect(t *testing.T, ca, cert, key string) *remote.Client {
	t.Helper()
	c, err := f.tryConnect(t, ca, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func (f *fixture) tryConnect(t *testing.T, ca, cert, key string) (*remote.Client, error) {
	t.Helper()
	ctls, err := remote.ClientTLS(ca, cert, key, "")
	if err != nil {
		t.Fatal(err)
	}
	return remote.Connect(t.Context(), remote.ClientConfig{Target: "shop", URL: "https://" + f.addr, TLS: ctls})
}

func (f *fixture) addBound(t *testing.T, name string, yaml []byte) {
	t.Helper()
	canon := gatewaytest.Canonical(t, yaml, f.pilot.Catalog())
	f.bounds[name], f.sigs[name] = canon, gatewaytest.Sign(t, f.keys.Grantor, canon)
}

// claims are the claims the control plane would mint for sql under the
// example, and the canonical text.
func (f *fixture) claims(t *testing.T, example, sql string) (marque.Claims, string) {
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
	c := marque.Claims{RequestID: "req_test", Principal: b.Grantee, Target: "shop",
		StatementHash: marque.StatementHash(d.CanonicalSQL), Path: path, RuleIndex: d.Rule,
		Auth: marque.Auth{Kind: marque.AuthDelegation, DelegationID: bound.ID(canon), BoundSHA256: bound.SHA256(canon),
			Signer: "alice", Signature: string(f.sigs[example])}}
	if path == marque.PathSurveyed {
		c.JudgmentID = "jdg_test"
	}
	return c, d.CanonicalSQL
}

// request mints a marque for sql under the example, as the control plane
// would.
func (f *fixture) request(t *testing.T, example, sql string) pilot.Request {
	t.Helper()
	c, canonical := f.claims(t, example, sql)
	tok, _, err := f.minter.Mint(c)
	if err != nil {
		t.Fatal(err)
	}
	return pilot.Request{Marque: tok, SQL: canonical, Bound: f.bounds[example]}
}

// approved previews sql, has bob approve its preview for at most rows rows
// and mints its marque.
func (f *fixture) approved(t *testing.T, sql string, rows int64) pilot.ApprovedRequest {
	t.Helper()
	a := sqlcheck.Analyze(sql, f.pilot.Catalog(), sqlcheck.Limits{})
	pv, _, err := f.pilot.Preview(t.Context(), a.Canonical)
	if err != nil {
		t.Fatal(err)
	}
	ap := acts.Approval{Version: acts.ApprovalVersion, Kind: acts.KindApproval, RequestID: "req_approved",
		Target: "shop", StatementSHA256: marque.StatementHash(a.Canonical), PreviewSHA256: pv.Digest, MaxRows: rows,
		Expires: time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)}
	act, sig := gatewaytest.Act(t, f.keys.Approver, signing.NamespaceApproval, ap)
	tok, _, err := f.minter.Mint(marque.Claims{RequestID: ap.RequestID, Principal: gatewaytest.Agent, Target: "shop",
		StatementHash: ap.StatementSHA256, Path: marque.PathApproved, MaxRows: &rows,
		Auth: marque.Auth{Kind: marque.AuthApproval, ApprovalSHA256: pilot.Digest(act), Signer: "bob", Signature: string(sig)}})
	if err != nil {
		t.Fatal(err)
	}
	return pilot.ApprovedRequest{Marque: tok, SQL: a.Canonical, Approval: act}
}

func (f *fixture) snapshot(t *testing.T) string {
	return gatewaytest.Snapshot(t, f.dsn, "orders") + gatewaytest.Snapshot(t, f.dsn, "customers")
}

// js is the JSON of a result without what differs from one marque to the
// next.
func js(t *testing.T, res *pilot.Result) string {
	t.Helper()
	c := *res
	c.MarqueID, c.TxID = "", ""
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestResultsRoundTripExactly runs the same statements in process and
// through the remote Pilot, on the same target, and compares the JSON of
// every result: values of every type, refusals with their codes and
// details, rehearsals, previews and their digests, receipts and errors.
func TestResultsRoundTripExactly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	c := f.client
	if c.Target() != "shop" {
		t.Fatalf("target %q", c.Target())
	}
	if got, want := tablesOf(c.Catalog()), tablesOf(f.pilot.Catalog()); got != want {
		t.Fatalf("catalog through the remote Pilot:\n%s\nin process:\n%s", got, want)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ example, sql string }{
		{"kinds", "SELECT * FROM kinds ORDER BY id"},
		{"kinds", "SELECT id, j->'a' AS a, n * 2 AS n2, ts + i AS later FROM kinds WHERE id = 1"},
		{"kinds", "SELECT id FROM kinds WHERE id > 100"},
		{gatewaytest.Orders, "SELECT id, status FROM orders WHERE id < 30 ORDER BY id"},
		// Columns of one name, not in alphabetical order (issue 23).
		{gatewaytest.Orders, "SELECT status AS x, id AS x, customer_id FROM orders WHERE id < 4 ORDER BY id"},
		{gatewaytest.Customers, "SELECT id, name FROM customers ORDER BY id"},
		// Refusals, each rolled back: fence, check, max_rows, the Pilot's
		// own static check.
		{gatewaytest.Orders, "UPDATE orders SET status = 'failed' WHERE id = 45"},
		{gatewaytest.Orders, "UPDATE orders SET status = 'shipped' WHERE id = 5"},
		{gatewaytest.Orders, "UPDATE orders SET status = 'retrying' WHERE id BETWEEN 11 AND 40"},
		{gatewaytest.Orders, "UPDATE orders SET status = 'failed', updated_at = now() WHERE id = 6 RETURNING id, status"},
	} {
		want, err := f.pilot.Execute(ctx, f.request(t, s.example, s.sql))
		if err != nil {
			t.Fatalf("%s: in process: %v", s.sql, err)
		}
		if want.Outcome == pilot.Executed && strings.HasPrefix(s.sql, "UPDATE") {
			// It committed; the remote one must meet the fence now. Compare
			// the next rows' instead.
			continue
		}
		got, err := c.Execute(ctx, f.request(t, s.example, s.sql))
		if err != nil {
			t.Fatalf("%s: remote: %v", s.sql, err)
		}
		if js(t, got) != js(t, want) {
			t.Errorf("%s:\nremote     %s\nin process %s", s.sql, js(t, got), js(t, want))
		}
	}

	// Writes that execute: the same statement on two rows.
	a, err := f.pilot.Execute(ctx, f.request(t, gatewaytest.Orders, "UPDATE orders SET status = 'failed' WHERE id = 7 RETURNING id, status"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Execute(ctx, f.request(t, gatewaytest.Orders, "UPDATE orders SET status = 'failed' WHERE id = 8 RETURNING id, status"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Outcome != pilot.Executed || b.Outcome != pilot.Executed || strings.NewReplacer(`"rows":[[7,`, `"rows":[[8,`, `"7"]`, `"8"]`).Replace(js(t, a)) != js(t, b) {
		t.Errorf("executed writes differ:\nremote     %s\nin process %s", js(t, b), js(t, a))
	}
	found, rows, err := c.Receipt(ctx, b.MarqueID)
	if err != nil || !found || rows != 1 {
		t.Fatalf("receipt through the remote Pilot: %v %d %v", found, rows, err)
	}
	if found, rows, err := c.VoidReceipt(ctx, b.MarqueID, "req_test", gatewaytest.Agent); err != nil || !found || rows != 1 {
		t.Fatalf("void receipt of an executed marque: %v %d %v; want executed, 1 row", found, rows, err)
	}
	for i := 0; i < 2; i++ {
		if found, _, err := c.VoidReceipt(ctx, "mrq_never_sent", "req_test", gatewaytest.Agent); err != nil || found {
			t.Fatalf("void receipt %d of a marque never run: %v %v; want not executed", i, found, err)
		}
	}
	if found, _, err := c.Receipt(ctx, "mrq_never_sent"); err != nil || found {
		t.Fatalf("a voided marque's receipt: %v %v", found, err)
	}

	// Approved statements.
	for _, s := range []struct {
		sql  string
		rows int64
	}{
		{"UPDATE customers SET name = 'John Smith' WHERE id = 3", 1},
		{"UPDATE customers SET name = 'X' WHERE region = 'EU'", 1}, // more rows than approved: rolled back
	} {
		res, err := c.ExecuteApproved(ctx, f.approved(t, s.sql, s.rows))
		if err != nil {
			t.Fatal(err)
		}
		want := pilot.Executed
		if strings.Contains(s.sql, "region") {
			want = pilot.Refused
		}
		if res.Outcome != want {
			t.Fatalf("%s approved: %s %s %v", s.sql, res.Outcome, res.Code, res.Reasons)
		}
	}

	// Rehearsals are rolled back, so both runs see the same rows.
	for _, s := range []struct{ example, sql string }{
		{gatewaytest.Customers, "UPDATE customers SET name = 'Maria Garcia' WHERE id = 7"},
		{gatewaytest.Customers, "UPDATE customers SET name = 'X' WHERE id = 25"},
		{"kinds", "SELECT * FROM kinds"},
	} {
		c0, canonical := f.claims(t, s.example, s.sql)
		want, werr := f.pilot.Rehearse(ctx, canonical, f.bounds[s.example], c0.Auth, c0.Principal, c0.Path)
		got, gerr := c.Rehearse(ctx, canonical, f.bounds[s.example], c0.Auth, c0.Principal, c0.Path)
		if werr != nil || gerr != nil || js(t, got) != js(t, want) {
			t.Errorf("rehearse %s:\nremote     %s %v\nin process %s %v", s.sql, js(t, got), gerr, js(t, want), werr)
		}
	}
	// Descriptions, with their parameters' types, and a refusal.
	for _, s := range []struct{ example, sql string }{
		{gatewaytest.Orders, "SELECT id, status FROM orders WHERE id = $1"},
		{gatewaytest.Orders, "UPDATE orders SET status = $1 WHERE id = $2"},
		{gatewaytest.Orders, "SELECT id, total_cents FROM orders WHERE id = $1"},
		{gatewaytest.Customers, "UPDATE customers SET name = $1 WHERE id = $2"},
		{"kinds", "SELECT * FROM kinds WHERE id = $1"},
	} {
		c0, _ := f.claims(t, s.example, "SELECT 1") // the signed part only
		path := marque.PathCompiled
		if s.example == gatewaytest.Customers {
			path = marque.PathSurveyed
		}
		want, werr := f.pilot.Describe(ctx, s.sql, f.bounds[s.example], c0.Auth, c0.Principal, path)
		got, gerr := c.Describe(ctx, s.sql, f.bounds[s.example], c0.Auth, c0.Principal, path)
		if werr != nil || gerr != nil || js(t, got) != js(t, want) {
			t.Errorf("describe %s:\nremote     %s %v\nin process %s %v", s.sql, js(t, got), gerr, js(t, want), werr)
		}
		if strings.Contains(s.sql, "total_cents") != (want.Outcome == pilot.Refused) || want.Outcome == pilot.Described && want.ParamTypes == nil {
			t.Errorf("describe %s: %s %v parameters %v", s.sql, want.Outcome, want.Reasons, want.ParamTypes)
		}
	}
	for _, sql := range []string{"DELETE FROM orders WHERE id < 5", "UPDATE kinds SET t = 'y'", "SELECT * FROM orders",
		"INSERT INTO orders (customer_id, status, total_cents) VALUES (1, 'new', 5)"} {
		want, _, werr := f.pilot.Preview(ctx, sql)
		got, _, gerr := c.Preview(ctx, sql)
		if werr != nil || gerr != nil || got.Digest == "" || got.Digest != want.Digest || previewJS(t, got) != previewJS(t, want) {
			t.Errorf("preview %s:\nremote     %s %v\nin process %s %v", sql, previewJS(t, got), gerr, previewJS(t, want), werr)
		}
	}
	_, _, werr := f.pilot.Preview(ctx, "DROP TABLE orders")
	_, _, gerr := c.Preview(ctx, "DROP TABLE orders")
	if !errors.Is(werr, pilot.ErrNotPreviewable) || !errors.Is(gerr, pilot.ErrNotPreviewable) {
		t.Fatalf("not previewable: in process %v, remote %v", werr, gerr)
	}

	wst, werr := f.pilot.XactStatus(ctx, "3")
	gst, gerr := c.XactStatus(ctx, "3")
	if wst != gst || (werr == nil) != (gerr == nil) {
		t.Fatalf("xact status: remote %q %v, in process %q %v", gst, gerr, wst, werr)
	}
}

// previewJS is a preview's JSON without when it was taken.
func previewJS(t *testing.T, pv *pilot.Preview) string {
	t.Helper()
	if pv == nil {
		return "<nil>"
	}
	c := *pv
	c.Taken = time.Time{}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tablesOf(cat *sqlcheck.Catalog) string {
	b, _ := json.Marshal(struct {
		P []string
		T []*sqlcheck.Table
	}{cat.SearchPath(), cat.Tables()})
	return string(b)
}

// TestForgedMarquesRefusedByTheRemotePilot: the channel authenticates the
// control plane, but the remote Pilot verifies every marque and
// signature itself: a marque from another key, for another target, for
// another statement, or over bytes no grantor signed is refused there,
// and nothing runs.
func TestForgedMarquesRefusedByTheRemotePilot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	const sql = "UPDATE orders SET status = 'failed' WHERE id = 3"
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	forger, err := marque.NewMinter(marque.MinterConfig{Issuer: "test", Key: otherKey, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	mint := func(m *marque.Minter, c marque.Claims) string {
		tok, _, err := m.Mint(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good, canonical := f.claims(t, gatewaytest.Orders, sql)
	bnd := f.bounds[gatewaytest.Orders]
	wrongTarget := good
	wrongTarget.Target = "bank"
	strangerSig, err := f.keys.Stranger.Sign(signing.NamespaceDelegation, bnd)
	if err != nil {
		t.Fatal(err)
	}
	stranger := good
	stranger.Auth.Signature = string(strangerSig)
	otherBound := good
	other := f.bounds[gatewaytest.Customers]
	otherBound.Auth.BoundSHA256, otherBound.Auth.DelegationID = bound.SHA256(other), bound.ID(other)
	approvalKind, one := good, int64(1)
	approvalKind.Path, approvalKind.MaxRows, approvalKind.RuleIndex = marque.PathApproved, &one, nil
	approvalKind.Auth = marque.Auth{Kind: marque.AuthApproval, ApprovalSHA256: bound.SHA256(bnd), Signer: "bob", Signature: string(f.sigs[gatewaytest.Orders])}

	before := f.snapshot(t)
	for _, tc := range []struct {
		name string
		req  pilot.Request
		code string
	}{
		{"signed by another key", pilot.Request{Marque: mint(forger, good), SQL: canonical, Bound: bnd}, pilot.RefusedMarque},
		{"for another target", pilot.Request{Marque: mint(f.minter, wrongTarget), SQL: canonical, Bound: bnd}, pilot.RefusedMarque},
		{"for another statement", pilot.Request{Marque: mint(f.minter, good), SQL: "UPDATE orders SET status = 'failed' WHERE id = 4", Bound: bnd}, pilot.RefusedMarque},
		{"a token with a flipped byte", pilot.Request{Marque: flip(mint(f.minter, good)), SQL: canonical, Bound: bnd}, pilot.RefusedMarque},
		{"a grantor signature by a stranger", pilot.Request{Marque: mint(f.minter, stranger), SQL: canonical, Bound: bnd}, pilot.RefusedSignature},
		{"bound bytes the marque does not name", pilot.Request{Marque: mint(f.minter, good), SQL: canonical, Bound: other}, pilot.RefusedBound},
		{"another delegation's bound, named", pilot.Request{Marque: mint(f.minter, otherBound), SQL: canonical, Bound: other}, pilot.RefusedSignature},
		{"an approval marque on the delegation path", pilot.Request{Marque: mint(f.minter, approvalKind), SQL: canonical, Bound: bnd}, pilot.RefusedMarque},
	} {
		res, err := f.client.Execute(ctx, tc.req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.Outcome != pilot.Refused || res.Code != tc.code {
			t.Errorf("%s: %s %s %v; want refused %s", tc.name, res.Outcome, res.Code, res.Reasons, tc.code)
		}
	}
	// An approval nobody signed.
	ap := f.approved(t, sql, 1)
	ap.Approval = append([]byte(nil), ap.Approval...)
	ap.Approval[len(ap.Approval)-2] ^= 1
	if res, err := f.client.ExecuteApproved(ctx, ap); err != nil || res.Outcome != pilot.Refused || res.Code != pilot.RefusedSignature {
		t.Errorf("a tampered approval: %+v %v", res, err)
	}
	if f.snapshot(t) != before || gatewaytest.Receipts(t, f.dsn) != 0 {
		t.Fatal("a forged marque changed the target")
	}
	// The genuine marque runs, once.
	req := pilot.Request{Marque: mint(f.minter, good), SQL: canonical, Bound: bnd}
	if res, err := f.client.Execute(ctx, req); err != nil || res.Outcome != pilot.Executed || res.RowsAffected != 1 {
		t.Fatalf("the genuine marque: %+v %v", res, err)
	}
	if res, err := f.client.Execute(ctx, req); err != nil || res.Outcome != pilot.Refused || res.Code != pilot.RefusedReplay {
		t.Fatalf("its replay: %+v %v", res, err)
	}
}

func flip(tok string) string {
	b := []byte(tok)
	i := len(b) - 3
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestHandshakeRefusesStrangers: the remote Pilot accepts only TLS 1.3
// clients presenting a certificate from its client CA, and the client
// accepts only a server certificate from its CA. Each stranger fails at
// the handshake, before any call.
func TestHandshakeRefusesStrangers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other, err := remote.WriteCerts(t.TempDir(), []string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// A client certificate from another CA.
	if _, err := f.tryConnect(t, f.certs.CA, other.ClientCert, other.ClientKey); err == nil || !strings.Contains(err.Error(), "tls") {
		t.Errorf("a client certificate from another CA: %v; want a TLS failure", err)
	}
	// The server's own certificate used as a client's: not for client auth.
	if _, err := f.tryConnect(t, f.certs.CA, f.certs.PilotCert, f.certs.PilotKey); err == nil || !strings.Contains(err.Error(), "tls") {
		t.Errorf("the server certificate as a client's: %v; want a TLS failure", err)
	}
	// A server certificate from another CA than the client trusts.
	if _, err := f.tryConnect(t, other.CA, f.certs.ClientCert, f.certs.ClientKey); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a server from another CA: %v; want a certificate failure", err)
	}
	ca, err := os.ReadFile(f.certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509Pool(t, ca)
	cert, err := tls.LoadX509KeyPair(f.certs.ClientCert, f.certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"no client certificate", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}},
		{"TLS 1.2", &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MaxVersion: tls.VersionTLS12}},
	} {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc.cfg}, Timeout: 10 * time.Second}
		resp, err := hc.Post("https://"+f.addr+"/v1/targets/shop/catalog", "application/json", strings.NewReader("{}"))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Errorf("%s: HTTP %d %s; want a TLS failure", tc.name, resp.StatusCode, b)
		} else if !strings.Contains(err.Error(), "tls") {
			t.Errorf("%s: %v; want a TLS failure", tc.name, err)
		}
	}
	// The genuine client works, and a target the Pilot does not serve is
	// a clear error at Connect.
	ctls, err := remote.ClientTLS(f.certs.CA, f.certs.ClientCert, f.certs.ClientKey, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Connect(t.Context(), remote.ClientConfig{Target: "bank", URL: "https://" + f.addr, TLS: ctls}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("an unknown target: %v", err)
	}
	// Nothing listening: a clear error at Connect.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	if _, err := remote.Connect(t.Context(), remote.ClientConfig{Target: "shop", URL: "https://" + dead, TLS: ctls}); err == nil || !strings.Contains(err.Error(), dead) {
		t.Errorf("an unreachable Pilot: %v", err)
	}
}

// TestNoForbiddenDependencies: the remote Pilot's package holds target
// credentials' side of the wire; it must not pull in the control plane.
func TestNoForbiddenDependencies(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/harbormaster-dev/harbormaster/internal/pilot/remote").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/harbormaster-dev/harbormaster/internal/gateway", "github.com/harbormaster-dev/harbormaster/internal/store", "github.com/harbormaster-dev/harbormaster/internal/logbook",
			"github.com/harbormaster-dev/harbormaster/internal/httpapi", "github.com/harbormaster-dev/harbormaster/internal/cli", "github.com/harbormaster-dev/harbormaster/internal/config"} {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("internal/pilot/remote depends on %s", dep)
			}
		}
	}
}

func x509Pool(t *testing.T, pemBytes []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("no certificate")
	}
	return pool
}

// TestCatalogFollowsThePilot: every answer names the catalog the Pilot
// checks against; when the Pilot's changes (here it reads its target
// again after a migration), the client reads it again, and until then
// keeps the one it had.
func TestCatalogFollowsThePilot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	old := f.client.Catalog()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "ALTER TABLE orders ADD COLUMN note text"); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if f.client.Catalog() != old {
		t.Fatal("the client's catalog changed while the Pilot's did not")
	}
	if err := f.pilot.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if tb, ok := f.client.Catalog().Table(sqlcheck.TableName{Schema: "public", Name: "orders"}); ok && tb.Has("note") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client did not read the Pilot's new catalog")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if tablesOf(f.client.Catalog()) != tablesOf(f.pilot.Catalog()) {
		t.Fatal("the catalogs differ after the refresh")
	}
}
