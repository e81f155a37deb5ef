// Package pgtmptest starts throwaway PostgreSQL servers (package pgtmp) for
// tests. Where PostgreSQL is not installed, tests skip, except under CI
// (CI=true), where they fail: a missing dependency must not pass quietly.
//
// One server per test:
//
//	func TestOrders(t *testing.T) {
//		srv := pgtmptest.Start(t) // stopped by t.Cleanup
//		dsn := pgtmptest.NewDatabase(t, srv)
//		...
//	}
//
// One server for a whole package, each test in its own database (starting a
// server costs a few seconds of initdb; a database, well under one):
//
//	var shared pgtmptest.Shared
//
//	func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }
//
//	func TestOrders(t *testing.T) {
//		t.Parallel()
//		dsn := pgtmptest.NewDatabase(t, shared.Server(t)) // dropped by t.Cleanup
//		...
//	}
//
// The shared server starts on the first call to Server, so a run whose
// tests do not need it (go test -run, -short) does not pay for it.
package pgtmptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
)

// config is the server every helper here starts: durability off for speed,
// and a start-up allowance for a machine busy with other test binaries,
// where initdb alone can take tens of seconds.
func config() pgtmp.Config { return pgtmp.Config{Fast: true, StartTimeout: 3 * time.Minute} }

// Start starts a server for t and stops it when t ends.
func Start(t testing.TB) *pgtmp.Server {
	t.Helper()
	return StartWith(t, nil)
}

// StartWith is Start with extra server settings (postgresql.conf names),
// e.g. synchronous_commit=on for a test that crashes the server (Crash)
// and needs every acknowledged commit to survive it.
func StartWith(t testing.TB, settings map[string]string) *pgtmp.Server {
	t.Helper()
	cfg := config()
	cfg.Settings = settings
	s, err := pgtmp.Start(t.Context(), cfg)
	if err != nil {
		skipOrFatal(t, err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtmptest: %v", err)
		}
	})
	return s
}

// NewDatabase creates a database with a fresh, unique name on s, drops it
// when t ends, and returns its DSN.
func NewDatabase(t testing.TB, s *pgtmp.Server) string {
	t.Helper()
	name := databaseName(t.Name())
	dsn, err := s.CreateDatabase(t.Context(), name)
	if err != nil {
		t.Fatalf("pgtmptest: %v", err)
	}
	t.Cleanup(func() {
		// t.Context is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.DropDatabase(ctx, name); err != nil && !errors.Is(err, pgtmp.ErrStopped) {
			t.Errorf("pgtmptest: %v", err)
		}
	})
	return dsn
}

// databaseName is "t_<test name, squeezed>_<random hex>", at most 63 bytes.
func databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "_"):
			b.WriteByte('_')
		}
	}
	slug := strings.Trim(b.String(), "_")
	const room = 63 - len("t__") - 16
	if len(slug) > room {
		slug = slug[len(slug)-room:]
	}
	var random [8]byte
	_, _ = rand.Read(random[:]) // never fails
	return fmt.Sprintf("t_%s_%s", slug, hex.EncodeToString(random[:]))
}

// Shared is one server shared by a package's tests; see the package doc.
// The zero value is ready to use; it must not be copied after first use.
type Shared struct {
	once sync.Once
	srv  *pgtmp.Server
	err  error
}

// Server returns the shared server, starting it on first use. If it cannot
// start, every test that asks skips or fails as Start would.
func (s *Shared) Server(t testing.TB) *pgtmp.Server {
	t.Helper()
	s.once.Do(func() {
		// Not t.Context: the server outlives the test that happened to start it.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s.srv, s.err = pgtmp.Start(ctx, config())
	})
	if s.err != nil {
		skipOrFatal(t, s.err)
	}
	return s.srv
}

// Run runs the tests, then stops the server if one was started. It returns
// the exit code for os.Exit; a failed Stop turns success into failure.
func (s *Shared) Run(m *testing.M) int {
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtmptest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Close stops the server if one was started. It is idempotent; call it
// only after the tests that use the server have finished.
func (s *Shared) Close() error {
	s.once.Do(func() { s.err = pgtmp.ErrStopped }) // none started: none will be
	if s.srv == nil {
		return nil
	}
	return s.srv.Stop()
}

// skipOrFatal ends t over a failed start: a skip when PostgreSQL is simply
// not installed and this is not CI, a failure otherwise.
func skipOrFatal(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, pgtmp.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("pgtmptest: %v", err)
	}
	t.Fatalf("pgtmptest: %v", err)
}
