package pilot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/harbormaster-dev/harbormaster/internal/pgtext"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/memo"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// ViolationSQLState is raised by harbormaster.fence_violation, and
// MaxRowsSQLState by harbormaster.max_rows.
const (
	ViolationSQLState = "HM001"
	MaxRowsSQLState   = "HM002"
)

// Config configures one Pilot for one target.
type Config struct {
	// Target is the target's name, as marques and delegations name it. Required.
	Target string
	// DSN is the target's connection string: the only place credentials live. Required.
	DSN string
	// Role, when set, is assumed with SET LOCAL ROLE for the agent's
	// statement (a least-privilege role). Defaults to none.
	Role string
	// SearchPath is pinned for every statement. Defaults to public.
	SearchPath []string
	// StatementTimeout defaults to 5s; LockTimeout to 2s.
	StatementTimeout time.Duration
	LockTimeout      time.Duration
	// MaxConns caps the pool. Defaults to 32: a transaction holds its connection while the logbook records its commit.
	MaxConns int32
	// MaxImageRows caps the rows of a rehearsal's or a preview's images. Defaults to 50.
	MaxImageRows int
	// PreviewTimeout is a preview's statement timeout (preview.go).
	// Defaults to DefaultPreviewTimeout (3s).
	PreviewTimeout time.Duration
	// Clock defaults to time.Now.
	Clock func() time.Time
	// Logger defaults to a discard logger.
	Logger *slog.Logger
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if len(c.SearchPath) == 0 {
		c.SearchPath = sqlcheck.DefaultSearchPath
	}
	if c.StatementTimeout <= 0 {
		c.StatementTimeout = 5 * time.Second
	}
	if c.LockTimeout <= 0 {
		c.LockTimeout = 2 * time.Second
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 32
	}
	if c.MaxImageRows <= 0 {
		c.MaxImageRows = 50
	}
	if c.PreviewTimeout <= 0 {
		c.PreviewTimeout = DefaultPreviewTimeout
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.Target == "" {
		return errors.New("pilot: config: Target is required")
	}
	if c.DSN == "" {
		return errors.New("pilot: config: DSN is required")
	}
	return nil
}

// Pilot executes marques against one target. It trusts nothing the control
// plane says: it verifies the marque, the human signature over the bound the
// marque names, and re-runs the static check before it runs anything.
type Pilot struct {
	cfg      Config
	pool     *pgxpool.Pool
	verifier *marque.Verifier
	signers  *signing.AllowedSigners

	mu      sync.RWMutex
	catalog *sqlcheck.Catalog

	exprs ExprCache

	authority *Authority // this process's gateway's (authority.go)

	sigMu sync.Mutex
	sigOK map[[32]byte]sigEntry // verified (bound, signature) pairs

	bounds memo.Map[[32]byte, *parsedBound] // by the SHA-256 of the canonical bytes
	// checks are the bounds' catalogs (bound.Catalog), the shapes'
	// analyses, and each bound's guarded template of a shape (shapes.go).
	checks *sqlcheck.Cache[*template]
	guards memo.Map[guardKey, *Guarded] // statements this Pilot checked and guarded
	shapes shapeState                   // prepared templates and counts (shapes.go)

	pins []any // the pinned settings' values

	views sync.Map   // names of fence views known to exist in the target
	ddlMu sync.Mutex // one fence-view creation at a time

	// hasGeneration is set when the target has the catalog generation
	// counter (cascade.go): folded writes are built to skip their foreign
	// key question while it stands still.
	hasGeneration bool
}

// parsedBound is a canonical bound parsed and validated, with its rules.
type parsedBound struct {
	b     *bound.Bound
	rules []sqlcheck.Rule
	sum   [32]byte
	// id is sum as a string: the bound's name in the check cache.
	id string
}

// guardKey is everything the static check and the guards depend on: the
// statement text, the bound's bytes, the catalog, the path and whether the
// rehearsal's image queries are wanted.
type guardKey struct {
	cat      *sqlcheck.Catalog
	sql      [32]byte
	bound    [32]byte
	path     string
	evidence bool
}

// maxMemo bounds the Pilot's memos of parsed bounds and guarded
// statements, and each map of its check cache.
const maxMemo = 4096

// sigEntry is a grantor signature verified against the signers file.
type sigEntry struct {
	signer string
	until  time.Time
}

// sigCacheFor is how long a verified grantor signature is trusted without
// checking it again (the signers file is read once; only validity windows
// can change the answer).
const sigCacheFor = time.Minute

// New connects to the target and reads its catalog.
func New(ctx context.Context, cfg Config, verifier *marque.Verifier, signers *signing.AllowedSigners) (*Pilot, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if verifier == nil || signers == nil {
		return nil, errors.New("pilot: a marque verifier and a signers file are required")
	}
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("pilot: target %s: %w", cfg.Target, err)
	}
	pc.MaxConns = cfg.MaxConns
	// Only the extended protocol: one statement per Parse, no simple-query
	// batches, even if a text ever slipped past the checker.
	pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pins := pinArgs(cfg)
	pc.AfterConnect = afterConnect(pins)
	p := &Pilot{cfg: cfg, verifier: verifier, signers: signers, pins: pins,
		bounds: memo.Map[[32]byte, *parsedBound]{Max: maxMemo}, guards: memo.Map[guardKey, *Guarded]{Max: maxMemo},
		// Statements of any length: a long one keeps its template.
		checks: sqlcheck.NewCache[*template](sqlcheck.CacheConfig{Max: maxMemo, MaxSQL: -1})}
	p.authority = &Authority{p: p}
	p.initShapes(pc)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pilot: target %s: %w", cfg.Target, err)
	}
	p.pool = pool
	if err := p.RefreshCatalog(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	// A target initialized before the counter existed has none (nor a
	// role that may not read it); its writes ask their question every
	// time, as they always did.
	if err := pool.QueryRow(ctx, `SELECT COALESCE(has_table_privilege(to_regclass('harbormaster.catalog_generation'), 'SELECT'), false)`).Scan(&p.hasGeneration); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pilot: target %s: %w", cfg.Target, err)
	}
	return p, nil
}

