package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/store/storetest"
)

var pg pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Run(m)) }

// Portable test schemas: valid on both drivers.
var (
	msT = store.Migration{Version: 1, Name: "t", SQL: "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL); INSERT INTO t (id, v) VALUES (1, 'one');"}
	msU = store.Migration{Version: 2, Name: "u", SQL: "CREATE TABLE u (id INTEGER PRIMARY KEY)"}
)

func count(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func TestPostgresMigrationsMirrorSQLite(t *testing.T) {
	t.Parallel()
	if err := store.CheckMigrations(store.PostgresMigrations); err != nil {
		t.Fatal(err)
	}
	if len(store.PostgresMigrations) != len(store.Migrations) {
		t.Fatalf("%d PostgreSQL migrations, %d SQLite: every schema change goes to both", len(store.PostgresMigrations), len(store.Migrations))
	}
	for i, m := range store.Migrations {
		if p := store.PostgresMigrations[i]; p.Name != m.Name {
			t.Errorf("migration %d: PostgreSQL %q, SQLite %q", m.Version, p.Name, m.Name)
		}
	}
}

func TestIsPostgresURL(t *testing.T) {
	t.Parallel()
	for loc, want := range map[string]bool{
		"postgres://h/db": true, "postgresql://u@h/db?sslmode=require": true, "POSTGRES://h/db": true,
		"control.db": false, "/var/lib/hm/control.db": false, ":memory:": false, "postgres.db": false,
	} {
		if got := store.IsPostgresURL(loc); got != want {
			t.Errorf("IsPostgresURL(%q) = %v, want %v", loc, got, want)
		}
	}
}

func TestRebind(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"UPDATE t SET a = ?, b = ? WHERE id = ?", "UPDATE t SET a = $1, b = $2 WHERE id = $3"},
		{"SELECT '?' , ? -- why?\n, \"q?\", ?", "SELECT '?' , $1 -- why?\n, \"q?\", $2"},
		{"VALUES (?, ?), (?, ?)", "VALUES ($1, $2), ($3, $4)"},
	}
	for _, tt := range tests {
		if got := store.Rebind(tt.in); got != tt.want {
			t.Errorf("Rebind(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDriversMigrationsAppliedOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		ms := []store.Migration{msT, msU}
		for i := range 3 {
			s := loc.Open(t, store.WithMigrations(ms))
			if n := count(t, s.ReadDB(), "t"); n != 1 {
				t.Fatalf("t has %d rows: migration 1 ran more than once", n)
			}
			if v, err := s.SchemaVersion(context.Background()); err != nil || v != 2 {
				t.Fatalf("SchemaVersion = %d, %v; want 2", v, err)
			}
			if want := map[bool]int{true: 2, false: 0}[i == 0]; s.Applied() != want {
				t.Fatalf("open %d applied %d, want %d", i, s.Applied(), want)
			}
			s.Close()
		}
		ms3 := append(append([]store.Migration{}, ms...), store.Migration{Version: 3, Name: "w", SQL: "INSERT INTO t (id, v) VALUES (3, 'three')"})
		s := loc.Open(t, store.WithMigrations(ms3))
		if n := count(t, s.ReadDB(), "t"); n != 2 || s.Applied() != 1 {
			t.Fatalf("t rows = %d, applied %d; want 2, 1", n, s.Applied())
		}
	})
}

func TestDriversMigrationHistoryMismatchRefused(t *testing.T) {
	t.Parallel()
	base := []store.Migration{msT, msU}
	for name, later := range map[string][]store.Migration{
		"edited":       {msT, {Version: 2, Name: "u", SQL: "CREATE TABLE u (id INTEGER PRIMARY KEY, x TEXT)"}},
		"older binary": base[:1],
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
				loc.Open(t, store.WithMigrations(base)).Close()
				s, err := store.Open(context.Background(), loc.Path, loc.Options(store.WithMigrations(later))...)
				if err == nil {
					s.Close()
					t.Fatal("Open succeeded on a mismatched history")
				}
				if !errors.Is(err, store.ErrMigrations) {
					t.Fatalf("error %v is not ErrMigrations", err)
				}
			})
		})
	}
}

func TestDriversFailedMigrationRollsBack(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		ms := []store.Migration{msT, {Version: 2, Name: "bad", SQL: "CREATE TABLE half (id INTEGER PRIMARY KEY); INSERT INTO no_such_table VALUES (1);"}}
		if s, err := store.Open(context.Background(), loc.Path, loc.Options(store.WithMigrations(ms))...); err == nil {
			s.Close()
			t.Fatal("Open succeeded with a failing migration")
		}
		s := loc.Open(t, store.WithMigrations(ms[:1]))
		if _, err := s.ReadDB().ExecContext(context.Background(), "SELECT 1 FROM half"); err == nil {
			t.Fatal("table from the failed migration exists: it was not rolled back")
		}
	})
}

func TestDriversReadDBRefusesWrites(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		s := loc.Open(t, store.WithMigrations([]store.Migration{msT}))
		if _, err := s.ReadDB().ExecContext(context.Background(), "INSERT INTO t (id, v) VALUES (2, 'x')"); err == nil {
			t.Fatal("write through ReadDB succeeded")
		}
	})
}

