package shadow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
)

// Config configures a Manager.
type Config struct {
	// BinDir holds the PostgreSQL server binaries. Defaults to
	// pgtmp.FindBinDir().
	BinDir string
	// Dir is the parent of each shadow server's directory. Defaults to
	// os.TempDir(). It must be short enough for a Unix socket path.
	Dir string
	// MaxServers caps the shadow servers running at once (one per Spec).
	// Past it the one least recently used and not in use is stopped.
	// Defaults to 8.
	MaxServers int
	// IdleStop stops a shadow server unused this long (checked at each
	// use). Defaults to 10 minutes.
	IdleStop time.Duration
	// StatementTimeout bounds one catalog statement. Defaults to 2s.
	StatementTimeout time.Duration
	// MaxRows and MaxBytes cap one answer. Default to 10,000 rows and
	// 8 MiB.
	MaxRows  int
	MaxBytes int
	// StartTimeout bounds starting and filling one shadow server.
	// Defaults to 60s.
	StartTimeout time.Duration
	// Logger defaults to a discard logger.
	Logger *slog.Logger
	// Clock defaults to time.Now.
	Clock func() time.Time
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	if c.MaxServers <= 0 {
		c.MaxServers = 8
	}
	if c.IdleStop <= 0 {
		c.IdleStop = 10 * time.Minute
	}
	if c.StatementTimeout <= 0 {
		c.StatementTimeout = 2 * time.Second
	}
	if c.MaxRows <= 0 {
		c.MaxRows = 10000
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 8 << 20
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 60 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// serverSettings keep a shadow server small: it holds a few empty tables
// and answers catalog reads.
var serverSettings = map[string]string{
	"shared_buffers":                      "1MB",
	"max_connections":                     "12",
	"superuser_reserved_connections":      "2",
	"autovacuum":                          "off",
	"wal_level":                           "minimal",
	"max_wal_senders":                     "0",
	"max_worker_processes":                "0",
	"max_parallel_workers":                "0",
	"max_parallel_workers_per_gather":     "0",
	"jit":                                 "off",
	"work_mem":                            "1MB",
	"temp_file_limit":                     "16MB",
	"idle_in_transaction_session_timeout": "10s",
	"log_min_messages":                    "warning",
	"track_activities":                    "off",
	"track_counts":                        "off",
}

// poolConns is how many connections of its role a shadow server's pool
// holds: catalog reads are short.
const poolConns = 4

// ErrBusy is returned when every shadow server is in use and no other
// can start.
var ErrBusy = errors.New("shadow: every shadow catalog server is in use; try again")

// Manager starts shadow servers on first use, one per Spec, and runs
// catalog statements on them. Its methods are safe for concurrent use.
type Manager struct {
	cfg Config

	mu     sync.Mutex
	dbs    map[string]*db // by Spec.Key
	closed bool
	wg     sync.WaitGroup // servers being started or stopped

	// tmpl is the cluster every server copies (template.go), made on
	// first use; tmplMu serializes making it.
	tmplMu sync.Mutex
	tmpl   *pgtmp.Template
}

type db struct {
	ready chan struct{} // closed once built (err set or srv running)
	err   error
	srv   *pgtmp.Server
	pool  *pgxpool.Pool
	refs  int
	last  time.Time
	built time.Duration
}

// New makes a Manager. It starts nothing: a shadow server starts when a
// Spec is first used. It fails with pgtmp.ErrNotInstalled when the
// server binaries are not found.
func New(cfg Config) (*Manager, error) {
	cfg = cfg.WithDefaults()
	if cfg.BinDir == "" {
		dir, err := pgtmp.FindBinDir()
		if err != nil {
			return nil, err
		}
		cfg.BinDir = dir
	}
	return &Manager{cfg: cfg, dbs: map[string]*db{}}, nil
}

// Field is one result column.
type Field struct {
	Name string
	OID  uint32
}

// Result is a catalog statement's answer, every value in text form (nil:
// NULL).
type Result struct {
	Fields []Field
	Rows   [][][]byte
	Tag    string
}

// Description is a statement's parameter types and result columns.
type Description struct {
	Params []uint32
	Fields []Field
}

// ErrTooLarge is an answer past MaxRows or MaxBytes.
var ErrTooLarge = errors.New("shadow: the catalog answer is past the rows or bytes one answer may hold")

// messageSlack is what one protocol message of an answer may hold beyond
// MaxBytes of values: a row's column lengths, a row description of up to
// 1,600 columns.
const messageSlack = 1 << 20

// Query runs sql, which Check accepted, on spec's shadow database, as its
// role, in a READ ONLY transaction under the statement timeout. An error
// from the server is a *pgconn.PgError: its text is the shadow's, which
// holds only the bound.
func (m *Manager) Query(ctx context.Context, spec *Spec, sql string) (*Result, error) {
	d, release, err := m.acquire(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer release()
	var res *Result
	err = m.inReadOnly(ctx, d, func(c *pgconn.PgConn) error {
		rr := c.ExecParams(ctx, sql, nil, nil, nil, nil)
		res = &Result{}
		for _, f := range rr.FieldDescriptions() {
			res.Fields = append(res.Fields, Field{Name: f.Name, OID: f.DataTypeOID})
		}
		size := 0
		for rr.NextRow() {
			if len(res.Rows) == m.cfg.MaxRows {
				rr.Close()
				return ErrTooLarge
			}
			vals := rr.Values()
			row := make([][]byte, len(vals))
			for i, v := range vals {
				if v != nil {
					row[i] = slices.Clone(v)
					size += len(v)
				}
			}
			if size > m.cfg.MaxBytes {
				rr.Close()
				return ErrTooLarge
			}
			res.Rows = append(res.Rows, row)
		}
		tag, err := rr.Close()
		if err != nil {
			return err
		}
		res.Tag = tag.String()
		return nil
	})
	var big *pgproto3.ExceededMaxBodyLenErr
	if errors.As(err, &big) {
		return nil, ErrTooLarge
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Describe prepares sql (which may have $n parameters) on spec's shadow
// database and returns its parameter types and result columns.
func (m *Manager) Describe(ctx context.Context, spec *Spec, sql string) (*Description, error) {
	d, release, err := m.acquire(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer release()
	var out *Description
	err = m.inReadOnly(ctx, d, func(c *pgconn.PgConn) error {
		sd, err := c.Prepare(ctx, "", sql, nil)
		if err != nil {
			return err
		}
		out = &Description{Params: sd.ParamOIDs}
		for _, f := range sd.Fields {
			out.Fields = append(out.Fields, Field{Name: f.Name, OID: f.DataTypeOID})
		}
		return nil
	})
	return out, err
}

// inReadOnly runs fn on a connection of d's pool inside a READ ONLY
// transaction with the statement timeout, and rolls it back.
func (m *Manager) inReadOnly(ctx context.Context, d *db, fn func(*pgconn.PgConn) error) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("shadow: connect: %w", err)
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("shadow: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	ms := m.cfg.StatementTimeout.Milliseconds()
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", max(ms, 1))); err != nil {
		return fmt.Errorf("shadow: set timeout: %w", err)
	}
	return fn(conn.Conn().PgConn())
}

// acquire returns spec's shadow database, started and filled if it was
// not, and the call that releases it.
func (m *Manager) acquire(ctx context.Context, spec *Spec) (*db, func(), error) {
	key := spec.Key()
	now := m.cfg.Clock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, nil, errors.New("shadow: closed")
	}
	m.reapLocked(now, key)
	d, ok := m.dbs[key]
	if !ok {
		if len(m.dbs) >= m.cfg.MaxServers && !m.evictLocked() {
			m.mu.Unlock()
			return nil, nil, ErrBusy
		}
		d = &db{ready: make(chan struct{})}
		m.dbs[key] = d
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.build(context.WithoutCancel(ctx), key, spec, d)
		}()
	}
	d.refs++
	d.last = now
	m.mu.Unlock()
	release := func() {
		m.mu.Lock()
		d.refs--
		d.last = m.cfg.Clock()
		m.mu.Unlock()
	}
	select {
	case <-d.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if d.err != nil {
		release()
		return nil, nil, d.err
	}
	return d, release, nil
}

// build starts and fills d's server; a failure removes d, so the next
// use tries again.
func (m *Manager) build(ctx context.Context, key string, spec *Spec, d *db) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	defer cancel()
	start := time.Now()
	srv, pool, err := m.start(ctx, spec)
	m.mu.Lock()
	defer m.mu.Unlock()
	d.built = time.Since(start)
	if err == nil && m.closed {
		err = errors.New("shadow: closed")
	}
	if err != nil {
		d.err = fmt.Errorf("shadow: build the catalog of target %s: %w", spec.Target, err)
		if m.dbs[key] == d {
			delete(m.dbs, key)
		}
		if pool != nil {
			pool.Close()
		}
		if srv != nil {
			m.stopLater(srv, nil)
		}
		m.cfg.Logger.Error("shadow: build failed", "target", spec.Target, "err", err)
	} else {
		d.srv, d.pool = srv, pool
		m.cfg.Logger.Info("shadow: catalog ready", "target", spec.Target, "role", spec.Role, "tables", len(spec.Tables), "ms", d.built.Milliseconds())
	}
	close(d.ready)
}

// reapLocked stops the servers idle past IdleStop (except keep's).
func (m *Manager) reapLocked(now time.Time, keep string) {
	for k, d := range m.dbs {
		if k == keep || d.refs > 0 || !isReady(d) || now.Sub(d.last) < m.cfg.IdleStop {
			continue
		}
		delete(m.dbs, k)
		m.stopLater(d.srv, d.pool)
	}
}

// evictLocked stops the least recently used server not in use; false
// when every one is in use or starting.
func (m *Manager) evictLocked() bool {
	var oldest string
	for k, d := range m.dbs {
		if d.refs > 0 || !isReady(d) {
			continue
		}
		if oldest == "" || d.last.Before(m.dbs[oldest].last) {
			oldest = k
		}
	}
	if oldest == "" {
		return false
	}
	d := m.dbs[oldest]
	delete(m.dbs, oldest)
	m.stopLater(d.srv, d.pool)
	return true
}

func isReady(d *db) bool {
	select {
	case <-d.ready:
		return true
	default:
		return false
	}
}

// stopLater stops a server in the background; Close waits for it.
func (m *Manager) stopLater(srv *pgtmp.Server, pool *pgxpool.Pool) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if pool != nil {
			pool.Close()
		}
		if srv != nil {
			if err := srv.Stop(); err != nil {
				m.cfg.Logger.Warn("shadow: stop", "err", err)
			}
		}
	}()
}

// Servers is how many shadow servers are running or starting.
func (m *Manager) Servers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.dbs)
}