// Close releases the pool.
func (p *Pilot) Close() { p.pool.Close() }

// Target is the target's name.
func (p *Pilot) Target() string { return p.cfg.Target }

// Catalog is the catalog the Pilot checks against.
func (p *Pilot) Catalog() *sqlcheck.Catalog {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.catalog
}

// RefreshCatalog re-reads the target's catalog.
func (p *Pilot) RefreshCatalog(ctx context.Context) error {
	cat, err := LoadCatalog(ctx, p.pool, p.cfg.SearchPath)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.catalog = cat
	p.mu.Unlock()
	return nil
}

// Ping checks the target answers.
func (p *Pilot) Ping(ctx context.Context) error { return p.pool.Ping(ctx) }

// Request is one statement to execute (or rehearse).
type Request struct {
	// Marque is the token, as Minter.Mint returned it. Required for Execute.
	Marque string
	// SQL is the canonical statement the marque's statement hash names.
	SQL string
	// Bound is the signed canonical delegation bytes the marque rests on.
	Bound []byte
	// ExpectBefore, when set, is the digest of the rehearsal's before images
	// and ExpectRows its row count: the surveyed path runs only if the
	// statement reaches exactly the rows the panel was shown.
	ExpectBefore string
	ExpectRows   *int64
	// ExpectAfter, when set, is the rehearsal's AfterDigest: the surveyed
	// path runs only if the statement writes exactly the values the panel
	// was shown.
	ExpectAfter string

	// grant, set by Authority.Authorize in this process only, stands in
	// for Marque (authority.go). It is never encoded: a request that
	// crosses a process boundary carries a token.
	grant *grant
}

// Outcome of a Pilot execution.
type Outcome string

const (
	// Executed: committed.
	Executed Outcome = "executed"
	// Refused: nothing ran (or everything rolled back); the statement refers.
	Refused Outcome = "refused"
	// Rehearsed: ran and rolled back on purpose.
	Rehearsed Outcome = "rehearsed"
	// Described: described without running (Describe): nothing ran.
	Described Outcome = "described"
)

// Result is what happened. A Refused result is a decision, not an error:
// its Reasons say why, for the agent and the queue.
type Result struct {
	Outcome      Outcome  `json:"outcome"`
	Reasons      []string `json:"reasons,omitempty"`
	Code         string   `json:"code,omitempty"`
	RowsAffected int64    `json:"rows_affected"`
	// Columns are the result's columns in the order the target returned
	// them, with the names it gave them: two columns may share a name
	// (SELECT o.id, c.id ...).
	Columns []Column `json:"columns,omitempty"`
	// ParamTypes are the type OIDs the target gives the statement's $1..$n
	// (Outcome Described only; nil when it could not type them).
	ParamTypes []uint32 `json:"param_types,omitempty"`
	// Rows are the result's rows, each with one value per column, in the
	// order of Columns.
	Rows      [][]any `json:"rows,omitempty"`
	Truncated bool    `json:"truncated"`
	TxID      string  `json:"txid,omitempty"`
	MarqueID  string  `json:"marque_id,omitempty"`
	// ExecutedSQL is the guarded text that ran: with ExecutedArgs, a
	// template and the values bound to its $1..$n.
	ExecutedSQL  string `json:"executed_sql,omitempty"`
	ExecutedArgs []any  `json:"executed_args,omitempty"`
	// Rehearsal is a rehearsal's report (Outcome Rehearsed only): the
	// evidence of a rehearsal inside a bound, for the Surveyor's panel.
	// (Approvers see a Preview instead: preview.go.)
	Rehearsal *Rehearsal `json:"rehearsal,omitempty"`
	// Detail is what a refusal's class does not say: the target's own
	// error text and SQLSTATE, the counts. For humans only (the queue, the
	// logbook); never shown to the agent.
	Detail string `json:"detail,omitempty"`
}

