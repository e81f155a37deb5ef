package pgwire_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// needTool finds a command the test needs: missing, it fails the test
// under CI (CI=true) and skips it elsewhere.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI: %v", name, err)
		}
		t.Skipf("%s is not installed: %v", name, err)
	}
	return p
}

// psql runs the real psql against a URL with one command and returns its
// output, its error output and whether it succeeded.
func psql(t *testing.T, bin, url string, args ...string) (string, string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-X", "-At", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose", url}, args...)...)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10", "PGAPPNAME=psql-test")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

var reqRE = regexp.MustCompile(`req_[a-z0-9]+`)

// TestPsql drives the front with the real psql (the simple protocol):
// reads, writes, \d, a referral and its approval, a bad token, TLS.
func TestPsql(t *testing.T) {
	t.Parallel()
	bin := needTool(t, "psql")
	f := newFixture(t)
	u := f.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable")

	out, errs, ok := psql(t, bin, u, "-c", "SELECT id, status FROM orders WHERE id = 2")
	if !ok || out != "2|pending\n" {
		t.Fatalf("read: %q %q", out, errs)
	}
	out, errs, ok = psql(t, bin, u, "-c", "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 2")
	if !ok || out != "UPDATE 1\n" {
		t.Fatalf("write: %q %q", out, errs)
	}
	// Session settings psql and scripts send are answered at the front.
	out, errs, ok = psql(t, bin, u, "-c", "SET application_name = 'tour'", "-c", "SET extra_float_digits = 3", "-c", "SHOW application_name", "-c", "SHOW server_version")
	if !ok || out != "SET\nSET\ntour\n15.0\n" {
		t.Fatalf("settings: %q %q", out, errs)
	}
	// A transaction: psql's -1 (one transaction) commits both writes.
	out, errs, ok = psql(t, bin, u, "-1", "-c", "UPDATE orders SET status = 'retrying' WHERE id = 20", "-c", "UPDATE orders SET status = 'failed', updated_at = now() WHERE id = 21")
	if !ok || out != "UPDATE 1\nUPDATE 1\n" {
		t.Fatalf("psql -1: %q %q", out, errs)
	}
	// \dt and \d read pg_catalog: answered from the shadow catalog of
	// the bound, its tables and listed columns only (catalog_test.go
	// holds the rest).
	out, errs, ok = psql(t, bin, u, "-c", `\dt`)
	if !ok || out != "public|customers|table|postgres\npublic|kinds|table|postgres\npublic|moods|table|postgres\npublic|orders|table|postgres\n" {
		t.Fatalf("\\dt: %q %q", out, errs)
	}
	out, errs, ok = psql(t, bin, u, "-c", `\d orders`)
	if !ok || out != "id|bigint||not null|\ncustomer_id|bigint||not null|\nstatus|text||not null|\ncreated_at|timestamp with time zone||not null|\nupdated_at|timestamp with time zone||not null|\n" {
		t.Fatalf("\\d orders: %q %q", out, errs)
	}
	// A referral: HM001, the request id in the error (psql shows Where as
	// CONTEXT), nothing ran.
	_, errs, ok = psql(t, bin, u, "-c", "UPDATE orders SET status = 'failed' WHERE id = 46")
	if ok || !strings.Contains(errs, "HM001") || !strings.Contains(errs, "CONTEXT:  req_") {
		t.Fatalf("referral: %q", errs)
	}
	id := reqRE.FindString(errs)
	out, _, ok = psql(t, bin, u, "-c", "SELECT status FROM harbormaster_wait('"+id+"', 0.1)")
	if ok {
		t.Fatalf("harbormaster_wait in FROM is governed, not answered: %q", out)
	}
	out, errs, ok = psql(t, bin, u, "-c", "SELECT harbormaster_wait('"+id+"', 0.1)")
	if !ok || !strings.HasPrefix(out, id+"|waiting|referred|0|") {
		t.Fatalf("wait: %q %q", out, errs)
	}
	f.approve(t, id)
	out, errs, ok = psql(t, bin, u, "-c", "SELECT harbormaster_wait('"+id+"')")
	if !ok || !strings.HasPrefix(out, id+"|executed|executed|1|") {
		t.Fatalf("wait after approval: %q %q", out, errs)
	}
	// A bad token.
	_, errs, ok = psql(t, bin, f.url(gatewaytest.Agent, "wrong", "disable"), "-c", "SELECT 1")
	if ok || !strings.Contains(errs, "password authentication failed") {
		t.Fatalf("bad token: %q", errs)
	}
	// TLS: cleartext password only inside it.
	out, errs, ok = psql(t, bin, f.url(gatewaytest.Other, gatewaytest.OtherToken, "verify-full"), "-c", "SHOW client_encoding")
	if !ok || out != "UTF8\n" {
		t.Fatalf("TLS: %q %q", out, errs)
	}
	_, errs, ok = psql(t, bin, f.url(gatewaytest.Other, gatewaytest.OtherToken, "disable"), "-c", "SELECT 1")
	if ok || !strings.Contains(errs, "only with TLS") {
		t.Fatalf("cleartext without TLS: %q", errs)
	}
}
