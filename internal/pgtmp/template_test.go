package pgtmp

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestTemplate: servers copied from a template hold what prepare made,
// are owned by the server's user with the cluster's modes, and share
// nothing: what one server does reaches neither another nor a later copy.
func TestTemplate(t *testing.T) {
	t.Parallel()
	cfg := Config{Fast: true, SocketOnly: true, StartTimeout: busyStartTimeout}
	tmpl, err := NewTemplate(t.Context(), cfg, func(ctx context.Context, s *Server) error {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, "CREATE TABLE made_in_template (id int)")
		return err
	})
	if err != nil {
		needPostgres(t, err)
	}
	t.Cleanup(func() {
		if err := tmpl.Remove(); err != nil {
			t.Error(err)
		}
	})
	cfg.Template = tmpl
	a := startServer(t, cfg)
	b := startServer(t, cfg)
	count := func(s *Server, name string) string {
		return queryString(t, s.DSN("postgres"), "SELECT count(*)::text FROM pg_class WHERE relname = '"+name+"'")
	}
	if got := count(a, "made_in_template"); got != "1" {
		t.Fatalf("a copy lacks the template's table: %s", got)
	}
	conn, err := pgx.Connect(t.Context(), a.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "CREATE TABLE made_in_a (id int)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	c := startServer(t, cfg)
	for name, s := range map[string]*Server{"b": b, "c": c} {
		if got := count(s, "made_in_a"); got != "0" {
			t.Errorf("server %s sees a's table: %s", name, got)
		}
		if got := count(s, "made_in_template"); got != "1" {
			t.Errorf("server %s lacks the template's table: %s", name, got)
		}
	}

	// Every file is owned by the server's user; the cluster's modes stay.
	acct, err := serverAccount("")
	if err != nil {
		t.Fatal(err)
	}
	uid := uint32(os.Geteuid())
	if acct != nil {
		uid = acct.uid
	}
	files := 0
	err = filepath.WalkDir(a.DataDir(), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid {
			t.Errorf("%s: owner %d, want %d", p, st.Uid, uid)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %s, open to others", p, fi.Mode())
		}
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Errorf("the copy holds %d files", files)
	}

	// A removed template starts nothing.
	if err := tmpl.Remove(); err != nil {
		t.Fatal(err)
	}
	if s, err := Start(t.Context(), cfg); err == nil {
		s.Stop()
		t.Fatal("started from a removed template")
	}
	// Nor does one made with other binaries.
	other := &Template{binDir: "/elsewhere"}
	if s, err := Start(t.Context(), Config{Template: other}); err == nil {
		s.Stop()
		t.Fatal("started from another installation's template")
	}
}