// Column is one column of a result, as the target described it.
type Column struct {
	// Name is the column's name as the target gave it, not necessarily
	// unique within the result.
	Name string `json:"name"`
	// Type is the column's type OID.
	Type uint32 `json:"type"`
}

// ColumnNames are the names of cols, in order.
func ColumnNames(cols []Column) []string {
	if cols == nil {
		return nil
	}
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}

// Refusal codes.
const (
	RefusedMarque    = "marque_invalid"
	RefusedSignature = "signature_invalid"
	RefusedBound     = "bound_invalid"
	RefusedCheck     = "check_failed"
	RefusedFence     = "fence_violation"
	RefusedCheckRow  = "check_violation"
	RefusedMaxRows   = "max_rows_exceeded"
	RefusedReplay    = "marque_replayed"
	RefusedDatabase  = "database_error"
	RefusedTimeout   = "timeout"
	RefusedDrift     = "rows_differ_from_rehearsal"
)

// The messages of the refusal classes whose cause lies in the target's
// rows. Each is fixed: a refusal tells the agent its class and nothing of
// the data behind it (the target's own error text is in Result.Detail,
// for humans).
const (
	MessageFence    = "the statement reaches a row inside what its rule lets it read but outside the rule's write fence: rolled back"
	MessageCheckRow = "a new or changed row does not satisfy the rule's check: rolled back"
	MessageMaxRows  = "the statement affects more rows than the rule's max_rows: rolled back"
	MessageDatabase = "the target refused the statement: rolled back"
	MessageTimeout  = "the statement ran past the target's statement or lock timeout: rolled back"
	MessageDrift    = "the rows the statement reaches differ from its rehearsal: rolled back"
	// MessageApprovalDrift is an approved statement that would not do
	// what the approver was shown: it goes back to the queue.
	MessageApprovalDrift = "the rows the statement reaches or the values it writes differ from the preview its approval signed: rolled back, and back to the queue for a fresh preview"
	// MessageCascade is the refusal of a write that a foreign key's action
	// answers, found as it ran (a key added since the Pilot read its
	// catalog).
	MessageCascade = "a foreign key's CASCADE, SET NULL or SET DEFAULT action answers this write and would change rows of another table, which no rule counts: rolled back (a human may approve it)"
)

func refused(code, format string, args ...any) *Result {
	return &Result{Outcome: Refused, Code: code, Reasons: []string{fmt.Sprintf(format, args...)}}
}

// authorize verifies everything a marque rests on: the marque, the
// grantor's signature over the bound, the bound in force for the
// principal. Any failure is a refusal.
func (p *Pilot) authorize(req Request) (*marque.Claims, *parsedBound, *Result) {
	now := p.cfg.Clock()
	var claims marque.Claims
	if req.grant != nil {
		var err error
		if claims, err = p.granted(req); err != nil {
			return nil, nil, refused(RefusedMarque, "the authorization is not valid: %v", err)
		}
	} else {
		var err error
		claims, err = p.verifier.Verify(req.Marque, marque.Expect{Target: p.cfg.Target, StatementHash: marque.StatementHash(req.SQL)})
		if err != nil {
			return nil, nil, refused(RefusedMarque, "the marque is not valid: %v", err)
		}
	}
	if claims.Auth.Kind != marque.AuthDelegation {
		return nil, nil, refused(RefusedMarque, "marques resting on %q are not executed by this Pilot", claims.Auth.Kind)
	}
	pb, res := p.verifyBound(req.Bound, claims.Auth, claims.Principal, now)
	if res != nil {
		return nil, nil, res
	}
	return &claims, pb, nil
}

// verifyBound checks the signed bound bytes against the marque's auth block
// and the signers file, and that the delegation is in force for principal.
func (p *Pilot) verifyBound(canonical []byte, auth marque.Auth, principal string, now time.Time) (*parsedBound, *Result) {
	sum := sha256.Sum256(canonical)
	if hex.EncodeToString(sum[:]) != auth.BoundSHA256 {
		return nil, refused(RefusedBound, "the delegation bytes do not match the marque's bound hash")
	}
	if bound.ID(canonical) != auth.DelegationID {
		return nil, refused(RefusedBound, "the delegation bytes do not match the marque's delegation id")
	}
	name, err := p.verifyGrantor(canonical, []byte(auth.Signature), now)
	if err != nil {
		return nil, refused(RefusedSignature, "the grantor's signature does not verify: %v", err)
	}
	if name != auth.Signer {
		return nil, refused(RefusedSignature, "the delegation was signed by %s, not %s", name, auth.Signer)
	}
	pb, err := p.parseBound(canonical, sum)
	if err != nil {
		return nil, refused(RefusedBound, "%v", err)
	}
	b := pb.b
	if b.Target != p.cfg.Target {
		return nil, refused(RefusedBound, "the delegation is for target %s, not %s", b.Target, p.cfg.Target)
	}
	if b.Grantee != principal {
		return nil, refused(RefusedBound, "the delegation is for %s, not %s", b.Grantee, principal)
	}
	if !b.ActiveAt(now) {
		return nil, refused(RefusedBound, "the delegation is not in force now (not_before %s, expires %s)", b.NotBefore, b.Expires)
	}
	return pb, nil
}

