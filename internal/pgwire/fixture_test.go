package pgwire_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
	"github.com/harbormaster-dev/harbormaster/internal/shadow"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

var shared pgtmptest.Shared

// catalogs are the shadow catalogs of every fixture: fixtures of one
// schema and bound share a Spec, so one server.
var catalogs struct {
	once sync.Once
	m    *shadow.Manager
	err  error
}

func catalogManager(t testing.TB) *shadow.Manager {
	t.Helper()
	catalogs.once.Do(func() {
		catalogs.m, catalogs.err = shadow.New(shadow.Config{StartTimeout: 3 * time.Minute})
	})
	if catalogs.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("shadow catalog: %v", catalogs.err)
		}
		t.Skipf("shadow catalog: %v", catalogs.err)
	}
	return catalogs.m
}

func TestMain(m *testing.M) {
	code := shared.Run(m)
	if catalogs.m != nil {
		catalogs.m.Close()
	}
	os.Exit(code)
}

// kindsDDL is a table with a column of every common type, for the
// parameter and row round trips.
const kindsDDL = `CREATE TABLE public.kinds (
	id bigint PRIMARY KEY,
	i2 smallint, i4 integer, i8 bigint, num numeric, txt text, flag boolean,
	f4 real, f8 double precision, day date, at timestamptz, uid uuid, raw bytea,
	doc jsonb, ints integer[], tags text[]
);
INSERT INTO public.kinds (id, i2, i4, i8, num, txt, flag, f4, f8, day, at, uid, raw, doc, ints, tags) VALUES
	(1, 7, 70000, 7000000000, 12.345, 'seven', true, 1.5, 2.25, '2024-02-29', '2024-02-29 12:34:56.789+00',
	 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\xdeadbeef', '{"a": [1, 2], "b": "x"}', '{1,2,3}', '{"a b",c}');
CREATE TABLE public.secrets (id bigint PRIMARY KEY, code text);
CREATE TYPE public.mood AS ENUM ('calm', 'cross');
CREATE TABLE public.moods (id bigint PRIMARY KEY, m public.mood, ms public.mood[]);
INSERT INTO public.moods VALUES (1, 'calm', '{calm,cross}');`

const kindsCols = "[id, i2, i4, i8, num, txt, flag, f4, f8, day, at, uid, raw, doc, ints, tags]"

func kindsDelegation(exp time.Time) []byte {
	return fmt.Appendf(nil, `sentence: Read and add rows of the kinds table.
grantee: agent:demo
target: shop
expires: %s
allow:
  - op: select
    table: public.kinds
    columns: %s
    max_rows: 100
  - op: insert
    table: public.kinds
    columns: %s
    max_rows: 5
  - op: select
    table: public.moods
    columns: [id, m, ms]
    max_rows: 10
`, exp.UTC().Format(time.RFC3339), kindsCols, kindsCols)
}

// fixture is a whole control plane with the wire front on a loopback
// port, TLS offered with a fresh self-signed certificate.
type fixture struct {
	sys    *gatewaytest.System
	dsn    string
	front  *pgwire.Server
	addr   string
	caFile string // the certificate, for sslrootcert
	pool   *x509.CertPool
}

// Agents: AgentToken has a SCRAM verifier; OtherToken has none, so it may
// connect over TLS only.
func newFixture(t testing.TB) *fixture { t.Helper(); return newFixtureWith(t, nil) }

// newFixtureWith is newFixture with the system's options changed by opts.
func newFixtureWith(t testing.TB, opts func(*gatewaytest.Options)) *fixture {
	t.Helper()
	return newFixtureFront(t, opts, nil)
}

// newFixtureFront is newFixtureWith with the front's config changed by
// front.
func newFixtureFront(t testing.TB, opts func(*gatewaytest.Options), front func(*pgwire.Config)) *fixture {
	t.Helper()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	gatewaytest.LoadShop(t, dsn)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), kindsDDL, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	conn.Close(t.Context())
	o := gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(t.TempDir(), "store.db"), Keys: gatewaytest.NewKeys(t)}
	if opts != nil {
		opts(&o)
	}
	sys := gatewaytest.Start(t, o)
	sys.AddExamples(t)
	y := kindsDelegation(time.Now().Add(7 * 24 * time.Hour).Truncate(time.Hour))
	sig := gatewaytest.Sign(t, sys.Opts.Keys.Grantor, gatewaytest.Canonical(t, y, sys.Pilot.Catalog()))
	if _, _, err := sys.Gateway.AddDelegation(t.Context(), y, sig, "kinds.yaml"); err != nil {
		t.Fatal(err)
	}
	f := &fixture{sys: sys, dsn: dsn}
	cert, pemBytes := selfSigned(t)
	f.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(f.caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	f.pool = x509.NewCertPool()
	f.pool.AppendCertsFromPEM(pemBytes)
	cfg := pgwire.Config{
		Agents: []pgwire.Agent{
			{Principal: gatewaytest.Agent, TokenSHA256: httpapi.HashToken(gatewaytest.AgentToken), SCRAM: pgwire.NewVerifier(gatewaytest.AgentToken)},
			{Principal: gatewaytest.Other, TokenSHA256: httpapi.HashToken(gatewaytest.OtherToken)},
		},
		TLS:         &tls.Config{Certificates: []tls.Certificate{cert}},
		DefaultWait: 5 * time.Second,
		// The Pilot's own defaults (pilot.Config).
		Timeouts: map[string]pgwire.Timeouts{gatewaytest.Target: {Statement: 5 * time.Second, Lock: 2 * time.Second}},
		Catalog:  catalogManager(t),
	}
	if front != nil {
		front(&cfg)
	}
	f.front, err = pgwire.New(sys.Gateway, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.front.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f
}

// url is a connection URL for a principal and token.
func (f *fixture) url(user, token, sslmode string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, token), Host: f.addr, Path: "/" + gatewaytest.Target}
	q := url.Values{"sslmode": {sslmode}}
	if sslmode == "verify-full" {
		q.Set("sslrootcert", f.caFile)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (f *fixture) connect(t *testing.T, user, token, sslmode string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), f.url(user, token, sslmode))
	if err != nil {
		t.Fatalf("connect as %s (sslmode %s): %v", user, sslmode, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// approve approves a referred request as bob, once it is rehearsed.
func (f *fixture) approve(t *testing.T, id string) *gateway.RequestView {
	t.Helper()
	f.sys.Previewed(t, id)
	act, err := f.sys.Gateway.ProposeApproval(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := f.sys.Opts.Keys.Approver.Sign(signing.NamespaceApproval, act)
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.sys.Gateway.Approve(t.Context(), id, act, sig)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func selfSigned(t testing.TB) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert, certPEM
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
