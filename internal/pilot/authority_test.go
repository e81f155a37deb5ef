package pilot_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// granted turns a request the fixture minted into the same authorization
// given as a value by the Pilot's in-process authority (the claims the
// token carries, unsigned: marque.Minter.Grant).
func (f *fixture) granted(t *testing.T, a *pilot.Authority, req pilot.Request, edit func(*marque.Claims)) pilot.Request {
	t.Helper()
	return a.Authorize(req, f.grant(t, req, edit))
}

// grantedRead is granted, authorized by AuthorizeRead.
func (f *fixture) grantedRead(t *testing.T, a *pilot.Authority, req pilot.Request) pilot.Request {
	t.Helper()
	return a.AuthorizeRead(req, f.grant(t, req, nil))
}

// grant is the grant of the claims req's marque carries, edited.
func (f *fixture) grant(t *testing.T, req pilot.Request, edit func(*marque.Claims)) marque.Grant {
	t.Helper()
	c, err := f.pilotVerifier.Verify(req.Marque, marque.Expect{Target: "shop", StatementHash: marque.StatementHash(req.SQL)})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&c)
	}
	id, err := f.minter.NewID()
	if err != nil {
		t.Fatal(err)
	}
	g, err := f.minter.Grant(id, c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestInProcessAuthority: a statement authorized as a value by this
// Pilot's authority runs exactly as one with a marque (verified bound,
// guards, a receipt that makes it single-use), and nothing else passes for
// one: another Pilot's authority, another statement, another target, an
// expired grant, or a request that crossed a process boundary.
func TestInProcessAuthority(t *testing.T) {
	f := newFixture(t)
	a := f.pilot.Authority()
	if a == nil {
		t.Fatal("a Pilot has no in-process authority")
	}
	const sql = "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 7"
	req := f.granted(t, a, f.request(t, "unstick-orders.yaml", sql), nil)
	if req.Marque != "" {
		t.Fatalf("an authorized request still carries a marque")
	}
	before := f.receipts(t)
	res, err := f.pilot.Execute(t.Context(), req)
	if err != nil || res.Outcome != pilot.Executed || res.RowsAffected != 1 {
		t.Fatalf("granted: %+v %v", res, err)
	}
	if f.receipts(t) != before+1 {
		t.Fatalf("a granted statement wrote no receipt")
	}
	if res, err := f.pilot.Execute(t.Context(), req); err != nil || res.Outcome != pilot.Refused || res.Code != pilot.RefusedReplay {
		t.Fatalf("the same grant twice: %+v %v", res, err)
	}

	// The bound is verified as for a marque: a fence the statement leaves.
	outside := f.granted(t, a, f.request(t, "unstick-orders.yaml", "UPDATE orders SET status = 'retrying' WHERE id = 7"), nil)
	if res, err := f.pilot.Execute(t.Context(), outside); err != nil || res.Outcome != pilot.Refused {
		t.Fatalf("outside the fence: %+v %v", res, err)
	}

	other, err := pilot.New(t.Context(), pilot.Config{Target: "shop", DSN: f.dsn}, verifierOf(t, f), f.signers)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	stmt := "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 8"
	for name, req := range map[string]pilot.Request{
		"another Pilot's authority": f.granted(t, other.Authority(), f.request(t, "unstick-orders.yaml", stmt), nil),
		"another target":            f.granted(t, a, f.request(t, "unstick-orders.yaml", stmt), func(c *marque.Claims) { c.Target = "billing" }),
		"another statement": f.granted(t, a, f.request(t, "unstick-orders.yaml", stmt), func(c *marque.Claims) {
			c.StatementHash = marque.StatementHash("UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 9")
		}),
		"another delegation's signature": f.granted(t, a, f.request(t, "unstick-orders.yaml", stmt), func(c *marque.Claims) {
			c.Auth = f.auth("fix-name-typos.yaml")
		}),
	} {
		res, err := f.pilot.Execute(t.Context(), req)
		if err != nil || res.Outcome != pilot.Refused {
			t.Errorf("%s: %+v %v, want refused", name, res, err)
		}
	}

	// Expired: a grant is valid for the marque lifetime, as a token is.
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	old, err := marque.NewMinter(marque.MinterConfig{Issuer: "test", Key: key, Clock: func() time.Time { return time.Now().Add(-time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	base := f.request(t, "unstick-orders.yaml", stmt)
	c, err := f.pilotVerifier.Verify(base.Marque, marque.Expect{Target: "shop", StatementHash: marque.StatementHash(base.SQL)})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := old.NewID()
	stale, err := old.Grant(id, c)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := f.pilot.Execute(t.Context(), a.Authorize(base, stale)); err != nil || res.Outcome != pilot.Refused || res.Code != pilot.RefusedMarque {
		t.Fatalf("expired grant: %+v %v", res, err)
	}

	// A grant is checked as a token's claims are: one made by a minter of
	// another issuer (no Grant comes from anywhere but a minter), and the
	// zero Grant, are refused.
	other2, err := marque.NewMinter(marque.MinterConfig{Issuer: "another-control-plane", Key: key, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	id, _ = other2.NewID()
	foreign, err := other2.Grant(id, c)
	if err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]marque.Grant{"another issuer's grant": foreign, "the zero grant": {}} {
		if res, err := f.pilot.Execute(t.Context(), a.Authorize(base, g)); err != nil || res.Outcome != pilot.Refused || res.Code != pilot.RefusedMarque {
			t.Errorf("%s: %+v %v, want refused", name, res, err)
		}
	}

	// A request that crosses a process boundary is encoded: the grant is
	// not, so what arrives carries no authorization at all.
	b, err := json.Marshal(f.granted(t, a, f.request(t, "unstick-orders.yaml", stmt), nil))
	if err != nil {
		t.Fatal(err)
	}
	var crossed pilot.Request
	if err := json.Unmarshal(b, &crossed); err != nil {
		t.Fatal(err)
	}
	if res, err := f.pilot.Execute(t.Context(), crossed); err != nil || res.Outcome != pilot.Refused || res.Code != pilot.RefusedMarque {
		t.Fatalf("an encoded grant: %+v %v", res, err)
	}
}

// TestAuthorizeReadWritesNoReceipt: a read authorized by AuthorizeRead
// runs, through its shape's template and on the literal path, with its
// rows and no receipt; a read authorized by Authorize or by a marque
// writes one; a write authorized by AuthorizeRead writes its receipt
// all the same (the flag is for reads alone), and is single-use.
func TestAuthorizeReadWritesNoReceipt(t *testing.T) {
	f := newFixture(t)
	a := f.pilot.Authority()
	ctx := t.Context()
	for i, sql := range []string{
		"SELECT id, status FROM orders WHERE id = 3",          // the first of its shape
		"SELECT id, status FROM orders WHERE id = 4",          // its template
		"SELECT id, status FROM orders WHERE id IN (5, 6, 7)", // another shape
	} {
		before := f.receipts(t)
		res, err := f.pilot.Execute(ctx, f.grantedRead(t, a, f.request(t, "unstick-orders.yaml", sql)))
		if err != nil || res.Outcome != pilot.Executed || len(res.Rows) == 0 {
			t.Fatalf("%d %q: %+v %v", i, sql, res, err)
		}
		if f.receipts(t) != before {
			t.Fatalf("%q: a read authorized by AuthorizeRead wrote a receipt", sql)
		}
	}
	const read = "SELECT id, status FROM orders WHERE id = 8"
	for name, req := range map[string]pilot.Request{
		"Authorize": f.granted(t, a, f.request(t, "unstick-orders.yaml", read), nil),
		"a marque":  f.request(t, "unstick-orders.yaml", read),
	} {
		before := f.receipts(t)
		if res, err := f.pilot.Execute(ctx, req); err != nil || res.Outcome != pilot.Executed {
			t.Fatalf("%s: %+v %v", name, res, err)
		}
		if f.receipts(t) != before+1 {
			t.Fatalf("a read authorized by %s wrote no receipt", name)
		}
	}
	write := f.grantedRead(t, a, f.request(t, "unstick-orders.yaml", "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 9"))
	before := f.receipts(t)
	if res, err := f.pilot.Execute(ctx, write); err != nil || res.Outcome != pilot.Executed || f.receipts(t) != before+1 {
		t.Fatalf("a write authorized by AuthorizeRead: %+v %v, receipts %d (before %d): want executed with its receipt", res, err, f.receipts(t), before)
	}
	if res, err := f.pilot.Execute(ctx, write); err != nil || res.Outcome != pilot.Refused || res.Code != pilot.RefusedReplay {
		t.Fatalf("the same write twice: %+v %v", res, err)
	}
}