// parseBound parses and validates canonical bound bytes whose SHA-256 is
// sum, once per distinct bytes.
func (p *Pilot) parseBound(canonical []byte, sum [32]byte) (*parsedBound, error) {
	if pb, ok := p.bounds.Get(sum); ok {
		return pb, nil
	}
	b, err := bound.ParseCanonical(canonical)
	if err != nil {
		return nil, err
	}
	rules, err := b.CheckRules()
	if err != nil {
		return nil, err
	}
	pb := &parsedBound{b: b, rules: rules, sum: sum, id: string(sum[:])}
	p.bounds.Put(sum, pb)
	return pb, nil
}

// verifyGrantor verifies a grantor's signature over canonical bound bytes
// with the signers file, remembering a success for a minute.
func (p *Pilot) verifyGrantor(canonical, sig []byte, now time.Time) (string, error) {
	h := sha256.New()
	h.Write(canonical)
	h.Write([]byte{0})
	h.Write(sig)
	var key [32]byte
	copy(key[:], h.Sum(nil))
	p.sigMu.Lock()
	e, ok := p.sigOK[key]
	p.sigMu.Unlock()
	if ok && now.Before(e.until) {
		return e.signer, nil
	}
	signer, err := p.signers.Verify(canonical, sig, signing.NamespaceDelegation, p.cfg.Target, now)
	if err != nil {
		return "", err
	}
	p.sigMu.Lock()
	if p.sigOK == nil || len(p.sigOK) > 4096 {
		p.sigOK = map[[32]byte]sigEntry{}
	}
	p.sigOK[key] = sigEntry{signer: signer.Name, until: now.Add(sigCacheFor)}
	p.sigMu.Unlock()
	return signer.Name, nil
}

// guard re-runs the static check against the bound and builds the guards.
// The compiled path needs conforms; the surveyed path may also be survey.
// A statement the Pilot has already checked and guarded against the same
// bound bytes and catalog is not parsed again: the result is a function of
// exactly those inputs, and only successes are remembered.
func (p *Pilot) guard(sql string, pb *parsedBound, path string, evidence bool) (*Guarded, *Result) {
	cat := p.scope(pb)
	key := guardKey{cat: cat, sql: sha256.Sum256([]byte(sql)), bound: pb.sum, path: path, evidence: evidence}
	if g, ok := p.guards.Get(key); ok {
		return g, nil
	}
	a := sqlcheck.Analyze(sql, cat, sqlcheck.Limits{})
	d, r := p.check(a, pb, path)
	if r != nil {
		return nil, r
	}
	opts := []GuardOption{WithExprCache(&p.exprs)}
	if evidence {
		opts = append(opts, WithEvidence())
	}
	g, err := BuildGuards(a, d, pb.b, cat, opts...)
	if err != nil {
		return nil, refused(RefusedCheck, "%v", err)
	}
	p.guards.Put(key, g)
	return g, nil
}

// scope is the catalog as pb's bound sees it (bound.Catalog): the Pilot
// checks and guards a statement against it, as the gateway does, so a
// table or column outside the bound is as if it did not exist, and *
// reaches none.
func (p *Pilot) scope(pb *parsedBound) *sqlcheck.Catalog {
	cat := p.Catalog()
	return p.checks.Scope(cat, pb.id, func() *sqlcheck.Catalog { return pb.b.Catalog(cat, bound.CatalogName) })
}

// check is the Pilot's own static check of a against the bound: the
// compiled path needs conforms; the surveyed path may also be survey.
func (p *Pilot) check(a *sqlcheck.Analysis, pb *parsedBound, path string) (sqlcheck.Decision, *Result) {
	d := sqlcheck.Check(a, pb.rules)
	switch {
	case d.Outcome == sqlcheck.Conforms:
	case d.Outcome == sqlcheck.Survey && path == marque.PathSurveyed:
	default:
		r := refused(RefusedCheck, "the Pilot's own static check says %s", d.Outcome)
		for _, why := range d.Reasons {
			if why.Code != sqlcheck.CodeCovered {
				r.Reasons = append(r.Reasons, why.String())
			}
		}
		return d, r
	}
	return d, nil
}

