package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// manualClock is a clock a test moves by hand. It starts at the real time,
// so delegations signed for the real week ahead are in force.
type manualClock struct{ ns atomic.Int64 }

func newManualClock() *manualClock {
	c := &manualClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *manualClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *manualClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *manualClock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }

// newEmptyFixture is newFixture without the example delegations.
func newEmptyFixture(t *testing.T, tune func(*gatewaytest.Options)) *fixture {
	t.Helper()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	gatewaytest.LoadShop(t, dsn)
	opt := gatewaytest.Options{TargetDSN: dsn, StorePath: storeLocation(t), Keys: gatewaytest.NewKeys(t)}
	if tune != nil {
		tune(&opt)
	}
	return &fixture{dsn: dsn, sys: gatewaytest.Start(t, opt)}
}

// addDelegation signs a delegation with the grantor's key and adds it.
func (f *fixture) addDelegation(t *testing.T, yaml []byte) *gateway.Delegation {
	t.Helper()
	sig := gatewaytest.Sign(t, f.sys.Opts.Keys.Grantor, gatewaytest.Canonical(t, yaml, f.sys.Pilot.Catalog()))
	d, _, err := f.sys.Gateway.AddDelegation(context.Background(), yaml, sig, "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// rewrite replaces old by new in a delegation file, failing if absent.
func rewrite(t *testing.T, yaml []byte, old, new string) []byte {
	t.Helper()
	if !strings.Contains(string(yaml), old) {
		t.Fatalf("the delegation has no %q", old)
	}
	return []byte(strings.Replace(string(yaml), old, new, 1))
}

func (f *fixture) submit(t *testing.T, principal, sql string) *gateway.Response {
	t.Helper()
	resp, err := f.sys.Gateway.Submit(context.Background(), principal, gatewaytest.Target, sql)
	if err != nil {
		t.Fatalf("%q: %v", sql, err)
	}
	return resp
}

// referred submits a statement that must be referred, checks that nothing
// of it ran (it has no preview until a human asks), then asks for its
// preview as a human would.
func (f *fixture) referred(t *testing.T, sql string) *gateway.RequestView {
	t.Helper()
	resp := f.submit(t, gatewaytest.Agent, sql)
	if resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%q: %+v, want referred", sql, resp)
	}
	if v := f.view(t, resp.RequestID); v.Status != gateway.StatusWaiting || v.PreviewSHA256 != "" || len(v.Preview) != 0 {
		t.Fatalf("%q: %+v, want waiting with no preview before a human asks", sql, v)
	}
	v := f.previewed(t, resp.RequestID)
	if v.Status != gateway.StatusWaiting || v.PreviewSHA256 == "" || len(v.Preview) == 0 {
		t.Fatalf("%q: %+v, want waiting with a preview", sql, v)
	}
	if pv := previewOf(t, v); pv.Digest != v.PreviewSHA256 {
		t.Fatalf("%q: the stored digest %s is not the preview's %s", sql, v.PreviewSHA256, pv.Digest)
	}
	return v
}

func (f *fixture) view(t *testing.T, id string) *gateway.RequestView {
	t.Helper()
	v, err := f.sys.Gateway.Request(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func previewOf(t *testing.T, v *gateway.RequestView) pilot.Preview {
	t.Helper()
	var r pilot.Preview
	if err := json.Unmarshal(v.Preview, &r); err != nil {
		t.Fatalf("preview %s: %v", v.Preview, err)
	}
	return r
}

// sshKeygen returns the path of ssh-keygen; under CI a missing one fails.
func sshKeygen(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("ssh-keygen")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/ssh-keygen"); serr == nil {
			return "/usr/bin/ssh-keygen"
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("ssh-keygen not found: %v", err)
		}
		t.Skipf("ssh-keygen not found: %v", err)
	}
	return path
}

// keygenSign signs msg with the real ssh-keygen -Y sign, as an approver at
// a terminal would, and returns the armored signature.
func keygenSign(t *testing.T, pem []byte, namespace string, msg []byte) []byte {
	t.Helper()
	bin := sshKeygen(t)
	if len(pem) == 0 {
		t.Fatal("no private key PEM")
	}
	dir := t.TempDir()
	key, file := filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "act")
	if err := os.WriteFile(key, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, msg, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-Y", "sign", "-n", namespace, "-f", key, file).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v: %s", err, out)
	}
	sig, err := os.ReadFile(file + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func signAct(t *testing.T, key *signing.PrivateKey, namespace string, act []byte) []byte {
	t.Helper()
	sig, err := key.Sign(namespace, act)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// TestApproveEndToEnd: a referred statement is previewed; the proposed
// approval names it exactly; every approval that is not bob's signature
// over exactly that approval is refused with nothing run; bob's signature
// made by the real ssh-keygen executes it once, on the approved path, with
// an approval entry in the logbook and a receipt in the target.
func TestApproveEndToEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	gw, keys := f.sys.Gateway, f.sys.Opts.Keys

	// Tier B is off, so the update is referred although its bound covers it.
	v := f.referred(t, "UPDATE customers SET name = 'John Smith' WHERE id = 3")
	if !strings.Contains(strings.Join(v.Reasons, " "), "Tier B") {
		t.Fatalf("reasons %q do not say Tier B is off", v.Reasons)
	}
	rep := previewOf(t, v)
	if rep.Rows != 1 || len(rep.Before) != 1 || len(rep.After) != 1 || rep.After[0]["name"] != "John Smith" || rep.Before[0]["name"] != "Jonh Smith" {
		t.Fatalf("preview %+v, want one row, Jonh Smith -> John Smith", rep)
	}
	other := f.referred(t, "UPDATE customers SET name = 'Maria Garcia' WHERE id = 7")

	before := gatewaytest.Snapshot(t, f.dsn, "customers")
	if strings.Contains(before, "John Smith") {
		t.Fatal("the preview changed the target")
	}

	// The proposed approval.
	start := time.Now()
	act, err := gw.ProposeApproval(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	ap, err := acts.ParseApproval(act)
	if err != nil {
		t.Fatalf("the proposal is not a canonical approval: %v\n%s", err, act)
	}
	if ap.RequestID != v.ID || ap.Target != gatewaytest.Target || ap.StatementSHA256 != marque.StatementHash(v.CanonicalSQL) ||
		ap.PreviewSHA256 != v.PreviewSHA256 || ap.MaxRows != 1 {
		t.Fatalf("proposal %+v does not name request %s exactly", ap, v.ID)
	}
	if exp := ap.ExpiresAt(); exp.Before(start.Add(14*time.Minute)) || exp.After(time.Now().Add(15*time.Minute)) {
		t.Fatalf("proposal expires %s, want 15 minutes from now", ap.Expires)
	}

	bobSign := func(a acts.Approval) ([]byte, []byte) {
		b, err := acts.Canonical(a)
		if err != nil {
			t.Fatal(err)
		}
		return b, signAct(t, keys.Approver, signing.NamespaceApproval, b)
	}
	edit := func(f func(*acts.Approval)) acts.Approval {
		a := *ap
		f(&a)
		return a
	}
	otherAct, err := gw.ProposeApproval(ctx, other.ID)
	if err != nil {
		t.Fatal(err)
	}
	denial, err := acts.Canonical(acts.Denial{Version: 1, Kind: acts.KindDenial, RequestID: v.ID, Target: v.Target,
		StatementSHA256: ap.StatementSHA256, Reason: "no"})
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		name     string
		act, sig []byte
	}
	var refused []attempt
	add := func(name string, act, sig []byte) { refused = append(refused, attempt{name, act, sig}) }
	add("a key not in the signers file", act, signAct(t, keys.Stranger, signing.NamespaceApproval, act))
	add("alice, who may not approve", act, signAct(t, keys.Grantor, signing.NamespaceApproval, act))
	add("bob's denial signature over the approval", act, signAct(t, keys.Approver, signing.NamespaceDenial, act))
	add("bob's session signature over the approval", act, signAct(t, keys.Approver, signing.NamespaceSession, act))
	add("a signed denial sent as an approval", denial, signAct(t, keys.Approver, signing.NamespaceDenial, denial))
	add("no signature", act, nil)
	add("bob's signature over another request's approval", act, signAct(t, keys.Approver, signing.NamespaceApproval, otherAct))
	add("another request's approval", otherAct, signAct(t, keys.Approver, signing.NamespaceApproval, otherAct))
	for _, e := range []struct {
		name string
		edit func(*acts.Approval)
	}{
		{"another request id", func(a *acts.Approval) { a.RequestID = other.ID }},
		{"another target", func(a *acts.Approval) { a.Target = "bank" }},
		{"another statement", func(a *acts.Approval) {
			a.StatementSHA256 = marque.StatementHash("UPDATE customers SET name = 'John Smith' WHERE id > 0")
		}},
		{"another preview", func(a *acts.Approval) { a.PreviewSHA256 = other.PreviewSHA256 }},
		{"expired", func(a *acts.Approval) { a.Expires = time.Now().Add(-time.Second).UTC().Format(time.RFC3339) }},
		{"more rows than the preview counted", func(a *acts.Approval) { a.MaxRows = 2 }},
	} {
		act, sig := bobSign(edit(e.edit))
		add(e.name, act, sig)
	}
	tampered := edit(func(a *acts.Approval) { a.MaxRows = 0 })
	tamperedBytes, err := acts.Canonical(tampered)
	if err != nil {
		t.Fatal(err)
	}
	add("bytes changed after bob signed", tamperedBytes, signAct(t, keys.Approver, signing.NamespaceApproval, act))
	add("not canonical", append([]byte(" "), act...), signAct(t, keys.Approver, signing.NamespaceApproval, append([]byte(" "), act...)))

	for _, a := range refused {
		got, err := gw.Approve(ctx, v.ID, a.act, a.sig)
		if !errors.Is(err, gateway.ErrActRefused) {
			t.Fatalf("%s: Approve = %+v, %v; want ErrActRefused", a.name, got, err)
		}
		if now := f.view(t, v.ID); now.Status != gateway.StatusWaiting || now.DecidedBy != "" || now.MarqueID != "" {
			t.Fatalf("%s: the request is now %+v, want still waiting", a.name, now)
		}
	}
	if gatewaytest.Snapshot(t, f.dsn, "customers") != before || f.ran(t) != 0 {
		t.Fatal("a refused approval changed the target")
	}
	if n := f.count(t, "approval"); n != 0 {
		t.Fatalf("%d approval entries for refused approvals", n)
	}

	// Bob signs with the real ssh-keygen.
	sig := keygenSign(t, keys.ApproverPEM, signing.NamespaceApproval, act)
	done, err := gw.Approve(ctx, v.ID, act, sig)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != gateway.StatusExecuted || done.Outcome != gateway.OutcomeExecuted || done.RowsAffected != 1 ||
		done.Path != marque.PathApproved || done.DecidedBy != "bob" || done.MarqueID == "" {
		t.Fatalf("approved request %+v, want executed on the approved path, decided by bob", done)
	}
	after := gatewaytest.Snapshot(t, f.dsn, "customers")
	if after == before || !strings.Contains(after, "(3,\"John Smith\"") {
		t.Fatalf("the approved update did not change customer 3:\n%s", after)
	}
	found, rows, err := f.sys.Pilot.Receipt(ctx, done.MarqueID)
	if err != nil || !found || rows != 1 {
		t.Fatalf("receipt: %v %d %v", found, rows, err)
	}
	if n := f.ran(t); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}

	// The logbook: decision, approval (bob, his signature), then the execution.
	es := entries(t, f.sys.Logbook, v.ID)
	if got := strings.Join(kinds(es), ","); got != "decision,approval,execution.pending,execution" {
		t.Fatalf("entries about the request: %s", got)
	}
	p := payload(t, es[1])
	if es[1].Subjects["signer"] != "bob" || p["approval"] != string(act) || p["signature"] != string(sig) || p["fingerprint"] != keys.Approver.Fingerprint() {
		t.Fatalf("approval entry %v %v", es[1].Subjects, p)
	}
	if x := payload(t, es[3]); x["outcome"] != string(pilot.Executed) || es[3].Subjects["marque"] != done.MarqueID {
		t.Fatalf("execution entry %v", x)
	}

	// Approving twice, or proposing again, finds nothing waiting.
	if _, err := gw.Approve(ctx, v.ID, act, sig); !errors.Is(err, gateway.ErrNotWaiting) {
		t.Fatalf("second approval: %v, want ErrNotWaiting", err)
	}
	if _, err := gw.ProposeApproval(ctx, v.ID); !errors.Is(err, gateway.ErrNotWaiting) {
		t.Fatalf("proposal for an executed request: %v, want ErrNotWaiting", err)
	}
	if _, err := gw.Approve(ctx, "req_doesnotexistatall", act, sig); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("approval of an unknown request: %v, want ErrNotFound", err)
	}
	if n := f.ran(t); n != 1 || gatewaytest.Snapshot(t, f.dsn, "customers") != after {
		t.Fatal("approving twice ran the statement twice")
	}
	// The other request is untouched and still approvable.
	if o := f.view(t, other.ID); o.Status != gateway.StatusWaiting {
		t.Fatalf("the other request is %s", o.Status)
	}
	f.sys.Verify(t)
}

