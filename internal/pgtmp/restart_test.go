package pgtmp

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestCrashRestart: an immediate shutdown ends a transaction in flight and
// keeps what committed; Restart brings the server back on the same port.
func TestCrashRestart(t *testing.T) {
	t.Parallel()
	s := startServer(t, Config{Fast: true, Settings: map[string]string{"synchronous_commit": "on"}})
	ctx := t.Context()
	dsn := s.DSN("postgres")
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO kept VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx); !errors.Is(err, ErrWrongState) {
		t.Fatalf("Restart of a running server: %v, want ErrWrongState", err)
	}
	if err := s.Crash(); err != nil {
		t.Fatal(err)
	}
	if portAnswers(s.Port()) {
		t.Fatal("the port still answers after Crash")
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("a transaction in flight committed across the crash")
	}
	if err := s.Crash(); !errors.Is(err, ErrWrongState) {
		t.Fatalf("Crash of a crashed server: %v, want ErrWrongState", err)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, dsn, "SELECT string_agg(x::text, ',') FROM kept"); got != "1" {
		t.Fatalf("after the restart kept holds %q, want 1", got)
	}
}