// Execute verifies and runs one marque's statement in one transaction with
// guards, writing the receipt that makes it single-use. Infrastructure
// failures are errors; every other failure is a Refused result. A
// compiled statement in a transaction of its own runs through its shape's
// template in one round trip (shapes.go); everything else takes the
// literal path.
func (p *Pilot) Execute(ctx context.Context, req Request) (*Result, error) {
	claims, pb, res := p.authorize(req)
	if res != nil {
		return res, nil
	}
	if req.ExpectBefore == "" && req.ExpectRows == nil && req.ExpectAfter == "" {
		t, s, res := p.shaped(req.SQL, pb, claims.Path)
		if res != nil {
			return res, nil
		}
		if t != nil && !t.broken.Load() {
			if res, ok, err := p.runShaped(ctx, claims, t, s, req.receiptless(t.g.Kind)); ok {
				p.shapes.templated.Add(1)
				return res, err
			}
		}
	}
	p.shapes.literal.Add(1)
	g, res := p.guard(req.SQL, pb, claims.Path, req.ExpectBefore != "" || req.ExpectAfter != "")
	if res != nil {
		return res, nil
	}
	return p.run(ctx, claims, g, req, nil, false)
}

// Rehearse runs the statement exactly as Execute would, with its guards,
// collects before/after images and counts, and rolls back. It writes no
// receipt and needs no marque: it is evidence, never authority. It does
// need the grantor's signature over the bound (auth, as a marque would
// carry it), verified here with the signers file, so a rehearsal reads
// only what a human signed for principal, in force now.
func (p *Pilot) Rehearse(ctx context.Context, sql string, canonicalBound []byte, auth marque.Auth, principal string, path string) (*Result, error) {
	pb, res := p.verifyBound(canonicalBound, auth, principal, p.cfg.Clock())
	if res != nil {
		return res, nil
	}
	g, res := p.guard(sql, pb, path, true)
	if res != nil {
		return res, nil
	}
	return p.run(ctx, nil, g, Request{SQL: sql}, nil, true)
}