// Close stops every shadow server, waits for them, and removes the
// template.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	for k, d := range m.dbs {
		if isReady(d) && d.err == nil {
			m.stopLater(d.srv, d.pool)
		}
		delete(m.dbs, k)
	}
	m.mu.Unlock()
	m.wg.Wait()
	m.tmplMu.Lock()
	defer m.tmplMu.Unlock()
	if m.tmpl != nil {
		err := m.tmpl.Remove()
		m.tmpl = nil
		return err
	}
	return nil
}

// start starts a server and fills the database of spec.
func (m *Manager) start(ctx context.Context, spec *Spec) (*pgtmp.Server, *pgxpool.Pool, error) {
	if err := checkNames(spec); err != nil {
		return nil, nil, err
	}
	tmpl, err := m.template(ctx)
	if err != nil {
		return nil, nil, err
	}
	cfg := m.serverConfig()
	cfg.Template = tmpl
	srv, err := pgtmp.Start(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := fill(ctx, srv, spec, m.cfg.StatementTimeout); err != nil {
		return srv, nil, err
	}
	pc, err := pgxpool.ParseConfig(srv.DSNAs(spec.Role, spec.Target))
	if err != nil {
		return srv, nil, err
	}
	pc.MaxConns = poolConns
	// A row past MaxBytes is refused as its message arrives, before it is
	// read into memory: a protocol message may be 1 GiB, and one value
	// (repeat('x', n)) is enough to make one.
	maxBody := m.cfg.MaxBytes + messageSlack
	pc.ConnConfig.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		f := pgproto3.NewFrontend(r, w)
		f.SetMaxBodyLen(maxBody)
		return f
	}
	pc.MaxConnIdleTime = time.Minute
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return srv, nil, err
	}
	return srv, pool, nil
}

// serverConfig is the configuration of the template's server and of
// every shadow server.
func (m *Manager) serverConfig() pgtmp.Config {
	return pgtmp.Config{BinDir: m.cfg.BinDir, Dir: m.cfg.Dir, Fast: true, SocketOnly: true,
		Settings: serverSettings, StartTimeout: m.cfg.StartTimeout, Logger: m.cfg.Logger}
}

// checkNames refuses a Spec whose target or role PostgreSQL reserves.
func checkNames(spec *Spec) error {
	switch {
	case spec.Target == "" || len(spec.Target) > 63:
		return fmt.Errorf("the target name %q is not a database name PostgreSQL takes", spec.Target)
	case spec.Target == "template0" || spec.Target == "template1":
		return fmt.Errorf("the target name %q is a template database's", spec.Target)
	case spec.Role == "" || len(spec.Role) > 63 || spec.Role == pgtmp.Superuser || strings.HasPrefix(spec.Role, "pg_"):
		return fmt.Errorf("the principal %q is not a role name the shadow can take", spec.Role)
	}
	return nil
}
