package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

func openTemp(t *testing.T, opts ...Option) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "control.db"), opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPackageMigrationsValid(t *testing.T) {
	t.Parallel()
	if err := CheckMigrations(Migrations); err != nil {
		t.Fatalf("Migrations: %v", err)
	}
}

func TestCheckMigrations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ms   []Migration
		ok   bool
	}{
		{"empty", nil, true},
		{"consecutive", []Migration{{1, "a", "SELECT 1"}, {2, "b", "SELECT 2"}}, true},
		{"starts at 2", []Migration{{2, "a", "SELECT 1"}}, false},
		{"duplicate version", []Migration{{1, "a", "SELECT 1"}, {1, "b", "SELECT 2"}}, false},
		{"gap", []Migration{{1, "a", "SELECT 1"}, {3, "b", "SELECT 2"}}, false},
		{"no name", []Migration{{1, " ", "SELECT 1"}}, false},
		{"no sql", []Migration{{1, "a", "\n"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckMigrations(tt.ms)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckMigrations = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrMigrations) {
				t.Fatalf("error %v is not ErrMigrations", err)
			}
		})
	}
}

func TestOpenDurabilitySettings(t *testing.T) {
	t.Parallel()
	s := openTemp(t, WithReadConns(3))
	if s.ReadConns() != 3 {
		t.Fatalf("ReadConns = %d, want 3", s.ReadConns())
	}
	ctx := context.Background()
	for name, db := range map[string]*sql.DB{"writer": s.DB(), "reader": s.ReadDB()} {
		var mode string
		var syncMode, fk, busy int
		if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || syncMode != 2 || fk != 1 || busy != int(DefaultBusyTimeout.Milliseconds()) {
			t.Errorf("%s: journal_mode=%s synchronous=%d foreign_keys=%d busy_timeout=%d, want wal 2 1 %d",
				name, mode, syncMode, fk, busy, DefaultBusyTimeout.Milliseconds())
		}
	}
}

func TestOpenRejectsBadArguments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
		opts []Option
	}{
		{"empty path", "", nil},
		{"query in path", filepath.Join(dir, "x.db?mode=ro"), nil},
		{"negative busy timeout", filepath.Join(dir, "a.db"), []Option{WithBusyTimeout(-1)}},
		{"no readers", filepath.Join(dir, "b.db"), []Option{WithReadConns(0)}},
		{"bad migrations", filepath.Join(dir, "c.db"), []Option{WithMigrations([]Migration{{Version: 2, Name: "x", SQL: "SELECT 1"}})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(context.Background(), tt.path, tt.opts...)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded, want error")
			}
		})
	}
}

func TestMigrationsAppliedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	ms := []Migration{
		{1, "t", "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL); INSERT INTO t (v) VALUES ('one');"},
		{2, "u", "CREATE TABLE u (id INTEGER PRIMARY KEY)"},
	}
	for range 3 {
		s, err := Open(ctx, path, WithMigrations(ms))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		var rows int
		if err := s.ReadDB().QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 1 {
			t.Fatalf("t has %d rows: migration 1 ran more than once", rows)
		}
		v, err := s.SchemaVersion(ctx)
		if err != nil || v != 2 {
			t.Fatalf("SchemaVersion = %d, %v; want 2", v, err)
		}
		s.Close()
	}

	// A binary that knows a longer list applies only the new migration.
	ms3 := append(append([]Migration{}, ms...), Migration{3, "w", "INSERT INTO t (v) VALUES ('three')"})
	s, err := Open(ctx, path, WithMigrations(ms3))
	if err != nil {
		t.Fatalf("Open with 3: %v", err)
	}
	var rows int
	if err := s.ReadDB().QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("t rows = %d, %v; want 2", rows, err)
	}
	s.Close()
}

func TestMigrationHistoryMismatchRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := []Migration{{1, "t", "CREATE TABLE t (id INTEGER PRIMARY KEY)"}, {2, "u", "CREATE TABLE u (id INTEGER PRIMARY KEY)"}}
	tests := []struct {
		name  string
		later []Migration
	}{
		{"edited", []Migration{base[0], {2, "u", "CREATE TABLE u (id INTEGER PRIMARY KEY, x TEXT)"}}},
		{"older binary", base[:1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "h.db")
			s, err := Open(ctx, path, WithMigrations(base))
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			s, err = Open(ctx, path, WithMigrations(tt.later))
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded on a mismatched history")
			}
			if !errors.Is(err, ErrMigrations) {
				t.Fatalf("error %v is not ErrMigrations", err)
			}
		})
	}
}

func TestFailedMigrationRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "f.db")
	ms := []Migration{
		{1, "ok", "CREATE TABLE ok (id INTEGER PRIMARY KEY)"},
		{2, "bad", "CREATE TABLE half (id INTEGER PRIMARY KEY); INSERT INTO no_such_table VALUES (1);"},
	}
	if s, err := Open(ctx, path, WithMigrations(ms)); err == nil {
		s.Close()
		t.Fatal("Open succeeded with a failing migration")
	}
	s, err := Open(ctx, path, WithMigrations(ms[:1]))
	if err != nil {
		t.Fatalf("reopen with the good prefix: %v", err)
	}
	defer s.Close()
	var n int
	if err := s.ReadDB().QueryRowContext(ctx, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'half'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("table from the failed migration exists: it was not rolled back")
	}
}

