package pgtmptest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
)

func query(t *testing.T, dsn, sql string, args ...any) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(context.Background())
	var v string
	if err := conn.QueryRow(t.Context(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func exec(t *testing.T, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestStartAndNewDatabase(t *testing.T) {
	t.Parallel()
	srv := Start(t)
	if v := query(t, srv.DSN("postgres"), "SELECT version()"); !strings.Contains(v, "PostgreSQL") {
		t.Fatalf("version() = %q", v)
	}
	if got := query(t, srv.DSN("postgres"), "SHOW fsync"); got != "off" {
		t.Errorf("fsync = %q, want off (Fast)", got)
	}

	var names []string
	for _, sub := range []string{"first", "second"} {
		t.Run(sub, func(t *testing.T) {
			dsn := NewDatabase(t, srv)
			name := query(t, dsn, "SELECT current_database()")
			for _, seen := range names {
				if seen == name {
					t.Fatalf("NewDatabase reused the name %q", name)
				}
			}
			names = append(names, name)
			// The database is writable and private to this test.
			exec(t, dsn, "CREATE TABLE mine AS SELECT 'ok'::text AS v")
			if got := query(t, dsn, "SELECT v FROM mine"); got != "ok" {
				t.Errorf("read back %q from a new table, want ok", got)
			}
		})
	}
	if len(names) != 2 {
		t.Fatalf("got %d databases, want 2", len(names))
	}
	for _, name := range names {
		if n := query(t, srv.DSN("postgres"), "SELECT count(*)::text FROM pg_database WHERE datname = $1", name); n != "0" {
			t.Errorf("database %s still exists after its test ended", name)
		}
	}
}

func TestShared(t *testing.T) {
	t.Parallel()
	var shared Shared
	first := shared.Server(t)
	if second := shared.Server(t); second != first {
		t.Fatal("Shared.Server started a second server")
	}
	dsn := NewDatabase(t, first)
	if got := query(t, dsn, "SELECT 'up'"); got != "up" {
		t.Fatalf("shared server answered %q", got)
	}
	if err := shared.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := shared.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := first.CreateDatabase(t.Context(), "late"); !errors.Is(err, pgtmp.ErrStopped) {
		t.Errorf("CreateDatabase after Close: %v, want ErrStopped", err)
	}
	// NewDatabase's cleanup runs after Close and must not fail the test.
}

func TestSharedCloseUnused(t *testing.T) {
	t.Parallel()
	var shared Shared
	if err := shared.Close(); err != nil {
		t.Fatalf("Close of an unused Shared: %v", err)
	}
}

func TestDatabaseName(t *testing.T) {
	t.Parallel()
	tests := []struct{ test, prefix string }{
		{"TestOrders", "t_testorders_"},
		{"TestOrders/with spaces & Symbols", "t_testorders_with_spaces_symbols_"},
		{strings.Repeat("Long", 40), "t_" + strings.Repeat("long", 40)[160-(63-3-16):] + "_"},
	}
	for _, tt := range tests {
		a, b := databaseName(tt.test), databaseName(tt.test)
		if a == b {
			t.Errorf("databaseName(%q) twice gave %q both times", tt.test, a)
		}
		if len(a) > 63 {
			t.Errorf("databaseName(%q) = %q, %d bytes > 63", tt.test, a, len(a))
		}
		if !strings.HasPrefix(a, tt.prefix) {
			t.Errorf("databaseName(%q) = %q, want prefix %q", tt.test, a, tt.prefix)
		}
	}
}
