package pgtmp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// needPostgres skips a test when PostgreSQL is not installed, except under
// CI, where a missing dependency fails.
func needPostgres(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	t.Fatal(err)
}

// busyStartTimeout allows for a machine busy with other test binaries,
// where initdb alone can take tens of seconds.
const busyStartTimeout = 3 * time.Minute

func startServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = busyStartTimeout
	}
	s, err := Start(t.Context(), cfg)
	if err != nil {
		needPostgres(t, err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

func queryString(t testing.TB, dsn, sql string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(context.Background())
	var v string
	if err := conn.QueryRow(t.Context(), sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// portAnswers reports whether something accepts TCP connections on port.
func portAnswers(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func TestServer(t *testing.T) {
	t.Parallel()
	s := startServer(t, Config{Fast: true, Settings: map[string]string{"work_mem": "7MB"}})
	root := filepath.Dir(s.DataDir())

	t.Run("version", func(t *testing.T) {
		if v := queryString(t, s.DSN("postgres"), "SELECT version()"); !strings.Contains(v, "PostgreSQL") {
			t.Errorf("version() = %q, want it to mention PostgreSQL", v)
		}
	})

	t.Run("settings", func(t *testing.T) {
		tests := []struct{ name, want string }{
			{"fsync", "off"},
			{"synchronous_commit", "off"},
			{"full_page_writes", "off"},
			{"work_mem", "7MB"},
			{"listen_addresses", "127.0.0.1"},
			{"port", strconv.Itoa(s.Port())},
			{"server_encoding", "UTF8"},
			{"lc_collate", "C"},
			{"data_directory", s.DataDir()},
		}
		for _, tt := range tests {
			got := queryString(t, s.DSN("postgres"), "SELECT current_setting('"+tt.name+"')")
			if got != tt.want {
				t.Errorf("%s = %q, want %q", tt.name, got, tt.want)
			}
		}
	})

	t.Run("runs unprivileged", func(t *testing.T) {
		fi, err := os.Stat(s.DataDir())
		if err != nil {
			t.Fatal(err)
		}
		owner := fi.Sys().(*syscall.Stat_t).Uid
		if want := uint32(os.Geteuid()); want != 0 && owner != want {
			t.Errorf("data dir owner uid %d, want %d", owner, want)
		}
		if owner == 0 {
			t.Errorf("data dir owned by root")
		}
		if runtime.GOOS == "linux" {
			status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.proc.cmd.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.Lines(string(status)) {
				if f := strings.Fields(line); len(f) >= 3 && f[0] == "Uid:" && f[2] == "0" {
					t.Errorf("postmaster runs with effective uid 0: %s", line)
				}
			}
		}
	})

	t.Run("unix socket", func(t *testing.T) {
		dsn := fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable",
			filepath.Join(root, "sock"), s.Port(), Superuser)
		if got := queryString(t, dsn, "SELECT current_user"); got != Superuser {
			t.Errorf("current_user = %q, want %q", got, Superuser)
		}
	})

	t.Run("create databases", func(t *testing.T) {
		for _, name := range []string{"alpha", "Beta two"} {
			dsn, err := s.CreateDatabase(t.Context(), name)
			if err != nil {
				t.Fatalf("CreateDatabase(%q): %v", name, err)
			}
			if got := queryString(t, dsn, "SELECT current_database()"); got != name {
				t.Errorf("DSN %s connects to %q, want %q", dsn, got, name)
			}
		}
		if _, err := s.CreateDatabase(t.Context(), "alpha"); err == nil {
			t.Error("CreateDatabase of an existing name succeeded")
		}
		if _, err := s.CreateDatabase(t.Context(), strings.Repeat("x", 64)); err == nil {
			t.Error("CreateDatabase of a 64-byte name succeeded; the server would truncate it")
		}
		if err := s.DropDatabase(t.Context(), "alpha"); err != nil {
			t.Fatalf("DropDatabase: %v", err)
		}
		if got := queryString(t, s.DSN("postgres"), "SELECT count(*)::text FROM pg_database WHERE datname = 'alpha'"); got != "0" {
			t.Errorf("alpha still listed %s times after DropDatabase", got)
		}
	})

	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s after Stop: stat err %v, want not exist", root, err)
	}
	if portAnswers(s.Port()) {
		t.Errorf("port %d still answers after Stop", s.Port())
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := s.CreateDatabase(t.Context(), "late"); !errors.Is(err, ErrStopped) {
		t.Errorf("CreateDatabase after Stop: %v, want ErrStopped", err)
	}
}

func TestStartTwoAtOnce(t *testing.T) {
	t.Parallel()
	fixed, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	cfgs := []Config{
		{Fast: true, StartTimeout: busyStartTimeout},
		{Fast: true, StartTimeout: busyStartTimeout, Port: fixed},
	}
	servers := make([]*Server, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Go(func() { servers[i], errs[i] = Start(t.Context(), cfg) })
	}
	wg.Wait()
	for i, s := range servers {
		if s != nil {
			t.Cleanup(func() { s.Stop() })
		}
		if errs[i] != nil {
			needPostgres(t, errs[i])
		}
	}
	if got := servers[1].Port(); got != fixed {
		t.Errorf("server with Config.Port %d listens on %d", fixed, got)
	}
	if servers[0].Port() == servers[1].Port() || servers[0].DataDir() == servers[1].DataDir() {
		t.Fatalf("servers share port or data dir: %d %s, %d %s",
			servers[0].Port(), servers[0].DataDir(), servers[1].Port(), servers[1].DataDir())
	}
	for _, s := range servers {
		if got := queryString(t, s.DSN("postgres"), "SELECT current_setting('data_directory')"); got != s.DataDir() {
			t.Errorf("server on port %d reports data_directory %q, want %q", s.Port(), got, s.DataDir())
		}
	}
}

func TestStartFailure(t *testing.T) {
	t.Parallel()
	if _, err := FindBinDir(); err != nil {
		needPostgres(t, err)
	}
	dir, err := os.MkdirTemp("", "pgtmp-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	// The server rejects the value and exits; Start retries on other ports,
	// then reports the server's own words and leaves nothing behind.
	_, err = Start(t.Context(), Config{Dir: dir, StartTimeout: busyStartTimeout, Settings: map[string]string{"shared_buffers": "plenty"}})
	if err == nil {
		t.Fatal("Start with an invalid setting succeeded")
	}
	if !strings.Contains(err.Error(), `"shared_buffers"`) {
		t.Errorf("error does not quote the server's complaint: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed Start left %d entries in %s", len(entries), dir)
	}
}

func TestStartNotInstalled(t *testing.T) {
	t.Parallel()
	onlyInitdb := t.TempDir()
	writeExecutable(t, filepath.Join(onlyInitdb, "initdb"))
	tests := []struct {
		name   string
		binDir string
		want   string
	}{
		{"empty dir", t.TempDir(), "lacks initdb and postgres"},
		{"no postgres", onlyInitdb, "lacks postgres"},
		{"missing dir", filepath.Join(t.TempDir(), "nope"), "lacks initdb and postgres"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			_, err := Start(t.Context(), Config{BinDir: tt.binDir, Dir: dir})
			if !errors.Is(err, ErrNotInstalled) {
				t.Fatalf("Start: %v, want ErrNotInstalled", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("failed Start left %d entries in %s", len(entries), dir)
			}
		})
	}
}

func TestStartUnsearchableDir(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root hands the server to another user")
	}
	binDir, err := FindBinDir()
	if err != nil {
		needPostgres(t, err)
	}
	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = Start(t.Context(), Config{BinDir: binDir, Dir: private})
	if err == nil || !strings.Contains(err.Error(), "not searchable") {
		t.Fatalf("Start under a 0700 directory: %v, want a 'not searchable' error", err)
	}
	if entries, _ := os.ReadDir(private); len(entries) != 0 {
		t.Errorf("failed Start left %d entries in %s", len(entries), private)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; empty for valid
	}{
		{"zero", Config{}, ""},
		{"settings", Config{Settings: map[string]string{"work_mem": "8MB", "auto_explain.log_min_duration": "0"}}, ""},
		{"negative port", Config{Port: -1}, "Port"},
		{"huge port", Config{Port: 70000}, "Port"},
		{"negative start timeout", Config{StartTimeout: -time.Second}, "StartTimeout"},
		{"negative stop timeout", Config{StopTimeout: -time.Second}, "StopTimeout"},
		{"reserved port", Config{Settings: map[string]string{"port": "5432"}}, "chosen by pgtmp"},
		{"reserved listen", Config{Settings: map[string]string{"Listen_Addresses": "*"}}, "chosen by pgtmp"},
		{"bad name", Config{Settings: map[string]string{"a=b": "c"}}, "invalid name"},
		{"newline value", Config{Settings: map[string]string{"work_mem": "1MB\nfsync=off"}}, "newline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.WithDefaults().validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("validate: %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("validate: %v, want error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.WithDefaults()
	if c.Dir != os.TempDir() || c.Logger == nil || c.StartTimeout != 30*time.Second || c.StopTimeout != 30*time.Second || c.Fast {
		t.Errorf("WithDefaults() = %+v", c)
	}
	set := Config{Dir: "/x", StartTimeout: time.Second, Fast: true}.WithDefaults()
	if set.Dir != "/x" || set.StartTimeout != time.Second || !set.Fast {
		t.Errorf("WithDefaults overwrote set fields: %+v", set)
	}
}

func TestDSN(t *testing.T) {
	t.Parallel()
	s := &Server{port: 54321}
	tests := []struct{ db, want string }{
		{"postgres", "postgres://postgres@127.0.0.1:54321/postgres?sslmode=disable"},
		{"two words", "postgres://postgres@127.0.0.1:54321/two%20words?sslmode=disable"},
	}
	for _, tt := range tests {
		got := s.DSN(tt.db)
		if got != tt.want {
			t.Errorf("DSN(%q) = %q, want %q", tt.db, got, tt.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Fatalf("ParseConfig(%q): %v", got, err)
		}
		if cfg.Database != tt.db || cfg.User != Superuser || cfg.Port != 54321 {
			t.Errorf("DSN(%q) parses to db %q user %q port %d", tt.db, cfg.Database, cfg.User, cfg.Port)
		}
	}
}

// TestOrphanedServerStops kills a process that started a server, without
// letting it call Stop, and checks that the server shuts itself down.
func TestOrphanedServerStops(t *testing.T) {
	if os.Getenv("PGTMP_ORPHAN_HELPER") == "1" {
		orphanHelper()
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux-only")
	}
	t.Parallel()
	if _, err := FindBinDir(); err != nil {
		needPostgres(t, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanedServerStops$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PGTMP_ORPHAN_HELPER=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var port int
	var root string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "READY %d %s", &port, &root); err == nil {
			break
		}
		t.Logf("helper: %s", sc.Text())
	}
	if port == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper did not start a server; stderr:\n%s", stderr.String())
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if !portAnswers(port) {
		t.Fatalf("helper's server on port %d does not answer", port)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	// A bound on how long to wait for a failure, not a speed assertion.
	for range 300 {
		if !portAnswers(port) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("server on port %d still answers 30s after its owner was killed", port)
}

func orphanHelper() {
	s, err := Start(context.Background(), Config{Fast: true, StartTimeout: busyStartTimeout})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Printf("READY %d %s\n", s.Port(), filepath.Dir(s.DataDir()))
	time.Sleep(time.Minute) // the parent kills this process first
	s.Stop()
	os.Exit(1)
}

func BenchmarkStartStop(b *testing.B) {
	for b.Loop() {
		s, err := Start(b.Context(), Config{Fast: true, StartTimeout: busyStartTimeout})
		if err != nil {
			needPostgres(b, err)
		}
		if err := s.Stop(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCreateDatabase(b *testing.B) {
	s := startServer(b, Config{Fast: true})
	i := 0
	for b.Loop() {
		i++
		if _, err := s.CreateDatabase(b.Context(), fmt.Sprintf("bench_%d", i)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSocketOnly: a SocketOnly server serves its Unix socket alone, in a
// directory only its user may enter; its DSN names the socket.
func TestSocketOnly(t *testing.T) {
	t.Parallel()
	s := startServer(t, Config{Fast: true, SocketOnly: true})
	if got := queryString(t, s.DSN("postgres"), "SELECT current_setting('listen_addresses')"); got != "" {
		t.Fatalf("listen_addresses = %q", got)
	}
	if !strings.Contains(s.DSN("postgres"), "host=%2F") {
		t.Fatalf("DSN does not name the socket: %s", s.DSN("postgres"))
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port())), time.Second); err == nil {
		c.Close()
		t.Fatalf("the server accepts TCP on port %d", s.Port())
	}
	st, err := os.Stat(filepath.Join(filepath.Dir(s.DataDir()), "sock"))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory: %v %v", st.Mode(), err)
	}
}