func TestReadDBRefusesWrites(t *testing.T) {
	t.Parallel()
	s := openTemp(t, WithMigrations([]Migration{{1, "t", "CREATE TABLE t (id INTEGER PRIMARY KEY)"}}))
	if _, err := s.ReadDB().ExecContext(context.Background(), "INSERT INTO t (id) VALUES (1)"); err == nil {
		t.Fatal("write through ReadDB succeeded")
	}
}

func TestTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, WithMigrations([]Migration{{1, "t", "CREATE TABLE t (id INTEGER PRIMARY KEY)"}}))
	count := func() int {
		var n int
		if err := s.ReadDB().QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	insert := func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO t DEFAULT VALUES")
		return err
	}

	if err := s.Tx(ctx, insert); err != nil {
		t.Fatalf("Tx: %v", err)
	}
	if count() != 1 {
		t.Fatal("committed row not visible to readers")
	}

	errBoom := errors.New("boom")
	err := s.Tx(ctx, func(tx *sql.Tx) error {
		if err := insert(tx); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Tx error = %v, want fn's error", err)
	}
	if count() != 1 {
		t.Fatal("row of a failed Tx was committed")
	}

	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic in fn was swallowed")
			}
		}()
		_ = s.Tx(ctx, func(tx *sql.Tx) error {
			_ = insert(tx)
			panic("fn panicked")
		})
	}()
	if count() != 1 {
		t.Fatal("row of a panicking Tx was committed")
	}
	// The single write connection must be usable after the panic.
	if err := s.Tx(ctx, insert); err != nil || count() != 2 {
		t.Fatalf("Tx after panic: %v, count %d", err, count())
	}

	err = s.ReadTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO t DEFAULT VALUES")
		return err
	})
	if err == nil {
		t.Fatal("write in ReadTx succeeded")
	}
}

// Many goroutines, and a second Store on the same file (another process),
// write at once: no SQLITE_BUSY reaches the caller and no write is lost.
func TestConcurrentWritersNoBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	ms := []Migration{{1, "counter", "CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO counter VALUES (1, 0);"}}
	var stores [2]*Store
	for i := range stores {
		s, err := Open(ctx, path, WithMigrations(ms))
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		defer s.Close()
		stores[i] = s
	}
	const goroutines, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		s := stores[g%2]
		wg.Go(func() {
			for range each {
				// Read-modify-write: loses updates unless transactions are serialized.
				err := s.Tx(ctx, func(tx *sql.Tx) error {
					var n int
					if err := tx.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, "UPDATE counter SET n = ? WHERE id = 1", n+1)
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
	if err := stores[0].ReadDB().QueryRowContext(ctx, "SELECT n FROM counter").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != goroutines*each {
		t.Fatalf("counter = %d, want %d", n, goroutines*each)
	}
}

func TestConcurrentOpenMigratesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "o.db")
	ms := []Migration{{1, "t", "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t (v) VALUES ('x');"}}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(ctx, path, WithMigrations(ms))
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
	s, err := Open(ctx, path, WithMigrations(ms))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.ReadDB().QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("t rows = %d, %v; want 1", n, err)
	}
}

func TestCommittedSurvivesReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	ms := []Migration{{1, "t", "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"}}
	s, err := Open(ctx, path, WithMigrations(ms))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := s.Tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO t (v) VALUES (?)", fmt.Sprint(i))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s, err = Open(ctx, path, WithMigrations(ms))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.ReadDB().QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 10 {
		t.Fatalf("rows after reopen = %d, %v; want 10", n, err)
	}
}

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, Memory)
	if err != nil {
		t.Fatalf("Open(Memory): %v", err)
	}
	defer s.Close()
	if err := s.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO logbook_entries (seq, time_ns, kind, subjects, payload, prev_hash, hash) VALUES (1, 0, 'k', '{}', '{}', x'00', x'01')")
		return err
	}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var n int
	if err := s.ReadDB().QueryRowContext(ctx, "SELECT COUNT(*) FROM logbook_entries").Scan(&n); err != nil || n != 1 {
		t.Fatalf("count = %d, %v; want 1 (readers must share the in-memory database)", n, err)
	}
	if s.ReadConns() != 1 {
		t.Fatalf("ReadConns = %d, want 1 for Memory", s.ReadConns())
	}
}

func TestSchemaIsAppendOnlyForLogbook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t)
	if _, err := s.DB().ExecContext(ctx, "INSERT INTO logbook_entries (seq, time_ns, kind, subjects, payload, prev_hash, hash) VALUES (1, 0, 'k', '{}', '{}', x'00', x'01')"); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"UPDATE logbook_entries SET kind = 'x' WHERE seq = 1",
		"DELETE FROM logbook_entries WHERE seq = 1",
	} {
		if _, err := s.DB().ExecContext(ctx, stmt); err == nil {
			t.Errorf("%s: succeeded, want the append-only trigger to abort it", stmt)
		}
	}
}
