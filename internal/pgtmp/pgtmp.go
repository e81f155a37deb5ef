package pgtmp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Superuser is the role initdb creates; every DSN connects as it.
const Superuser = "postgres"

// ErrStopped is returned by calls on a Server after Stop.
var ErrStopped = errors.New("pgtmp: server stopped")

// Config configures Start. The zero value is ready to use.
type Config struct {
	// BinDir holds initdb and postgres. Defaults to FindBinDir().
	BinDir string

	// Dir is the parent of the temporary directory. Defaults to os.TempDir().
	Dir string

	// Port is the TCP port on 127.0.0.1. Defaults to 0: a free port, picked
	// anew (up to 3 tries) if another process takes it first.
	Port int

	// Logger receives initdb's and the server's output at debug level.
	// Defaults to a logger that discards.
	Logger *slog.Logger

	// StartTimeout bounds initdb plus server start-up. Defaults to 30s.
	StartTimeout time.Duration

	// StopTimeout bounds the fast shutdown in Stop before it escalates to
	// immediate shutdown and then SIGKILL. Defaults to 30s.
	StopTimeout time.Duration

	// Settings are extra server settings (postgresql.conf names), passed
	// as -c name=value. They override the Fast settings. pgtmp owns port,
	// listen_addresses, unix_socket_directories and the file locations;
	// setting those is an error.
	Settings map[string]string

	// Fast trades durability for speed, for tests: fsync, synchronous_commit
	// and full_page_writes off. Defaults to false.
	Fast bool

	// User is the OS user the server runs as when this process is root
	// (initdb and postgres refuse root). Ignored otherwise. Defaults to
	// "postgres" if that user exists, else "nobody".
	User string

	// SocketOnly serves the Unix socket alone, in a directory only the
	// server's user (and root) may enter: no TCP port, so no other local
	// user can reach a server that trusts every connection. DSN then
	// names the socket. Start fails when the socket path would be too
	// long. Defaults to false (TCP on 127.0.0.1 and the socket).
	SocketOnly bool

	// Template, when set, is copied in place of running initdb; it must
	// have been made (NewTemplate) with the same binaries and for the
	// same server user. Defaults to nil: initdb.
	Template *Template
}

// fastSettings are applied when Config.Fast is true.
var fastSettings = map[string]string{
	"fsync":              "off",
	"synchronous_commit": "off",
	"full_page_writes":   "off",
}

// reservedSettings are chosen by pgtmp itself.
var reservedSettings = []string{
	"port", "listen_addresses", "unix_socket_directories",
	"data_directory", "config_file", "hba_file", "ident_file",
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// WithDefaults returns a copy of c with unset fields at their defaults.
func (c Config) WithDefaults() Config {
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 30 * time.Second
	}
	return c
}

func (c Config) validate() error {
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("Port %d out of range 0..65535", c.Port)
	}
	if c.StartTimeout < 0 {
		return fmt.Errorf("StartTimeout %s is negative", c.StartTimeout)
	}
	if c.StopTimeout < 0 {
		return fmt.Errorf("StopTimeout %s is negative", c.StopTimeout)
	}
	for k, v := range c.Settings {
		if !settingName.MatchString(k) {
			return fmt.Errorf("Settings: invalid name %q", k)
		}
		if slices.Contains(reservedSettings, strings.ToLower(k)) {
			return fmt.Errorf("Settings: %s is chosen by pgtmp", k)
		}
		if strings.ContainsAny(v, "\x00\n\r") {
			return fmt.Errorf("Settings: value of %s contains a NUL or newline", k)
		}
	}
	return nil
}

// Server is a running throwaway PostgreSQL. Its methods are safe for
// concurrent use.
type Server struct {
	port    int
	root    string // temporary directory; removed by Stop
	dataDir string
	// sockDir is the Unix socket's directory when the server serves TCP
	// nowhere (Config.SocketOnly), "" otherwise.
	sockDir string
	logger  *slog.Logger

	stopTimeout time.Duration
	proc        *process
	restart     func() (*process, error) // starts the postmaster again (restart.go)

	mu      sync.Mutex
	stopped bool
	stopErr error
}

// Start creates and starts a server and returns once it accepts
// connections. ctx bounds start-up only; the server runs until Stop. On
// error nothing is left behind.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("pgtmp: start: %w", err)
	}
	s, err := start(ctx, cfg)
	if errors.Is(err, ErrNotInstalled) {
		return nil, err // already says pgtmp and what is missing
	}
	if err != nil {
		return nil, fmt.Errorf("pgtmp: start: %w", err)
	}
	return s, nil
}