func TestDriversTx(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		ctx := context.Background()
		s := loc.Open(t, store.WithMigrations([]store.Migration{{Version: 1, Name: "t", SQL: "CREATE TABLE t (id INTEGER PRIMARY KEY)"}}))
		id := 0
		insert := func(tx *sql.Tx) error {
			id++
			_, err := tx.ExecContext(ctx, s.SQL("INSERT INTO t (id) VALUES (?)"), id)
			return err
		}
		if err := s.Tx(ctx, insert); err != nil || count(t, s.ReadDB(), "t") != 1 {
			t.Fatalf("Tx: %v; committed row not visible to readers", err)
		}
		errBoom := errors.New("boom")
		if err := s.Tx(ctx, func(tx *sql.Tx) error { _ = insert(tx); return errBoom }); !errors.Is(err, errBoom) {
			t.Fatalf("Tx error = %v, want fn's error", err)
		}
		if count(t, s.ReadDB(), "t") != 1 {
			t.Fatal("row of a failed Tx was committed")
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("panic in fn was swallowed")
				}
			}()
			_ = s.Tx(ctx, func(tx *sql.Tx) error { _ = insert(tx); panic("fn panicked") })
		}()
		if err := s.Tx(ctx, insert); err != nil || count(t, s.ReadDB(), "t") != 2 {
			t.Fatalf("Tx after panic: %v", err)
		}
		if err := s.ReadTx(ctx, func(tx *sql.Tx) error { return insert(tx) }); err == nil {
			t.Fatal("write in ReadTx succeeded")
		}
	})
}

// Many goroutines on two Stores (two processes) run read-modify-write
// transactions: none fails and no update is lost.
func TestDriversConcurrentWriters(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		ctx := context.Background()
		ms := []store.Migration{{Version: 1, Name: "counter", SQL: "CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO counter VALUES (1, 0);"}}
		stores := [2]*store.Store{loc.Open(t, store.WithMigrations(ms)), loc.Open(t, store.WithMigrations(ms))}
		const goroutines, each = 8, 20
		var wg sync.WaitGroup
		errs := make(chan error, goroutines*each)
		for g := range goroutines {
			s := stores[g%2]
			wg.Go(func() {
				for range each {
					err := s.Tx(ctx, func(tx *sql.Tx) error {
						var n int
						if err := tx.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
							return err
						}
						_, err := tx.ExecContext(ctx, s.SQL("UPDATE counter SET n = ? WHERE id = 1"), n+1)
						return err
					})
					if err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("Tx: %v", err)
		}
		var n int
		if err := stores[0].ReadDB().QueryRowContext(ctx, "SELECT n FROM counter").Scan(&n); err != nil || n != goroutines*each {
			t.Fatalf("counter = %d, %v; want %d", n, err, goroutines*each)
		}
	})
}

// Nodes starting at once on one store apply each migration once.
func TestDriversConcurrentOpenMigratesOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		ms := []store.Migration{msT, msU}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		applied := make([]int, 4)
		for i := range errs {
			wg.Go(func() {
				s, err := store.Open(context.Background(), loc.Path, loc.Options(store.WithMigrations(ms))...)
				if err == nil {
					applied[i] = s.Applied()
					s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		total := 0
		for i, err := range errs {
			if err != nil {
				t.Errorf("Open %d: %v", i, err)
			}
			total += applied[i]
		}
		s := loc.Open(t, store.WithMigrations(ms))
		if n := count(t, s.ReadDB(), "t"); n != 1 || total != 2 {
			t.Fatalf("t rows = %d, migrations applied %d in all; want 1, 2", n, total)
		}
	})
}

func TestDriversLogbookIsAppendOnly(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		ctx := context.Background()
		s := loc.Open(t)
		if _, err := s.DB().ExecContext(ctx, s.SQL("INSERT INTO logbook_entries (seq, time_ns, kind, subjects, payload, prev_hash, hash) VALUES (1, 0, 'k', '{}', '{}', ?, ?)"), []byte{0}, []byte{1}); err != nil {
			t.Fatal(err)
		}
		for _, stmt := range []string{
			"UPDATE logbook_entries SET kind = 'x' WHERE seq = 1",
			"DELETE FROM logbook_entries WHERE seq = 1",
		} {
			if _, err := s.DB().ExecContext(ctx, stmt); err == nil {
				t.Errorf("%s: succeeded, want the append-only guard to abort it", stmt)
			}
		}
	})
}

func TestPostgresRefusesNoFsync(t *testing.T) {
	t.Parallel()
	loc := storetest.New(t, store.Postgres, &pg) // the throwaway server runs with fsync=off
	s, err := store.Open(context.Background(), loc.Path)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded on a server with fsync=off")
	}
	if !errors.Is(err, store.ErrNotDurable) {
		t.Fatalf("error %v is not ErrNotDurable", err)
	}
}

func TestPostgresPathHidesPassword(t *testing.T) {
	t.Parallel()
	loc := storetest.New(t, store.Postgres, &pg)
	s := loc.Open(t)
	if s.Driver() != store.Postgres {
		t.Fatalf("Driver = %q", s.Driver())
	}
	// The throwaway server's URL has no password; one given is never echoed.
	_, err := store.Open(context.Background(), "postgres://u:s3cret@127.0.0.1:1/x?connect_timeout=1", store.WithUnsafeNoFsync())
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open on a closed port: %v", err)
	}
}