// TestDenial: only a denial signed by someone allowed to deny, over the
// request's own statement, closes a request; the agent sees the reason,
// the logbook holds the denial, and a denied request cannot be approved.
func TestDenial(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	gw, keys := f.sys.Gateway, f.sys.Opts.Keys
	before := gatewaytest.Snapshot(t, f.dsn, "orders")
	v := f.referred(t, "DELETE FROM orders WHERE id = 7")
	act, err := gw.ProposeApproval(ctx, v.ID) // proposed before the denial
	if err != nil {
		t.Fatal(err)
	}
	approvalSig := signAct(t, keys.Approver, signing.NamespaceApproval, act)

	deny := func(d acts.Denial) []byte {
		b, err := acts.Canonical(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := acts.Denial{Version: 1, Kind: acts.KindDenial, RequestID: v.ID, Target: v.Target,
		StatementSHA256: marque.StatementHash(v.CanonicalSQL), Reason: "deleting orders is never fine; <b>ask finance</b>"}
	wrongStmt := good
	wrongStmt.StatementSHA256 = marque.StatementHash("DELETE FROM orders")
	for _, c := range []struct {
		name     string
		act, sig []byte
	}{
		{"by alice, who may not deny", deny(good), signAct(t, keys.Grantor, signing.NamespaceDenial, deny(good))},
		{"by a stranger", deny(good), signAct(t, keys.Stranger, signing.NamespaceDenial, deny(good))},
		{"bob's approval signature", deny(good), signAct(t, keys.Approver, signing.NamespaceApproval, deny(good))},
		{"for another statement", deny(wrongStmt), signAct(t, keys.Approver, signing.NamespaceDenial, deny(wrongStmt))},
		{"an approval sent as a denial", act, approvalSig},
	} {
		if got, err := gw.Deny(ctx, v.ID, c.act, c.sig); !errors.Is(err, gateway.ErrActRefused) {
			t.Fatalf("denial %s: %+v, %v; want ErrActRefused", c.name, got, err)
		}
	}
	if n := f.count(t, "denial"); n != 0 {
		t.Fatalf("%d denial entries for refused denials", n)
	}

	sig := signAct(t, keys.Approver, signing.NamespaceDenial, deny(good))
	got, err := gw.Deny(ctx, v.ID, deny(good), sig)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != gateway.StatusDenied || got.DecidedBy != "bob" {
		t.Fatalf("denied request %+v", got)
	}
	// The agent sees its request denied, with the reason.
	agentView, err := gw.Request(ctx, v.ID, gatewaytest.Agent)
	if err != nil {
		t.Fatal(err)
	}
	want := "denied by bob: " + good.Reason
	if agentView.Status != gateway.StatusDenied || agentView.Reasons[len(agentView.Reasons)-1] != want {
		t.Fatalf("the agent sees %+v, want the reason %q last", agentView, want)
	}
	ds := ofKind(entries(t, f.sys.Logbook, v.ID), "denial")
	if len(ds) != 1 {
		t.Fatalf("%d denial entries, want 1", len(ds))
	}
	if p := payload(t, ds[0]); p["reason"] != good.Reason || p["signer"] != "bob" || p["signature"] != string(sig) {
		t.Fatalf("denial entry %v", p)
	}

	// A denied request cannot be approved, even with an approval bob signed
	// before the denial, nor denied again.
	if _, err := gw.Approve(ctx, v.ID, act, approvalSig); !errors.Is(err, gateway.ErrNotWaiting) {
		t.Fatalf("approving a denied request: %v, want ErrNotWaiting", err)
	}
	if _, err := gw.Deny(ctx, v.ID, deny(good), sig); !errors.Is(err, gateway.ErrNotWaiting) {
		t.Fatalf("denying twice: %v, want ErrNotWaiting", err)
	}
	if gatewaytest.Snapshot(t, f.dsn, "orders") != before || f.ran(t) != 0 {
		t.Fatal("a denied request ran")
	}
	if q, err := gw.Queue(ctx, nil); err != nil || len(q) != 0 {
		t.Fatalf("queue after the denial: %d requests, %v", len(q), err)
	}
	f.sys.Verify(t)
}

// TestApprovalGoesBackOnDrift: the approval signs the preview's digest and
// its count. When the data changes so that the statement would reach one
// row more, the Pilot computes the preview again in the statement's own
// snapshot, rolls back, and the request goes back to the queue with a
// fresh preview; the old approval no longer applies, a new one runs it.
func TestApprovalGoesBackOnDrift(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	const sql = "DELETE FROM orders WHERE status = 'failed'"
	v := f.referred(t, sql)
	n := previewOf(t, v).Rows
	if n < 2 {
		t.Fatalf("the preview counted %d rows; the demo data has more failed orders", n)
	}
	act, err := f.sys.Gateway.ProposeApproval(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ap, _ := acts.ParseApproval(act); ap.MaxRows != n {
		t.Fatalf("proposal guard %d, preview %d", ap.MaxRows, n)
	}
	sig := signAct(t, f.sys.Opts.Keys.Approver, signing.NamespaceApproval, act)

	// Someone else fails one more order: the statement now reaches n+1.
	if _, err := f.conn(t).Exec(ctx, "UPDATE orders SET status = 'failed' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	before := gatewaytest.Snapshot(t, f.dsn, "orders")
	got, err := f.sys.Gateway.Approve(ctx, v.ID, act, sig)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != gateway.StatusWaiting || got.RowsAffected != 0 || !strings.Contains(strings.Join(got.Reasons, " "), "preview") {
		t.Fatalf("approved beyond the preview: %+v, want back in the queue", got)
	}
	if gatewaytest.Snapshot(t, f.dsn, "orders") != before || f.ran(t) != 0 {
		t.Fatal("the Pilot ran an approval over more rows than the preview counted")
	}
	if pv := previewOf(t, got); pv.Rows != n+1 || got.PreviewSHA256 == v.PreviewSHA256 {
		t.Fatalf("back in the queue with preview %+v (%s), want a fresh one of %d rows", pv, got.PreviewSHA256, n+1)
	}
	execs := ofKind(entries(t, f.sys.Logbook, v.ID), "execution")
	if len(execs) != 1 {
		t.Fatalf("%d execution entries, want 1", len(execs))
	}
	if x := payload(t, execs[0]); x["outcome"] != string(pilot.Refused) || x["code"] != pilot.RefusedDrift {
		t.Fatalf("execution entry %v, want refused %s", x, pilot.RefusedDrift)
	}
	// The old approval names a preview the request no longer has.
	if _, err := f.sys.Gateway.Approve(ctx, v.ID, act, sig); !errors.Is(err, gateway.ErrPreviewChanged) {
		t.Fatalf("approving with the old approval: %v, want ErrPreviewChanged", err)
	}
	// An approval of the fresh preview runs it, over n+1 rows.
	act, err = f.sys.Gateway.ProposeApproval(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	done, err := f.sys.Gateway.Approve(ctx, v.ID, act, signAct(t, f.sys.Opts.Keys.Approver, signing.NamespaceApproval, act))
	if err != nil || done.Status != gateway.StatusExecuted || done.RowsAffected != n+1 {
		t.Fatalf("approval of the fresh preview: %+v, %v", done, err)
	}
	f.sys.Verify(t)
}

// TestApprovalBaitAndSwitch (issue 22, finding 6): the approver is shown
// the one order a DELETE reaches through its subquery; the agent then
// changes a row that subquery reads, inside its own bound, so the same
// statement would delete another order, with the same count. The Pilot
// compares the preview it computes in the statement's snapshot with the
// one the approval signed, and deletes nothing.
func TestApprovalBaitAndSwitch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	const sql = "DELETE FROM orders WHERE id = (SELECT max(id) FROM orders WHERE status = 'failed')"
	v := f.referred(t, sql)
	pv := previewOf(t, v)
	if pv.Rows != 1 || len(pv.Before) != 1 {
		t.Fatalf("preview %+v, want the one order the subquery picks", pv)
	}
	shown := pv.Before[0]["id"]
	act, err := f.sys.Gateway.ProposeApproval(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	sig := signAct(t, f.sys.Opts.Keys.Approver, signing.NamespaceApproval, act)
	// A newer order fails: the subquery now picks it.
	if _, err := f.conn(t).Exec(ctx, "UPDATE orders SET status = 'failed' WHERE id = (SELECT max(id) FROM orders)"); err != nil {
		t.Fatal(err)
	}
	before := gatewaytest.Snapshot(t, f.dsn, "orders")
	got, err := f.sys.Gateway.Approve(ctx, v.ID, act, sig)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != gateway.StatusWaiting || gatewaytest.Snapshot(t, f.dsn, "orders") != before || f.ran(t) != 0 {
		t.Fatalf("the approval of a preview of order %v ran on other rows: %+v", shown, got)
	}
	if now := previewOf(t, got); len(now.Before) != 1 || now.Before[0]["id"] == shown {
		t.Fatalf("the fresh preview %+v should show the order the statement now reaches", now)
	}
	f.sys.Verify(t)
}

// TestWaitRequest: a long-poll returns as soon as an approval on another
// goroutine resolves the request, well before its deadline; it shows only
// the caller's own requests; and it returns at once for a request that is
// not waiting.
func TestWaitRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	gw := f.sys.Gateway
	v := f.referred(t, "UPDATE customers SET name = 'Anna Schmidt' WHERE id = 12")
	act, err := gw.ProposeApproval(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	sig := signAct(t, f.sys.Opts.Keys.Approver, signing.NamespaceApproval, act)

	if _, err := gw.WaitRequest(ctx, v.ID, gatewaytest.Other, time.Second); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("another agent's long-poll: %v, want ErrNotFound", err)
	}
	const wait = 10 * time.Second
	type result struct {
		v    *gateway.RequestView
		err  error
		at   time.Time
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		v, err := gw.WaitRequest(ctx, v.ID, gatewaytest.Agent, wait)
		done <- result{v, err, time.Now(), time.Since(start)}
	}()
	time.Sleep(100 * time.Millisecond) // let it wait
	approved, err := gw.Approve(ctx, v.ID, act, sig)
	if err != nil || approved.Status != gateway.StatusExecuted {
		t.Fatalf("approve: %+v, %v", approved, err)
	}
	approvedAt := time.Now()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	// It may see the request while the approval runs; never still waiting.
	if r.v.Status == gateway.StatusWaiting || r.took >= wait {
		t.Fatalf("the long-poll returned %s after %s, want the resolved request before %s", r.v.Status, r.took, wait)
	}
	if r.v.Preview != nil || r.v.PreviewSHA256 != "" {
		t.Fatal("the agent's long-poll shows the preview")
	}
	t.Logf("long-poll returned %s after the approval returned (status %s, %s in all)", r.at.Sub(approvedAt), r.v.Status, r.took)

	start := time.Now()
	if v2, err := gw.WaitRequest(ctx, v.ID, gatewaytest.Agent, wait); err != nil || v2.Status != gateway.StatusExecuted {
		t.Fatalf("long-poll on an executed request: %+v, %v", v2, err)
	}
	if took := time.Since(start); took >= wait {
		t.Fatalf("a long-poll on a resolved request waited %s", took)
	}
	// A request that stays waiting is returned, waiting, at the deadline.
	w := f.referred(t, "DELETE FROM orders WHERE id = 9")
	if v3, err := gw.WaitRequest(ctx, w.ID, gatewaytest.Agent, 50*time.Millisecond); err != nil || v3.Status != gateway.StatusWaiting {
		t.Fatalf("long-poll timeout: %+v, %v", v3, err)
	}
}

// TestQueueExpiry: Run expires requests nobody answered within QueueTTL,
// by the gateway's clock, and only those; expired requests cannot be
// approved.
func TestQueueExpiry(t *testing.T) {
	t.Parallel()
	clk := newManualClock()
	f := newFixture(t, func(o *gatewaytest.Options) {
		o.Gateway.Clock = clk.Now
		o.Gateway.QueueTTL = time.Minute
	})
	ctx := t.Context()
	gw := f.sys.Gateway
	old := f.referred(t, "DELETE FROM orders WHERE id = 11")
	act, err := gw.ProposeApproval(ctx, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	sig := signAct(t, f.sys.Opts.Keys.Approver, signing.NamespaceApproval, act)
	clk.Advance(59 * time.Second)
	young := f.referred(t, "DELETE FROM orders WHERE id = 12")

	clk.Advance(2 * time.Second) // old: 61s, young: 2s
	start := time.Now()
	waitFor(t, "Run to expire the old request", func() bool { return f.view(t, old.ID).Status == gateway.StatusExpired })
	t.Logf("expired %s after the clock passed the TTL (Run ticks every second)", time.Since(start).Round(time.Millisecond))

	if y := f.view(t, young.ID); y.Status != gateway.StatusWaiting {
		t.Fatalf("a request younger than the TTL is %s", y.Status)
	}
	es := ofKind(entries(t, f.sys.Logbook, old.ID), "expiry")
	if len(es) != 1 || payload(t, es[0])["ttl"] != "1m0s" {
		t.Fatalf("expiry entries for the old request: %v", es)
	}
	if n := f.count(t, "expiry"); n != 1 {
		t.Fatalf("%d expiry entries, want 1", n)
	}
	if v, err := gw.WaitRequest(ctx, old.ID, gatewaytest.Agent, time.Second); err != nil || v.Status != gateway.StatusExpired {
		t.Fatalf("the agent sees %+v, %v", v, err)
	}
	if _, err := gw.Approve(ctx, old.ID, act, sig); !errors.Is(err, gateway.ErrNotWaiting) {
		t.Fatalf("approving an expired request: %v, want ErrNotWaiting", err)
	}
	q, err := gw.Queue(ctx, nil)
	if err != nil || len(q) != 1 || q[0].ID != young.ID {
		t.Fatalf("queue %v, %v; want only the young request", q, err)
	}
	if n, age, err := gw.QueueStats(ctx); err != nil || n != 1 || age != 2*time.Second {
		t.Fatalf("queue stats %d %s %v, want 1 request 2s old", n, age, err)
	}
	if f.ran(t) != 0 {
		t.Fatal("an expired request ran")
	}
	f.sys.Verify(t)
}

func revocation(t *testing.T, key *signing.PrivateKey, namespace string, d *gateway.Delegation, target string) ([]byte, []byte) {
	t.Helper()
	act, err := acts.Canonical(acts.Revocation{Version: 1, Kind: acts.KindRevocation, DelegationID: d.ID, Target: target,
		Reason: "the incident is over", Time: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	return act, signAct(t, key, namespace, act)
}

// TestRevocationTakesEffectAtOnce: the statement decided right after a
// revocation returns is referred; only a signer allowed to revoke can
// revoke; revoking twice is an error; a restart keeps the revocation.
func TestRevocationTakesEffectAtOnce(t *testing.T) {
	t.Parallel()
	f := newEmptyFixture(t, nil)
	ctx := t.Context()
	keys := f.sys.Opts.Keys
	orders := f.addDelegation(t, gatewaytest.Example(t, gatewaytest.Orders))
	customers := f.addDelegation(t, gatewaytest.Example(t, gatewaytest.Customers))
	const sel = "SELECT id, status FROM orders WHERE id = 3"
	const selCustomers = "SELECT id, name FROM customers WHERE region = 'EU'"
	if r := f.submit(t, gatewaytest.Agent, sel); r.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("before the revocation: %+v", r)
	}

	refusedRevocations := map[string][2][]byte{}
	put := func(name string, act, sig []byte) { refusedRevocations[name] = [2][]byte{act, sig} }
	put(revocationPair(t, "by bob, who may not revoke", keys.Approver, signing.NamespaceRevocation, orders, gatewaytest.Target))
	put(revocationPair(t, "by a stranger", keys.Stranger, signing.NamespaceRevocation, orders, gatewaytest.Target))
	put(revocationPair(t, "alice's delegation signature", keys.Grantor, signing.NamespaceDelegation, orders, gatewaytest.Target))
	put(revocationPair(t, "naming another target", keys.Grantor, signing.NamespaceRevocation, orders, "bank"))
	for name, r := range refusedRevocations {
		if _, err := f.sys.Gateway.Revoke(ctx, r[0], r[1]); !errors.Is(err, gateway.ErrActRefused) {
			t.Fatalf("revocation %s: %v, want ErrActRefused", name, err)
		}
	}
	if r := f.submit(t, gatewaytest.Agent, sel); r.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("a refused revocation took effect: %+v", r)
	}
	if n := f.count(t, "revocation"); n != 0 {
		t.Fatalf("%d revocation entries for refused revocations", n)
	}

	act, sig := revocation(t, keys.Grantor, signing.NamespaceRevocation, orders, gatewaytest.Target)
	d, err := f.sys.Gateway.Revoke(ctx, act, sig)
	if err != nil {
		t.Fatal(err)
	}
	if d.Revoked == nil || d.Active(time.Now()) {
		t.Fatalf("revoked delegation %+v", d)
	}
	receipts := f.ran(t)
	r := f.submit(t, gatewaytest.Agent, sel) // the very next statement
	if r.Outcome != gateway.OutcomeReferred || r.DelegationID != "" {
		t.Fatalf("right after the revocation: %+v, want referred", r)
	}
	if f.ran(t) != receipts {
		t.Fatal("a statement under a revoked delegation ran")
	}
	if _, err := f.sys.Gateway.Revoke(ctx, act, sig); !errors.Is(err, gateway.ErrAlreadyRevoked) {
		t.Fatalf("revoking twice: %v, want ErrAlreadyRevoked", err)
	}
	es, err := f.sys.Logbook.Find(ctx, logbook.Query{Kind: "revocation"})
	if err != nil || len(es) != 1 || es[0].Subjects["delegation"] != orders.ID || es[0].Subjects["signer"] != "alice" {
		t.Fatalf("revocation entries %v, %v", es, err)
	}

	// With the customers delegation revoked too, none is in force.
	if r := f.submit(t, gatewaytest.Agent, selCustomers); r.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("the other delegation stopped working: %+v", r)
	}
	act2, sig2 := revocation(t, keys.Grantor, signing.NamespaceRevocation, customers, gatewaytest.Target)
	if _, err := f.sys.Gateway.Revoke(ctx, act2, sig2); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{sel, selCustomers} {
		r := f.submit(t, gatewaytest.Agent, sql)
		if r.Outcome != gateway.OutcomeReferred || !strings.Contains(strings.Join(r.Reasons, " "), "no delegation in force") {
			t.Fatalf("%q after both revocations: %+v", sql, r)
		}
	}

	// A restart keeps both revocations.
	f.restart(t)
	if r := f.submit(t, gatewaytest.Agent, sel); r.Outcome != gateway.OutcomeReferred {
		t.Fatalf("after a restart: %+v", r)
	}
	if d := f.sys.Gateway.Registry().Delegation(orders.ID); d == nil || d.Revoked == nil {
		t.Fatalf("after a restart the delegation is %+v", d)
	}
	if _, err := f.sys.Gateway.Revoke(ctx, act, sig); !errors.Is(err, gateway.ErrAlreadyRevoked) {
		t.Fatalf("revoking again after a restart: %v", err)
	}
	if f.ran(t) != receipts+1 {
		t.Fatal("statements ran under revoked delegations")
	}
	f.sys.Verify(t)
}

func revocationPair(t *testing.T, name string, key *signing.PrivateKey, namespace string, d *gateway.Delegation, target string) (string, []byte, []byte) {
	act, sig := revocation(t, key, namespace, d, target)
	return name, act, sig
}

// TestDelegationExpiry: a delegation stops matching exactly at its expiry
// by the gateway's clock, and Run logs its expiry once.
func TestDelegationExpiry(t *testing.T) {
	t.Parallel()
	clk := newManualClock()
	f := newEmptyFixture(t, func(o *gatewaytest.Options) { o.Gateway.Clock = clk.Now })
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	y := gatewaytest.WithExpiry(gatewaytest.Example(t, gatewaytest.Orders), exp)
	d := f.addDelegation(t, rewrite(t, y, "grantee: agent:demo", "grantee: agent:other"))
	const sel = "SELECT id, status FROM orders WHERE id = 3"

	clk.Set(exp.Add(-time.Millisecond))
	if r := f.submit(t, gatewaytest.Other, sel); r.Outcome != gateway.OutcomeExecuted || r.DelegationID != d.ID {
		t.Fatalf("a millisecond before expiry: %+v", r)
	}
	if n := f.count(t, "delegation.expired"); n != 0 {
		t.Fatalf("%d expiry entries before the expiry", n)
	}
	clk.Set(exp)
	r := f.submit(t, gatewaytest.Other, sel)
	if r.Outcome != gateway.OutcomeReferred || !strings.Contains(strings.Join(r.Reasons, " "), "no delegation in force") {
		t.Fatalf("at expiry: %+v, want referred: no delegation in force", r)
	}
	start := time.Now()
	waitFor(t, "Run to log the expiry", func() bool { return f.count(t, "delegation.expired") == 1 })
	t.Logf("delegation.expired logged %s after the expiry (Run ticks every second)", time.Since(start).Round(time.Millisecond))
	es, err := f.sys.Logbook.Find(t.Context(), logbook.Query{Kind: "delegation.expired"})
	if err != nil || len(es) != 1 || es[0].Subjects["delegation"] != d.ID {
		t.Fatalf("expiry entries %v, %v", es, err)
	}
	if f.ran(t) != 1 {
		t.Fatal("a statement ran under an expired delegation")
	}
	f.sys.Verify(t)
}

// TestApprovalWithUnknownCommitStaysRunning: COMMIT of an approved
// statement fails in a way that cannot say whether it took (the backend
// died during it). The request stays running, so the same signed approval
// cannot run the statement a second time; reconciliation then reads the
// target and finds it did not run.
func TestApprovalWithUnknownCommitStaysRunning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *gatewaytest.Options) {
		o.Pilot.LockTimeout = time.Minute
		o.Pilot.StatementTimeout = time.Minute
		o.Gateway.ReconcileAfter = time.Hour // reconciled by hand below
	})
	ctx := t.Context()
	// The trigger that holds COMMIT first: the preview lists what fires,
	// and an approval is bound to the preview the approver saw.
	admin, holder := f.conn(t), f.conn(t)
	holdCommit(t, admin, holder)
	v := f.referred(t, "UPDATE orders SET total_cents = 1 WHERE id = 45")
	act, err := f.sys.Gateway.ProposeApproval(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	sig := signAct(t, f.sys.Opts.Keys.Approver, signing.NamespaceApproval, act)
	before := gatewaytest.Snapshot(t, f.dsn, "orders")

	done := make(chan error, 1)
	go func() {
		_, err := f.sys.Gateway.Approve(context.Background(), v.ID, act, sig)
		done <- err
	}()
	pid := committingBackend(t, admin)
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, pilot.ErrCommitUnknown) {
		t.Fatalf("Approve: %v; want ErrCommitUnknown", err)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
		t.Fatal(err)
	}
	if got := f.view(t, v.ID); got.Status != gateway.StatusRunning {
		t.Fatalf("after an unknown COMMIT the request is %s, want running", got.Status)
	}
	if _, err := f.sys.Gateway.Approve(ctx, v.ID, act, sig); !errors.Is(err, gateway.ErrNotWaiting) {
		t.Fatalf("the same approval again: %v, want ErrNotWaiting", err)
	}
	if n, err := f.sys.Gateway.Reconcile(ctx, 0); err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v", n, err)
	}
	if got := f.view(t, v.ID); got.Status != gateway.StatusWaiting || !strings.Contains(strings.Join(got.Reasons, " "), "did not run") {
		t.Fatalf("reconciled as %+v, want waiting: did not run", got)
	}
	if gatewaytest.Snapshot(t, f.dsn, "orders") != before || f.ran(t) != 0 {
		t.Fatal("the statement ran")
	}
	f.sys.Verify(t)
}

