// Package storetest runs a test against every driver of the control store:
// SQLite in a temporary file and PostgreSQL in a database of its own on a
// throwaway server (internal/pgtmp/pgtmptest), which skips where
// PostgreSQL is not installed, except under CI=true, where it fails.
//
// A package that uses it shares one server across its tests:
//
//	var pg pgtmptest.Shared
//
//	func TestMain(m *testing.M) { os.Exit(pg.Run(m)) }
//
//	func TestAppend(t *testing.T) {
//		storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
//			st := loc.Open(t)
//			...
//		})
//	}
package storetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Drivers are the drivers Each runs, in order.
func Drivers() []store.Driver { return []store.Driver{store.SQLite, store.Postgres} }

// Location is one fresh, empty store: a SQLite file or a PostgreSQL
// database. Open it as many times as a test needs handles (another
// "process" is another Open of the same Location).
type Location struct {
	Driver store.Driver
	// Path is the SQLite path or the PostgreSQL URL.
	Path string
}

// New returns a fresh location of driver d for t; it is removed when t ends.
func New(t testing.TB, d store.Driver, pg *pgtmptest.Shared) Location {
	t.Helper()
	if d == store.Postgres {
		return Location{Driver: d, Path: pgtmptest.NewDatabase(t, pg.Server(t))}
	}
	return Location{Driver: d, Path: filepath.Join(t.TempDir(), "control.db")}
}

// Open opens a Store on l, closed when t ends. On PostgreSQL it allows the
// throwaway server's fsync=off.
func (l Location) Open(t testing.TB, opts ...store.Option) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), l.Path, l.Options(opts...)...)
	if err != nil {
		t.Fatalf("storetest: open %s store: %v", l.Driver, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Options are opts plus what a test store on l needs.
func (l Location) Options(opts ...store.Option) []store.Option {
	if l.Driver == store.Postgres {
		return append([]store.Option{store.WithUnsafeNoFsync()}, opts...)
	}
	return opts
}

// EnvDriver is the environment variable that picks the driver of a test
// pass for tests written for one store: "postgres" runs them on
// PostgreSQL; unset or "sqlite", on SQLite. The Makefile's test target runs
// the store's users a second time with it set.
const EnvDriver = "HM_TEST_STORE"

// FromEnv is the driver EnvDriver names. Another value fails t.
func FromEnv(t testing.TB) store.Driver {
	t.Helper()
	switch v := os.Getenv(EnvDriver); v {
	case "", string(store.SQLite):
		return store.SQLite
	case string(store.Postgres):
		return store.Postgres
	default:
		t.Fatalf("storetest: %s=%q: want sqlite or postgres", EnvDriver, v)
		return ""
	}
}

// Each runs fn as one subtest per driver, named for the driver, each with a
// fresh location. The subtests run in parallel with each other when the
// caller has called t.Parallel.
func Each(t *testing.T, pg *pgtmptest.Shared, fn func(t *testing.T, loc Location)) {
	t.Helper()
	for _, d := range Drivers() {
		t.Run(string(d), func(t *testing.T) {
			fn(t, New(t, d, pg))
		})
	}
}
