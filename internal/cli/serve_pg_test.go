package cli_test

import (
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot/remote"
)

// TestServeWireFront runs harbormaster serve with listen_pg and pg_tls
// from its config and connects as the agent over the wire, inside TLS with
// its token as the password (the agent has no pg_scram verifier).
func TestServeWireFront(t *testing.T) {
	t.Parallel()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	certs := filepath.Join(t.TempDir(), "certs")
	files, err := remote.WriteCerts(certs, []string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d := servetest.NewDeployment(t, servetest.Options{Name: "serve-pg", TargetDSN: dsn,
		Extra: "listen_pg: " + addr + "\npg_tls:\n  cert: " + files.PilotCert + "\n  key: " + files.PilotKey + "\n"})
	d.Start(t, "serve.log")

	u := url.URL{Scheme: "postgres", User: url.UserPassword(gatewaytest.Agent, gatewaytest.AgentToken), Host: addr,
		Path: "/" + gatewaytest.Target, RawQuery: url.Values{"sslmode": {"verify-full"}, "sslrootcert": {files.CA}}.Encode()}
	var c *pgx.Conn
	servetest.WaitUntil(t, "the wire front answers", func() bool {
		c, err = pgx.Connect(t.Context(), u.String())
		return err == nil
	})
	defer c.Close(t.Context())
	var status string
	if err := c.QueryRow(t.Context(), "SELECT status FROM orders WHERE id = $1", 3).Scan(&status); err != nil || status != "pending" {
		t.Fatalf("read over the wire: %q %v", status, err)
	}
	u.RawQuery = "sslmode=disable"
	if _, err := pgx.Connect(t.Context(), u.String()); err == nil {
		t.Fatal("an agent without a SCRAM verifier connected without TLS")
	}
}