// run runs a guarded statement in t, a transaction opened ahead, or in one
// of its own when t is nil.
func (p *Pilot) run(ctx context.Context, claims *marque.Claims, g *Guarded, req Request, t *Txn, rehearse bool) (*Result, error) {
	if t == nil {
		// A transaction id only for a receipt to name (a receiptless read
		// has none, and needs no id of its own).
		var err error
		if t, err = p.beginAt(ctx, !rehearse && !req.receiptless(g.Kind), req.ExpectBefore != ""); err != nil {
			return nil, err
		}
	} else if !t.take() {
		return nil, errors.New("pilot: a transaction runs one statement, and this one was used or closed")
	}
	defer t.Close() // rolls back unless committed
	if err := p.ensureViews(ctx, g.Views); err != nil {
		return nil, err
	}
	res := &Result{Outcome: Executed, ExecutedSQL: g.SQL}
	var reh *Rehearsal
	if rehearse {
		res.Outcome = Rehearsed
		reh = &Rehearsal{Kind: string(g.Kind), Before: []map[string]any{}, After: []map[string]any{}, ExecutedSQL: g.SQL}
	} else {
		res.MarqueID = claims.ID
	}
	// Before images need a round trip of their own ahead of the statement;
	// otherwise the statement joins the first batch.
	evidence := g.BeforeSQL != "" && (rehearse || req.ExpectBefore != "")
	withImages := (rehearse || req.ExpectAfter != "") && g.ImageSQL != ""
	if req.ExpectAfter != "" && g.ImageSQL == "" {
		return refused(RefusedDrift, MessageDrift), nil
	}

	// One round trip: the receipt, the session state, and the statement.
	b := &pgx.Batch{}
	receipt := !rehearse && !req.receiptless(g.Kind)
	if receipt {
		// The receipt goes first: a second execution of the same marque
		// blocks on, then fails at, this primary key before running
		// anything. Its txid column defaults to this transaction's id.
		b.Queue(stmtReceipt,
			claims.ID, claims.RequestID, claims.Principal, claims.Target, claims.StatementHash, claims.Path)
	}
	if g.Kind == sqlcheck.OpSelect {
		b.Queue(`SET LOCAL transaction_read_only = on`)
	}
	if p.cfg.Role != "" {
		b.Queue(`SELECT set_config('role', $1, true)`, p.cfg.Role)
	}
	// A read commits in the same round trip: it changes nothing but its
	// receipt, and its row cap truncates rather than rolls back.
	readCommit := g.Kind == sqlcheck.OpSelect && !rehearse && !evidence && req.ExpectRows == nil
	if !evidence {
		b.Queue(g.text(withImages))
		if readCommit {
			b.Queue(`COMMIT`)
		}
	}
	var out stmtResult
	var err error
	var commitTag pgconn.CommandTag
	var commitErr error
	br := t.conn.SendBatch(ctx, b)
	if receipt {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			if isUniqueViolation(err) {
				return refused(RefusedReplay, "marque %s was already executed", claims.ID), nil
			}
			return nil, fmt.Errorf("pilot: receipt: %w", err)
		}
	}
	for _, what := range []bool{g.Kind == sqlcheck.OpSelect, p.cfg.Role != ""} {
		if !what {
			continue
		}
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("pilot: session settings: %w", err)
		}
	}
	if !evidence {
		if rows, qerr := br.Query(); qerr != nil {
			err = qerr
		} else {
			out, err = p.statement(rows, g, withImages)
		}
		if readCommit && err == nil {
			commitTag, commitErr = br.Exec()
		}
		cerr := br.Close()
		switch {
		case readCommit && err == nil && commitErr == nil && commitTag.String() == "COMMIT":
			// Committed: whatever Close says now changes nothing.
		case readCommit && err != nil && !isServerError(err):
			// COMMIT was sent behind the statement; a failure on this side
			// (decoding, a cancelled context) cannot tell whether it ran.
			return nil, fmt.Errorf("pilot: read: %w: %w", ErrCommitUnknown, err)
		case err == nil && commitErr == nil:
			err = cerr
		}
	} else {
		if err := br.Close(); err != nil {
			return nil, fmt.Errorf("pilot: session settings: %w", err)
		}
		imgs, ierr := images(ctx, t.conn, g.BeforeSQL, int(g.MaxRows)+1)
		if ierr != nil {
			var pgErr *pgconn.PgError
			if errors.As(ierr, &pgErr) {
				p.forgetViews(ierr)
				return statementRefusal(ierr)
			}
			return nil, fmt.Errorf("pilot: before images: %w", ierr)
		}
		js, _ := json.Marshal(imgs.rows)
		digest := Digest(js)
		if req.ExpectBefore != "" && digest != req.ExpectBefore {
			return refused(RefusedDrift, MessageDrift), nil
		}
		if rehearse {
			// The panel sees only what the rehearsal shows; keep it bounded.
			reh.Before, reh.BeforeDigest = capRows(imgs.rows, p.cfg.MaxImageRows), digest
			reh.ImagesTruncated = len(imgs.rows) > p.cfg.MaxImageRows
		}
		if rows, qerr := t.conn.Query(ctx, g.text(withImages)); qerr != nil {
			err = qerr
		} else {
			out, err = p.statement(rows, g, withImages)
		}
	}
	if err != nil {
		p.forgetViews(err)
		return statementRefusal(err)
	}
	n := out.n
	res.RowsAffected = n
	if g.Kind != sqlcheck.OpSelect && n > g.MaxRows {
		r := refused(RefusedMaxRows, MessageMaxRows)
		r.Detail = fmt.Sprintf("it would affect %d rows; max_rows is %d", n, g.MaxRows)
		return r, nil
	}
	if req.ExpectRows != nil && n != *req.ExpectRows {
		r := refused(RefusedDrift, MessageDrift)
		r.Detail = fmt.Sprintf("it affects %d rows, its rehearsal %d", n, *req.ExpectRows)
		return r, nil
	}
	if req.ExpectAfter != "" && AfterDigest(out.images, g.Written) != req.ExpectAfter {
		r := refused(RefusedDrift, MessageDrift)
		r.Detail = "it writes other values than its rehearsal"
		return r, nil
	}
	if g.Returning || g.Kind == sqlcheck.OpSelect {
		res.Columns, res.Rows, res.Truncated = out.cols, out.rows, out.truncated
	}
	if rehearse {
		reh.RowsReached = n
		if g.Kind != sqlcheck.OpSelect {
			reh.After = capRows(out.images, p.cfg.MaxImageRows)
			if g.ImageSQL != "" {
				reh.AfterDigest = AfterDigest(out.images, g.Written)
			}
			reh.ImagesTruncated = reh.ImagesTruncated || len(out.images) > p.cfg.MaxImageRows
		}
		res.Rehearsal = reh
		return res, nil
	}
	res.TxID = t.id
	if readCommit {
		if err := checkCommit(commitTag, commitErr); err != nil {
			return nil, err
		}
		return res, nil
	}
	// From here the outcome must not hang on the caller's context: a
	// cancelled COMMIT is one whose outcome nobody knows.
	if err := p.commit(context.WithoutCancel(ctx), t, claims.ID, g, n); err != nil {
		return nil, err
	}
	return res, nil
}

// commit resets the role, writes the receipt's count and commits, in one
// round trip.
func (p *Pilot) commit(ctx context.Context, t *Txn, marqueID string, g *Guarded, n int64) error {
	b := &pgx.Batch{}
	if p.cfg.Role != "" {
		b.Queue(`RESET ROLE`)
	}
	if g.Kind != sqlcheck.OpSelect {
		// A read's receipt was written before the transaction went read-only.
		b.Queue(stmtReceiptN, marqueID, n)
	}
	b.Queue(`COMMIT`)
	var tag pgconn.CommandTag
	var err error
	br := t.conn.SendBatch(ctx, b)
	for i := 0; i < b.Len(); i++ {
		tag, err = br.Exec()
		if err != nil {
			break
		}
	}
	// COMMIT is last: its tag and error (or the first one before it,
	// which leaves the transaction aborted) decide.
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return checkCommit(tag, err)
}

// isViolation reports a guard's raise (harbormaster.fence_violation)
// for reason.
func isViolation(pgErr *pgconn.PgError, reason string) bool {
	return pgErr.Code == ViolationSQLState && strings.Contains(pgErr.Message, reason)
}