// cancelAfterExecute is the real Pilot, with the caller's context canceled
// as soon as an execution returns: an approver (or agent) whose connection
// closed after the Pilot ran the statement and before the outcome was
// recorded.
type cancelAfterExecute struct {
	pilot.Executor
	cancel atomic.Pointer[context.CancelFunc]
}

func (c *cancelAfterExecute) ExecuteApproved(ctx context.Context, req pilot.ApprovedRequest) (*pilot.Result, error) {
	res, err := c.Executor.ExecuteApproved(ctx, req)
	if f := c.cancel.Load(); f != nil {
		(*f)()
	}
	return res, err
}

func (c *cancelAfterExecute) Execute(ctx context.Context, req pilot.Request) (*pilot.Result, error) {
	res, err := c.Executor.Execute(ctx, req)
	if f := c.cancel.Load(); f != nil {
		(*f)()
	}
	return res, err
}

// TestOutcomeRecordedAfterCallerLeft: once the Pilot has answered, the
// outcome is recorded even if the caller has gone away (its request's
// context canceled), for an approved statement the Pilot refused and for
// one it ran. Found by
// the kill-pilot fault scenario: the outcome's entry was written with the
// caller's context, so a load that stopped mid-approval left requests
// running until reconciliation settled them ("the control plane stopped
// before this statement committed"), an approved-and-executed one seconds
// late.
func TestOutcomeRecordedAfterCallerLeft(t *testing.T) {
	t.Parallel()
	wrap := &cancelAfterExecute{}
	f := newFixture(t, func(o *gatewaytest.Options) {
		o.Gateway.ReconcileAfter = time.Hour // nothing settles it but the path itself
		o.WrapExecutor = func(e pilot.Executor) pilot.Executor { wrap.Executor = e; return wrap }
	})
	approve := func(sql string) (*gateway.RequestView, error) {
		v := f.referred(t, sql)
		act, err := f.sys.Gateway.ProposeApproval(t.Context(), v.ID)
		if err != nil {
			t.Fatal(err)
		}
		sig := signAct(t, f.sys.Opts.Keys.Approver, signing.NamespaceApproval, act)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		wrap.cancel.Store(&cancel)
		defer wrap.cancel.Store(nil)
		_, err = f.sys.Gateway.Approve(ctx, v.ID, act, sig)
		return f.view(t, v.ID), err
	}
	// Refused by the Pilot: someone else fails one more order after the
	// preview, so the statement reaches more rows than approved: back to
	// the queue.
	v := f.referred(t, "DELETE FROM orders WHERE status = 'failed'")
	act, err := f.sys.Gateway.ProposeApproval(t.Context(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	sig := signAct(t, f.sys.Opts.Keys.Approver, signing.NamespaceApproval, act)
	if _, err := f.conn(t).Exec(t.Context(), "UPDATE orders SET status = 'failed' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	wrap.cancel.Store(&cancel)
	_, _ = f.sys.Gateway.Approve(ctx, v.ID, act, sig)
	wrap.cancel.Store(nil)
	cancel()
	if got := f.view(t, v.ID); got.Status != gateway.StatusWaiting || got.PreviewSHA256 == v.PreviewSHA256 {
		t.Errorf("approved, refused by the Pilot, caller gone: the request is %s (preview %s), want waiting with a fresh preview", got.Status, got.PreviewSHA256)
	}
	// Run by the Pilot.
	if got, _ := approve("UPDATE orders SET total_cents = 1 WHERE id = 45"); got.Status != gateway.StatusExecuted {
		t.Errorf("approved, executed, caller gone: the request is %s, want executed", got.Status)
	}
	f.sys.Verify(t)
}

// TestOtherPrincipalsRequestNotAwaited: asking for another principal's
// request answers not found at once, even while that request's execution
// entry is being written; only its owner waits for the entry.
func TestOtherPrincipalsRequestNotAwaited(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	gw, ctx := f.sys.Gateway, t.Context()
	v := f.referred(t, "UPDATE customers SET name = 'Anna Schmidt' WHERE id = 12")
	// What an approval leaves while the Pilot runs it: running, its
	// execution entry not yet written.
	rq, err := store.NewRequests(ctx, f.sys.Store)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := rq.Decide(ctx, v.ID, store.RequestStatus(gateway.StatusWaiting), store.Decision{Status: store.RequestStatus(gateway.StatusRunning), Path: "approved",
		DecidedBy: "bob", Act: "act", ActSignature: "sig", UpdatedNS: time.Now().UnixNano()}); err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	release := gw.HoldExecutionEntry(v.ID)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	other := make(chan error, 1)
	go func() { _, err := gw.Request(ctx, v.ID, gatewaytest.Other); other <- err }()
	select {
	case err := <-other:
		if !errors.Is(err, gateway.ErrNotFound) {
			t.Fatalf("another agent's request: %v, want ErrNotFound", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("another agent's lookup waited for the request's execution entry")
	}
	owner := make(chan error, 1)
	go func() { _, err := gw.Request(ctx, v.ID, gatewaytest.Agent); owner <- err }()
	select {
	case err := <-owner:
		t.Fatalf("the owner's lookup did not wait for the execution entry (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	released = true
	if err := <-owner; err != nil {
		t.Fatalf("the owner's lookup after the entry: %v", err)
	}
}

// TestWebhookEscapesSlackMarkup: the referral webhook is Slack-compatible,
// and Slack reads <url|label>, <!channel> and <@user> in a message's text
// as markup. The reasons carry names the agent chose (a column
// "<https://evil.example|Approve here> <!channel>"), outside the code
// block, so an agent could put a disguised link and a channel-wide
// mention in front of the approvers. Every &, < and > of the text is sent
// escaped, as Slack's message format asks. Found in review 1.
func TestWebhookEscapesSlackMarkup(t *testing.T) {
	t.Parallel()
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(b, &m)
		got <- m.Text
	}))
	t.Cleanup(srv.Close)
	f := newEmptyFixture(t, func(o *gatewaytest.Options) { o.Gateway.Webhook = srv.URL })
	f.addDelegation(t, gatewaytest.Example(t, gatewaytest.Orders))
	const name = `<https://evil.example|Approve here> <!channel>`
	resp, err := f.sys.Gateway.Submit(t.Context(), gatewaytest.Agent, gatewaytest.Target,
		`UPDATE orders SET "`+name+`" = 1 WHERE id = 1 AND status <> '<@U0123>'`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Outcome != gateway.OutcomeReferred || !strings.Contains(strings.Join(resp.Reasons, " "), name) {
		t.Fatalf("%s %q: want referred with a reason naming the column", resp.Outcome, resp.Reasons)
	}
	var text string
	select {
	case text = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook within 10s")
	}
	if strings.ContainsAny(text, "<>") {
		t.Errorf("the webhook's text holds Slack markup from the agent: %q", text)
	}
	for _, want := range []string{"&lt;https://evil.example|Approve here&gt; &lt;!channel&gt;", "&lt;@U0123&gt;"} {
		if !strings.Contains(text, want) {
			t.Errorf("the webhook's text lacks %q: %q", want, text)
		}
	}
}

// TestWebhookMarksLookalikesAndSaysWhereItCuts: the webhook cut the
// statement at 1,000 bytes without saying so, so an agent could put
// what matters past the cut, and it passed bidi controls and look-alike
// letters to the approvers' chat as they are (a U+202E reorders what
// they read; "exаmple.com" with a Cyrillic а reads as example.com). The
// message now marks each look-alike as its code point, lists them, and
// says at the cut how many bytes it leaves out, outside the code block
// the agent writes in. Found in review 1.
func TestWebhookMarksLookalikesAndSaysWhereItCuts(t *testing.T) {
	t.Parallel()
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(b, &m)
		got <- m.Text
	}))
	t.Cleanup(srv.Close)
	f := newEmptyFixture(t, func(o *gatewaytest.Options) { o.Gateway.Webhook = srv.URL })
	f.addDelegation(t, gatewaytest.Example(t, gatewaytest.Orders))
	sql := "UPDATE orders SET status = 'ex\u0430mple.com\u202e <b>\u2800\u3000\u00a0" + strings.Repeat("x", 3000) +
		"\u202e' WHERE status <> 'y'"
	resp, err := f.sys.Gateway.Submit(t.Context(), gatewaytest.Agent, gatewaytest.Target, sql)
	if err != nil || resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%+v, %v: want referred", resp, err)
	}
	var text string
	select {
	case text = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook within 10s")
	}
	v, err := f.sys.Gateway.Request(t.Context(), resp.RequestID, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.CanonicalSQL) < 3000 {
		t.Fatalf("the canonical statement is %d bytes, want over 3000", len(v.CanonicalSQL))
	}
	if strings.ContainsAny(text, "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u2800\u3000\u00a0") {
		t.Errorf("the webhook's text holds a raw bidi control or blank: %q", text)
	}
	// The list of look-alikes shows the Cyrillic а itself; the statement
	// does not.
	if strings.Contains(between(t, text, "```", "```"), "\u0430") {
		t.Errorf("the webhook's statement holds a raw Cyrillic а: %q", text)
	}
	for _, want := range []string{
		"ex⟦U+0430 CYRILLIC SMALL LETTER A⟧mple.com⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧ &lt;b&gt;⟦U+2800 BRAILLE PATTERN BLANK⟧⟦U+3000 IDEOGRAPHIC SPACE⟧⟦U+00A0 NO-BREAK SPACE⟧xxx",
		`Cyrillic "а" (U+0430 CYRILLIC SMALL LETTER A) looks like Latin "a"`,
		"U+202E RIGHT-TO-LEFT OVERRIDE reorders the text around it",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the webhook's text lacks %q: %q", want, text)
		}
	}
	// The statement shown is the first 1,000 bytes of the canonical text;
	// the note after the code block counts the rest.
	shown := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(lookalikeUnmark(between(t, text, "```", "```")))
	if shown != v.CanonicalSQL[:1000] {
		t.Errorf("the code block is not the statement's first 1,000 bytes: %q", shown)
	}
	want := fmt.Sprintf("```\n… (truncated, %d more bytes: open the console)", len(v.CanonicalSQL)-1000)
	if !strings.HasSuffix(text, want) {
		t.Errorf("the webhook's text does not end with %q: ...%q", want, text[max(0, len(text)-200):])
	}
}

// lookalikeUnmark reads a lookalike.Mark rendering back to its text.
func lookalikeUnmark(m string) string {
	re := regexp.MustCompile(`⟦U\+([0-9A-F]{4,6})[^⟧]*⟧`)
	return re.ReplaceAllStringFunc(m, func(s string) string {
		r, _ := strconv.ParseUint(re.FindStringSubmatch(s)[1], 16, 32)
		return string(rune(r))
	})
}

func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		t.Fatalf("no %q in %q", from, s)
	}
	out, _, _ := strings.Cut(rest, to)
	return out
}