func start(ctx context.Context, cfg Config) (_ *Server, err error) {
	binDir := cfg.BinDir
	if binDir == "" {
		if binDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	} else if err := checkBinDir(binDir); err != nil {
		return nil, err
	}
	acct, err := serverAccount(cfg.User)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	root, err := os.MkdirTemp(cfg.Dir, "pgtmp-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(root)
		}
	}()
	root, err = filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	// MkdirTemp makes 0700; the server's user must be able to enter it.
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, err
	}
	dataDir := filepath.Join(root, "data")
	sockDir := filepath.Join(root, "sock")
	for _, d := range []string{dataDir, sockDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	var cred *syscall.Credential
	if acct != nil {
		if err := checkSearchable(root, acct); err != nil {
			return nil, err
		}
		if err := chownAll(acct, dataDir, sockDir); err != nil {
			return nil, fmt.Errorf("chown to %s: %w", acct.name, err)
		}
		cred = acct.credential()
		cfg.Logger.Debug("pgtmp: running server as unprivileged user", "user", acct.name, "uid", acct.uid)
	}

	if cfg.Template != nil {
		if err := cfg.Template.copyTo(binDir, dataDir, acct); err != nil {
			return nil, err
		}
	} else if err := initdb(ctx, cfg.Logger, binDir, root, dataDir, cred); err != nil {
		return nil, err
	}

	settings := map[string]string{}
	if cfg.Fast {
		maps.Copy(settings, fastSettings)
	}
	maps.Copy(settings, cfg.Settings)
	// sun_path holds 107 bytes; past that, serve TCP only.
	if len(sockDir)+len("/.s.PGSQL.65535") > 107 {
		if cfg.SocketOnly {
			return nil, fmt.Errorf("the socket path %s/.s.PGSQL.NNNNN is too long for a Unix socket: set Dir to a shorter directory", sockDir)
		}
		cfg.Logger.Debug("pgtmp: socket path too long, Unix socket disabled", "dir", sockDir)
		sockDir = ""
	}
	listen := "127.0.0.1"
	if cfg.SocketOnly {
		listen = ""
	}

	const tries = 3
	for try := 1; ; try++ {
		port := cfg.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		s := &Server{port: port, root: root, dataDir: dataDir, logger: cfg.Logger, stopTimeout: cfg.StopTimeout}
		if cfg.SocketOnly {
			s.sockDir = sockDir
		}
		s.restart = func() (*process, error) {
			return startPostgres(binDir, root, dataDir, sockDir, listen, port, settings, cred, cfg.Logger)
		}
		s.proc, err = s.restart()
		if err != nil {
			return nil, err
		}
		err = s.waitReady(ctx)
		if err == nil {
			cfg.Logger.Debug("pgtmp: server ready", "port", port, "dir", root)
			return s, nil
		}
		exitedEarly := s.proc.exited()
		s.proc.stop(cfg.StopTimeout)
		// Another process may have taken a port picked here; pick again.
		if cfg.Port != 0 || try == tries || !exitedEarly || ctx.Err() != nil {
			return nil, err
		}
		cfg.Logger.Debug("pgtmp: server exited during start-up, retrying on another port", "port", port, "err", err)
	}
}

// initdb creates the cluster in dataDir.
func initdb(ctx context.Context, logger *slog.Logger, binDir, workDir, dataDir string, cred *syscall.Credential) error {
	path := filepath.Join(binDir, "initdb")
	// path is absolute, and initdb finds postgres beside its argv[0].
	cmd := exec.CommandContext(ctx, path,
		"-D", dataDir,
		"-U", Superuser,
		"-A", "trust",
		"-E", "UTF8",
		"--locale=C",
		"--no-sync",
	)
	cmd.Dir = workDir
	cmd.Env = serverEnv
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.WaitDelay = 5 * time.Second // if killed, its bootstrap child may hold the pipe
	out, err := cmd.CombinedOutput()
	for line := range strings.Lines(string(out)) {
		logger.Debug("pgtmp: initdb", "line", strings.TrimRight(line, "\n"))
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("initdb: %w (%w)", ctx.Err(), err)
		}
		return fmt.Errorf("initdb: %w\n%s", err, tail(string(out), 20))
	}
	return nil
}

// serverEnv is the whole environment of initdb and postgres, so that PG*
// variables and locale settings of the caller do not leak in.
var serverEnv = []string{"LC_ALL=C", "LANG=C"}

// startPostgres starts the postmaster.
func startPostgres(binDir, workDir, dataDir, sockDir, listen string, port int, settings map[string]string, cred *syscall.Credential, logger *slog.Logger) (*process, error) {
	path := filepath.Join(binDir, "postgres")
	args := []string{
		"-D", dataDir,
		"-p", strconv.Itoa(port),
		"-h", listen,
		"-k", sockDir,
	}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		args = append(args, "-c", k+"="+settings[k])
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = workDir
	cmd.Env = serverEnv
	cmd.SysProcAttr = serverSysProcAttr(cred)
	out := &logWriter{logger: logger.With("port", port)}
	cmd.Stdout = out
	cmd.Stderr = out
	// After a SIGKILL, backends hold the output pipe until they notice.
	cmd.WaitDelay = 5 * time.Second
	return startProcess(cmd, out)
}