// statementRefusal maps an error from running the guarded statement: a
// guard's error or the target's refusal refers; anything else is an error.
// The agent sees the class only (DESIGN.md invariant 10): the target's
// own message and SQLSTATE go to Detail, for the queue and the logbook.
func statementRefusal(err error) (*Result, error) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil, fmt.Errorf("pilot: execute: %w", err)
	}
	var r *Result
	switch {
	case isViolation(pgErr, cascadeReason):
		r = refused(RefusedCheck, MessageCascade)
	case isViolation(pgErr, "check"):
		r = refused(RefusedCheckRow, MessageCheckRow)
	case pgErr.Code == ViolationSQLState:
		r = refused(RefusedFence, MessageFence)
	case pgErr.Code == MaxRowsSQLState:
		r = refused(RefusedMaxRows, MessageMaxRows)
	case pgErr.Code == "57014" || pgErr.Code == "55P03":
		// query_canceled (statement_timeout) and lock_not_available
		// (lock_timeout).
		r = refused(RefusedTimeout, MessageTimeout)
	default:
		r = refused(RefusedDatabase, MessageDatabase)
	}
	r.Detail = fmt.Sprintf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	if pgErr.Detail != "" {
		r.Detail += "; " + pgErr.Detail
	}
	return r, nil
}

// text is the statement to send: with the after-image column for a
// rehearsal that collects images.
func (g *Guarded) text(withImages bool) string {
	if withImages {
		return g.ImageSQL
	}
	return g.SQL
}

// stmtResult is what running the guarded statement returned.
type stmtResult struct {
	n         int64
	cols      []Column
	rows      [][]any
	truncated bool
	images    []map[string]any
}

// statement reads the guarded statement's rows: for a read, at most
// MaxRows (one more marks truncation); for a write, every returned row is
// read so the check guard runs on each, and the count is exact. With
// images, the last column is the rehearsal's after image.
func (p *Pilot) statement(rows pgx.Rows, g *Guarded, withImages bool) (stmtResult, error) {
	defer rows.Close()
	extra := 0
	if withImages {
		extra = 1
	}
	fds := rows.FieldDescriptions()
	ncols := len(fds) - extra
	if g.Hidden {
		ncols--
	}
	out := stmtResult{cols: make([]Column, ncols)}
	for i := 0; i < ncols; i++ {
		out.cols[i] = Column{Name: fds[i].Name, Type: fds[i].DataTypeOID}
	}
	collect := g.Returning || g.Kind == sqlcheck.OpSelect
	var count int64
	for rows.Next() {
		count++
		if g.Kind == sqlcheck.OpSelect && count > g.MaxRows {
			out.truncated = true
			break
		}
		if !collect && extra == 0 {
			continue
		}
		if g.Kind != sqlcheck.OpSelect && count > g.MaxRows+1 {
			continue // over the cap: it will roll back; keep draining for the count
		}
		vals, err := rows.Values()
		if err != nil {
			return stmtResult{}, err
		}
		if extra == 1 {
			if img, ok := vals[len(vals)-1].(map[string]any); ok {
				out.images = append(out.images, img)
			}
		}
		if collect {
			row := make([]any, ncols)
			var raw [][]byte
			for i := 0; i < ncols; i++ {
				oid := out.cols[i].Type
				if v := vals[i]; v != nil && (oid == oidJSON || oid == oidJSONB) {
					// JSON as the target wrote it: decoded, its numbers
					// would pass through float64 and lose digits.
					if raw == nil {
						raw = rows.RawValues()
					}
					if j, ok := rawJSON(raw[i], oid, fds[i].Format); ok {
						row[i] = j
						continue
					}
				}
				row[i] = jsonValue(oid, vals[i])
			}
			out.rows = append(out.rows, row)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return stmtResult{}, err
	}
	out.n = rows.CommandTag().RowsAffected()
	if g.Kind == sqlcheck.OpSelect {
		out.n = int64(len(out.rows))
	}
	return out, nil
}

// The type OIDs of json and jsonb.
const (
	oidJSON  = 114
	oidJSONB = 3802
)

// rawJSON is a json or jsonb value's own text as JSON, from its raw bytes
// in the result's format (jsonb's binary form is a version byte, 1, and
// the text).
func rawJSON(b []byte, oid uint32, format int16) (json.RawMessage, bool) {
	if oid == oidJSONB && format == pgtype.BinaryFormatCode {
		if len(b) == 0 || b[0] != 1 {
			return nil, false
		}
		b = b[1:]
	}
	if !json.Valid(b) {
		return nil, false
	}
	return json.RawMessage(bytes.Clone(b)), true
}

func capRows(rows []map[string]any, n int) []map[string]any {
	if len(rows) > n {
		return rows[:n]
	}
	return rows
}

// isServerError reports an error the target sent (the statement failed
// there), as opposed to one on this side of the connection.
func isServerError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// jsonValue turns a pgx value of a column of type oid into one that
// marshals as the JSON a client expects (docs/api.md): numbers as numbers,
// timestamps RFC 3339, UUIDs as strings, and where JSON has no faithful
// form PostgreSQL's own text (pgtext): intervals, times of day, dates,
// inet and cidr, NaN and the infinities, and times outside the years 0000
// to 9999. Every value it returns marshals; an executed statement's
// answer never fails on one of its values.
func jsonValue(oid uint32, v any) any {
	switch x := v.(type) {
	case nil, bool, string, int16, int32, int64, json.Number:
		return x
	case float32:
		if !pgtext.Finite(float64(x)) {
			return pgtext.Float(float64(x), 32)
		}
		return x
	case float64:
		if !pgtext.Finite(x) {
			return pgtext.Float(x, 64)
		}
		return x
	case time.Time:
		if oid == pgtext.OIDDate || !pgtext.InRFC3339(x) {
			return pgtext.Time(oid, x)
		}
		return x
	case pgtype.Numeric:
		switch {
		case x.NaN:
			return "NaN"
		case x.InfinityModifier == pgtype.Infinity:
			return "Infinity"
		case x.InfinityModifier == pgtype.NegativeInfinity:
			return "-Infinity"
		}
		if b, err := x.MarshalJSON(); err == nil {
			return json.RawMessage(b)
		}
	case [16]byte:
		return fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:16])
	case pgtype.Interval:
		if x.Valid {
			return pgtext.Interval(x)
		}
		return nil
	case pgtype.Time:
		if x.Valid {
			return pgtext.Clock(x.Microseconds)
		}
		return nil
	case netip.Prefix:
		return pgtext.Inet(oid, x)
	case map[string]any:
		// json and jsonb: JSON already, and encoding/json gives their
		// numbers back as float64, always finite.
		return x
	case []any:
		// An array: its elements by the same rules (their type is not
		// known here; a date element keeps its RFC 3339 form).
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(0, e)
		}
		return out
	case []byte:
		return x
	case driver.Valuer:
		// pgtype's other types (bit strings, geometric types, ranges) give
		// their text form as their driver value.
		if dv, err := x.Value(); err == nil {
			switch t := dv.(type) {
			case string:
				return t
			case []byte:
				return string(t)
			case nil:
				return nil
			}
		}
	}
	return fmt.Sprint(v)
}

