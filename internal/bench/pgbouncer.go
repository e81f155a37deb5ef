package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// StartPgBouncer starts the PgBouncer binary at path in front of the
// target dsn names, in transaction pooling with a pool of clients server
// connections, on a free loopback port, and returns its connection URL and
// a function that stops it. It logs in to the target as dsn does (its
// user and password, which PgBouncer is given in its database line), and
// lets any client in (auth_type any): it listens on loopback only, for one
// run. As root it runs as nobody, since PgBouncer refuses root.
func StartPgBouncer(ctx context.Context, path, dsn string, clients int) (string, func(), error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("bench: pgbouncer: the target's DSN: %w", err)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		return "", nil, errors.New("bench: pgbouncer: the target's DSN names a Unix socket; give a TCP host")
	}
	dir, err := os.MkdirTemp("", "hm-pgbouncer-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// PgBouncer's connection string: key=value, a value with a space or
	// a quote in quotes; an empty one left out.
	param := func(k, v string) string {
		switch {
		case v == "":
			return ""
		case strings.ContainsAny(v, " '\\"):
			return " " + k + "='" + strings.ReplaceAll(strings.ReplaceAll(v, "\\", "\\\\"), "'", "\\'") + "'"
		}
		return " " + k + "=" + v
	}
	ini := fmt.Sprintf(`[databases]
%s =%s%s%s%s%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = %d
max_client_conn = %d
logfile = %s
pidfile = %s
`, cfg.Database, param("host", cfg.Host), param("port", strconv.Itoa(int(cfg.Port))), param("dbname", cfg.Database),
		param("user", cfg.User), param("password", cfg.Password), port, clients, clients+10,
		filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	iniPath := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(iniPath, []byte(ini), 0o644); err != nil {
		cleanup()
		return "", nil, err
	}
	args := []string{iniPath}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("nobody"); err != nil {
			cleanup()
			return "", nil, errors.New("bench: pgbouncer refuses to run as root, and there is no user nobody to run it as")
		}
		_ = os.Chmod(dir, 0o777)
		args = append([]string{"-u", "nobody"}, args...)
	}
	cmd := exec.Command(path, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("bench: pgbouncer: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		cleanup()
	}
	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: "127.0.0.1:" + strconv.Itoa(port), Path: "/" + cfg.Database,
		RawQuery: "sslmode=disable"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := pgconn.Connect(ctx, u.String())
		if err == nil {
			_ = c.Close(ctx)
			return u.String(), stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			return "", nil, fmt.Errorf("bench: pgbouncer did not answer in 10 s: %w\n%s%s", err, out.String(), log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