// process owns a started postmaster and the goroutine that waits for it.
type process struct {
	cmd     *exec.Cmd
	out     *logWriter
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done
}

// startProcess starts cmd from a goroutine locked to its OS thread until
// the process exits: the parent-death signal follows the thread that
// forked, and a locked thread ends only with its goroutine.
func startProcess(cmd *exec.Cmd, out *logWriter) (*process, error) {
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks for a fast shutdown, then an immediate one, then kills, and
// returns the process's exit error once it has exited.
func (p *process) stop(timeout time.Duration) error {
	steps := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{
		{syscall.SIGINT, timeout},          // fast shutdown
		{syscall.SIGQUIT, 5 * time.Second}, // immediate shutdown
		{syscall.SIGKILL, 0},
	}
	for _, st := range steps {
		if p.exited() {
			break
		}
		_ = p.cmd.Process.Signal(st.sig)
		if st.wait == 0 {
			break
		}
		t := time.NewTimer(st.wait)
		select {
		case <-p.done:
		case <-t.C:
		}
		t.Stop()
	}
	<-p.done
	return p.waitErr
}

// waitReady polls until the server accepts a connection.
func (s *Server) waitReady(ctx context.Context) error {
	delay := 10 * time.Millisecond
	var lastErr error
	for {
		if s.proc.exited() {
			return fmt.Errorf("postgres exited during start-up: %v\n%s", s.proc.waitErr, s.proc.out.tail())
		}
		attemptCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(attemptCtx, s.DSN("postgres"))
		cancel()
		if err == nil {
			return conn.Close(ctx)
		}
		lastErr = err
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("postgres not ready: %w (last error: %v)\n%s", ctx.Err(), lastErr, s.proc.out.tail())
		case <-s.proc.done:
			t.Stop()
		case <-t.C:
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. Another
// process may take it before postgres binds it; Start retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Port returns the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// DataDir returns the cluster's data directory (inside the temporary
// directory that Stop removes).
func (s *Server) DataDir() string { return s.dataDir }

// DSN returns a URL connecting to database as the superuser over TCP,
// or over the Unix socket when the server serves no TCP (SocketOnly).
func (s *Server) DSN(database string) string { return s.DSNAs(Superuser, database) }

// DSNAs is DSN for another role.
func (s *Server) DSNAs(role, database string) string {
	if s.sockDir != "" {
		u := url.URL{Scheme: "postgres", User: url.User(role), Path: "/" + database,
			RawQuery: url.Values{"host": {s.sockDir}, "port": {strconv.Itoa(s.port)}, "sslmode": {"disable"}}.Encode()}
		return u.String()
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(role),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// maxIdentifierLen is PostgreSQL's NAMEDATALEN-1; longer names are
// silently truncated by the server, which would break the returned DSN.
const maxIdentifierLen = 63

// CreateDatabase creates the database name and returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := s.admin(ctx, name, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("pgtmp: create database: %w", err)
	}
	return s.DSN(name), nil
}

// DropDatabase drops the database name if it exists, ending its sessions
// (DROP DATABASE ... WITH (FORCE), PostgreSQL 13 and later).
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	if err := s.admin(ctx, name, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("pgtmp: drop database: %w", err)
	}
	return nil
}

// admin runs sql, about database name, from the postgres database.
func (s *Server) admin(ctx context.Context, name, sql string) error {
	if name == "" || len(name) > maxIdentifierLen {
		return fmt.Errorf("database name %q must be 1 to %d bytes", name, maxIdentifierLen)
	}
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return ErrStopped
	}
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// Stop shuts the server down (fast shutdown) and removes its temporary
// directory. It is idempotent: later calls return the first call's result.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return s.stopErr
	}
	s.stopped = true
	crashed := s.proc.exited()
	waitErr := s.proc.stop(s.stopTimeout)
	var errs []error
	if waitErr != nil {
		if crashed {
			errs = append(errs, fmt.Errorf("server had exited: %w\n%s", waitErr, s.proc.out.tail()))
		} else {
			errs = append(errs, fmt.Errorf("shutdown: %w", waitErr))
		}
	}
	if err := os.RemoveAll(s.root); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		s.stopErr = fmt.Errorf("pgtmp: stop: %w", err)
	}
	s.logger.Debug("pgtmp: server stopped", "port", s.port, "err", s.stopErr)
	return s.stopErr
}

// logWriter sends the server's output, line by line, to a logger and
// keeps the last lines for error messages.
type logWriter struct {
	logger *slog.Logger

	mu      sync.Mutex
	partial []byte
	last    []string
}

const keepLines = 30

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		w.logger.Debug("pgtmp: postgres", "line", line)
		w.last = append(w.last, line)
		if len(w.last) > keepLines {
			w.last = w.last[len(w.last)-keepLines:]
		}
	}
	return len(b), nil
}

func (w *logWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := slices.Clone(w.last)
	if len(w.partial) > 0 {
		lines = append(lines, string(w.partial))
	}
	return strings.Join(lines, "\n")
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
