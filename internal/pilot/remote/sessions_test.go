package remote_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/pilot/remote"
)

// TestSessionsHeldByThePilot: a client transaction on a remote Pilot is
// held on the Pilot's side: its statements are not seen before COMMIT and
// are after; a savepoint's error comes back as the target's; a session
// left idle is rolled back by the server, and the node learns it is gone.
func TestSessionsHeldByThePilot(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	stls, err := remote.ServerTLS(f.certs.PilotCert, f.certs.PilotKey, f.certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := remote.NewServer(remote.ServerConfig{TLS: stls, SessionIdle: 300 * time.Millisecond}, f.pilot)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	ctls, err := remote.ClientTLS(f.certs.CA, f.certs.ClientCert, f.certs.ClientKey, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := remote.Connect(ctx, remote.ClientConfig{Target: "shop", URL: "https://" + ln.Addr().String(), TLS: ctls})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	status := func(id int) string {
		t.Helper()
		conn, err := pgx.Connect(ctx, f.dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var s string
		if err := conn.QueryRow(ctx, "SELECT status FROM orders WHERE id = $1", id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	sess, err := c.Begin(ctx, pilot.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sess.ID() == "" {
		t.Fatal("no transaction id")
	}
	res, err := sess.Execute(ctx, f.request(t, gatewaytest.Orders, "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 7"))
	if err != nil || res.Outcome != pilot.Executed || res.RowsAffected != 1 {
		t.Fatalf("execute: %+v %v", res, err)
	}
	if s := status(7); s != "pending" {
		t.Fatalf("order 7 is %q before COMMIT", s)
	}
	var sp *pilot.SavepointError
	if err := sess.Savepoint(ctx, "rollback to", "nope"); !errors.As(err, &sp) || sp.Code != "3B001" {
		t.Fatalf("ROLLBACK TO an unknown savepoint: %v, want the target's 3B001", err)
	}
	// That error aborted the transaction: COMMIT rolls it back.
	if err := sess.Commit(ctx); !errors.Is(err, pilot.ErrRolledBack) {
		t.Fatalf("COMMIT of an aborted transaction: %v, want it rolled back", err)
	}
	if s := status(7); s != "pending" {
		t.Fatalf("order 7 is %q after an aborted transaction", s)
	}

	sess, err = c.Begin(ctx, pilot.TxOptions{Isolation: "repeatable read"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sess.Execute(ctx, f.request(t, gatewaytest.Orders, "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 8")); err != nil || res.Outcome != pilot.Executed {
		t.Fatalf("execute: %+v %v", res, err)
	}
	if err := sess.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if s := status(8); s != "retrying" {
		t.Fatalf("order 8 is %q after COMMIT", s)
	}

	// Left idle past SessionIdle: the server rolls it back.
	sess, err = c.Begin(ctx, pilot.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sess.Execute(ctx, f.request(t, gatewaytest.Orders, "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 9")); err != nil || res.Outcome != pilot.Executed {
		t.Fatalf("execute: %+v %v", res, err)
	}
	time.Sleep(time.Second)
	_, err = sess.Execute(ctx, f.request(t, gatewaytest.Orders, "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 10"))
	if !errors.Is(err, pilot.ErrSessionBroken) {
		t.Fatalf("a statement in a session left idle: %v, want it gone", err)
	}
	if s := status(9); s != "pending" {
		t.Fatalf("order 9 is %q: the idle session was not rolled back", s)
	}

	// Left idle with no other session call after it (its node has gone):
	// the server rolls it back all the same, and its row locks go with it.
	// Before, a session was reaped only when another session call came, so
	// the locks of a write stayed as long as none did (review i24).
	sess, err = c.Begin(ctx, pilot.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sess.Execute(ctx, f.request(t, gatewaytest.Orders, "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 11")); err != nil || res.Outcome != pilot.Executed {
		t.Fatalf("execute: %+v %v", res, err)
	}
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET lock_timeout = '5s'"); err != nil {
		t.Fatal(err)
	}
	var id int
	if err := conn.QueryRow(ctx, "SELECT id FROM orders WHERE id = 11 FOR UPDATE").Scan(&id); err != nil {
		t.Fatalf("order 11 is still locked by a session left idle with no call after it: %v", err)
	}
}