// Receipt reports whether a marque's receipt exists in the target, and the
// rows it affected: the proof that it committed. A void receipt
// (VoidReceipt) proves the opposite: it never ran.
func (p *Pilot) Receipt(ctx context.Context, marqueID string) (bool, int64, error) {
	var rows *int64
	var void bool
	err := p.pool.QueryRow(ctx, `SELECT rows_affected, void FROM harbormaster.receipts WHERE marque_id = $1`, marqueID).Scan(&rows, &void)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && void {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("pilot: receipt: %w", err)
	}
	if rows == nil {
		return true, 0, nil
	}
	return true, *rows, nil
}

// XactStatus is pg_xact_status of a transaction id: "committed",
// "aborted", "in progress", or "" when too old to know.
func (p *Pilot) XactStatus(ctx context.Context, txid string) (string, error) {
	var st *string
	if err := p.pool.QueryRow(ctx, `SELECT pg_xact_status($1::text::xid8)`, txid).Scan(&st); err != nil {
		return "", fmt.Errorf("pilot: xact status: %w", err)
	}
	if st == nil {
		return "", nil
	}
	return *st, nil
}

// ReceiptFloor is the youngest receipt PruneReceipts removes, whatever it
// is asked: a receipt is what makes its marque single-use, and a marque
// lives minutes; a day keeps every receipt a marque could still need.
const ReceiptFloor = 24 * time.Hour

// pruneReceiptsBatch is how many receipts one statement of
// PruneReceipts deletes.
const pruneReceiptsBatch = 10_000

// PruneReceipts deletes the receipts of this target's statements executed
// before `before` (by the target's clock), and never one younger than
// ReceiptFloor, in batches; it returns how many it deleted. (A database
// that several control planes use as a target under one name shares one
// receipts table: give each its own target name, or turn retention off
// on all but one.) The caller
// (retention, ledger.Ledger.Prune) passes a time before every request
// still open, whose receipt reconciliation may yet read.
func (p *Pilot) PruneReceipts(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		tag, err := p.pool.Exec(ctx, `DELETE FROM harbormaster.receipts WHERE marque_id IN (
			SELECT marque_id FROM harbormaster.receipts
			WHERE target = $4 AND executed_at < least($1::timestamptz, now() - $2::interval) LIMIT $3)`,
			before, fmt.Sprintf("%d microseconds", ReceiptFloor.Microseconds()), pruneReceiptsBatch, p.cfg.Target)
		if err != nil {
			return total, fmt.Errorf("pilot: prune receipts: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneReceiptsBatch {
			return total, nil
		}
	}
}
