package pilot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Remembered shapes and one round trip (DESIGN.md section 6, "Shapes and
// templates"). A compiled statement's shape is checked against the bound
// and turned into a guarded template once; the template is prepared once
// per connection, with the statement's constants as parameters each of
// its literal's own type, and a later statement of the same shape binds
// its own constants, read from the canonical text the marque names, never
// from anything the agent sent. A write runs folded (fold.go): the
// guarded statement, its exact count against max_rows, the check and the
// receipt's insert in one statement, the one message of its exchange; a
// read writes its receipt (unless it was authorized in this process by
// Authority.AuthorizeRead), turns read-only and runs, in one pipeline.
// Either way the statement and COMMIT are
// one round trip: the messages run in one implicit transaction that the
// closing Sync commits.
//
// What has no template takes the literal path (run): a statement without
// an exact shape, a shape whose template does not rebuild its canonical
// text, a write under a configured Role (the receipt is not the role's to
// write), a template the target will not prepare, the surveyed path, and
// rehearsals.

// template is one shape's guarded template against one bound.
type template struct {
	tpl *sqlcheck.Template
	g   *Guarded
	// text is what is prepared: the folded write, or the guarded read.
	text string
	name string
	// broken is set when the target would not prepare the text: the
	// shape's statements take the literal path from then on.
	broken atomic.Bool
	// genText and genName are the folded write asking the catalog
	// generation instead of its foreign key question (cascade.go), when
	// the target has the counter and the write a question; gen is the
	// generation at which the question was last answered "no", and when
	// that was learned (nil: learn it).
	genText, genName string
	gen              atomic.Pointer[learned]
}

// learned is a template's catalog generation (noGeneration: the question
// was answered "yes", the trigger is not armed, or it could not be
// asked), as of at.
type learned struct {
	n  string
	at time.Time
}

// noGeneration is never a generation: the write asks its question itself.
const noGeneration = ""

// generationTTL is how long a learned generation is used before it is
// learned again, and how long a "yes", an unarmed trigger or a failure to
// ask keeps the template's writes asking the question themselves.
var generationTTL = time.Second

// generation returns the catalog generation t's write passes: the one
// learned, learned again on conn when it is older than generationTTL or
// a write found the counter moved. noGeneration when the question says
// yes or could not be asked.
func (p *Pilot) generation(ctx context.Context, conn *pgxpool.Conn, t *template) string {
	now := time.Now()
	if l := t.gen.Load(); l != nil && now.Sub(l.at) < generationTTL {
		return l.n
	}
	n, clean := noGeneration, false
	if err := conn.QueryRow(ctx, generationSQL(t.g.CascadeSQL)).Scan(&n, &clean); err != nil || !clean {
		n = noGeneration
	}
	t.gen.Store(&learned{n: n, at: now})
	return n
}

// maxPreparedPerConn bounds the templates prepared on one connection;
// past it they are deallocated and prepared again as used.
const maxPreparedPerConn = 256

// connPrepared is what one connection has prepared. A pooled connection
// is used by one goroutine at a time, so it needs no lock of its own.
type connPrepared struct{ names map[string]bool }

// shapeState is what the Pilot keeps of its templates beside its check
// cache (Pilot.checks, which holds each bound's template of a shape by
// the shape's analysis, baked constants' values included, and the
// bound's hash).
type shapeState struct {
	prepared sync.Map // *pgx.Conn -> *connPrepared

	templated, literal atomic.Int64
}

// Stats counts the marques this Pilot ran through a template in one
// round trip, and on the literal path.
type Stats struct {
	Templated int64 `json:"templated"`
	Literal   int64 `json:"literal"`
}

// Stats returns the counts so far.
func (p *Pilot) Stats() Stats {
	return Stats{Templated: p.shapes.templated.Load(), Literal: p.shapes.literal.Load()}
}

// initShapes forgets a connection's prepared templates when the pool
// closes it.
func (p *Pilot) initShapes(pc *pgxpool.Config) {
	prev := pc.BeforeClose
	pc.BeforeClose = func(c *pgx.Conn) {
		p.shapes.prepared.Delete(c)
		if prev != nil {
			prev(c)
		}
	}
}

// shaped returns the template for a compiled statement against pb, built
// on the first statement of its shape; nil when it has none. A statement
// the Pilot's own check refuses is a Result.
func (p *Pilot) shaped(sql string, pb *parsedBound, path string) (*template, *sqlcheck.Shape, *Result) {
	if path != marque.PathCompiled {
		return nil, nil, nil
	}
	s, ok := sqlcheck.ShapeOf(sql, sqlcheck.Limits{})
	if !ok {
		return nil, nil, nil
	}
	cat := p.scope(pb)
	r := p.checks.AnalyzeShape(sql, s, cat)
	if t, ok := p.checks.Value(r.Key, pb.id); ok {
		return t, s, nil
	}
	if r.Template == nil || len(r.Reasons) > 0 {
		// No template, or reasons: the literal path, unless the check
		// refuses.
		_, res := p.check(r.Analysis, pb, path)
		return nil, nil, res
	}
	// The template is guarded on a tree of its own: the cache keeps the
	// facts of the tree it analyzed, which Parameterize would change.
	a := sqlcheck.Analyze(sql, cat, sqlcheck.Limits{})
	d, res := p.check(a, pb, path)
	if res != nil {
		return nil, nil, res
	}
	if len(a.Reasons) > 0 || a.Facts == nil || a.Facts.Kind != sqlcheck.OpSelect && p.cfg.Role != "" {
		return nil, nil, nil
	}
	tpl, err := sqlcheck.NewTemplate(a, s)
	if err != nil {
		return nil, nil, nil
	}
	tpl.Parameterize()
	opts := []GuardOption{WithExprCache(&p.exprs)}
	if a.Facts.Kind != sqlcheck.OpSelect {
		opts = append(opts, WithFold(tpl.NumParams()))
		if p.hasGeneration {
			opts = append(opts, WithGeneration())
		}
	}
	g, err := BuildGuards(a, d, pb.b, cat, opts...)
	if err != nil {
		return nil, nil, refused(RefusedCheck, "%v", err)
	}
	t := &template{tpl: tpl, g: g, text: g.SQL}
	if g.Kind != sqlcheck.OpSelect {
		t.text = g.FoldedSQL
	}
	t.name = templateName(t.text)
	if g.FoldedGenerationSQL != "" {
		t.genText = g.FoldedGenerationSQL
		t.genName = templateName(t.genText)
	}
	p.checks.Put(r.Key, pb.id, t)
	return t, s, nil
}

// templateName is the name a template's text is prepared under.
func templateName(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "harbormaster_t_" + hex.EncodeToString(sum[:16])
}

// prepare makes sure conn has t's text (or its variant: name, text)
// prepared. A refusal by the target marks the template broken (err is
// then a *pgconn.PgError).
func (p *Pilot) prepare(ctx context.Context, conn *pgxpool.Conn, t *template, name, text string) error {
	c := conn.Conn()
	v, _ := p.shapes.prepared.LoadOrStore(c, &connPrepared{names: map[string]bool{}})
	cp := v.(*connPrepared)
	if cp.names[name] {
		return nil
	}
	if len(cp.names) >= maxPreparedPerConn {
		for name := range cp.names {
			if err := c.Deallocate(ctx, name); err != nil {
				return fmt.Errorf("pilot: deallocate: %w", err)
			}
		}
		clear(cp.names)
	}
	if _, err := c.Prepare(ctx, name, text); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			t.broken.Store(true)
			p.cfg.Logger.Warn("a template the target will not prepare takes the literal path",
				"template", name, "sqlstate", pgErr.Code, "err", pgErr.Message)
		}
		return err
	}
	cp.names[name] = true
	return nil
}

// runShaped runs a compiled statement through its template in one round
// trip. ok is false when the template cannot run here (the target would
// not prepare it): nothing ran, and the caller takes the literal path.
func (p *Pilot) runShaped(ctx context.Context, claims *marque.Claims, t *template, s *sqlcheck.Shape, receiptless bool) (res *Result, ok bool, err error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, true, fmt.Errorf("pilot: acquire: %w: %w", ErrUnreachable, err)
	}
	// A connection left busy or inside a transaction is destroyed, not
	// reused (pgxpool checks on release).
	defer conn.Release()
	g := t.g
	if err := p.ensureViews(ctx, g.Views); err != nil {
		return nil, true, err
	}
	args := t.tpl.Args(s)
	// A write asks the catalog generation in place of its foreign key
	// question while the question's last answer, "no", holds.
	name, text, gen := t.name, t.text, noGeneration
	if t.genName != "" {
		if gen = p.generation(ctx, conn, t); gen != noGeneration {
			name, text = t.genName, t.genText
		}
	}
	if err := p.prepare(ctx, conn, t, name, text); err != nil {
		if t.broken.Load() {
			return nil, false, nil
		}
		return nil, true, err
	}
	receipt := []any{claims.ID, claims.RequestID, claims.Principal, claims.Target, claims.StatementHash, claims.Path}
	b := &pgx.Batch{}
	read := g.Kind == sqlcheck.OpSelect
	if read {
		if !receiptless {
			b.Queue(stmtReceipt, receipt...)
		}
		b.Queue(stmtPinRead)
		if p.cfg.Role != "" {
			b.Queue(`SELECT set_config('role', $1, true)`, p.cfg.Role)
		}
		b.Queue(name, args...)
	} else {
		// One message: the session's settings are the pinned ones
		// (afterConnect; the literal path pins its own transaction-locally,
		// which ends with it).
		args := append(args, receipt...)
		if name == t.genName {
			args = append(args, gen)
		}
		b.Queue(name, args...)
	}
	// The statement and its COMMIT are one exchange: its outcome must not
	// hang on the caller's context (a cancelled exchange is one whose
	// outcome nobody knows); the target's statement_timeout bounds it, and
	// this deadline a target that stops answering.
	xctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.StatementTimeout+p.cfg.LockTimeout+5*time.Second)
	defer cancel()
	res = &Result{Outcome: Executed, ExecutedSQL: text, ExecutedArgs: args, MarqueID: claims.ID}
	br := conn.SendBatch(xctx, b)
	var out stmtResult
	for i := 0; i < b.Len()-1 && err == nil; i++ {
		_, err = br.Exec()
	}
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			out, err = p.foldedResult(rows, g, read)
		}
	}
	cerr := br.Close()
	if err == nil {
		err = cerr
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || fatal(pgErr) {
			// Sync was sent: the transaction may have committed. Only the
			// receipt can tell (reconciliation).
			return nil, true, fmt.Errorf("pilot: execute: %w: %w", ErrCommitUnknown, err)
		}
		// The target refused: the implicit transaction rolled back whole.
		// A folded write meets its receipt's key only after its guards ran,
		// so a replay can raise a guard first: a receipt under the marque
		// id says which it was.
		if isReceiptConflict(pgErr) || !read && p.hasReceipt(ctx, claims.ID) {
			return refused(RefusedReplay, "marque %s was already executed", claims.ID), true, nil
		}
		if isViolation(pgErr, generationReason) {
			// The catalog changed since the template learned its
			// generation: nothing ran. The literal path asks the foreign
			// key question, and the template learns again.
			t.gen.Store(nil)
			return nil, false, nil
		}
		if stalePlan(pgErr) {
			// A table the template reads changed its columns' types since the
			// connection prepared it: nothing ran. The connection forgets
			// it, and this statement takes the literal path.
			p.unprepare(conn, name)
			return nil, false, nil
		}
		p.forgetViews(err)
		res, err := statementRefusal(err)
		return res, true, err
	}
	res.RowsAffected = out.n
	if g.Returning || read {
		res.Columns, res.Rows, res.Truncated = out.cols, out.rows, out.truncated
	}
	return res, true, nil
}

// foldedResult reads a template's rows: a read's or a RETURNING write's
// as the literal path does; a folded write without RETURNING returns one
// row, its count.
func (p *Pilot) foldedResult(rows pgx.Rows, g *Guarded, read bool) (stmtResult, error) {
	if read || g.Returning {
		return p.statement(rows, g, false)
	}
	defer rows.Close()
	var out stmtResult
	if !rows.Next() {
		rows.Close()
		if err := rows.Err(); err != nil {
			return out, err
		}
		return out, errors.New("pilot: the folded write returned no count")
	}
	if err := rows.Scan(&out.n); err != nil {
		return out, err
	}
	rows.Close()
	return out, rows.Err()
}

// hasReceipt reports a receipt (or a void one) under the marque id; false
// when it cannot tell.
func (p *Pilot) hasReceipt(ctx context.Context, marqueID string) bool {
	var one int
	err := p.pool.QueryRow(context.WithoutCancel(ctx), `SELECT 1 FROM harbormaster.receipts WHERE marque_id = $1`, marqueID).Scan(&one)
	return err == nil
}

// stalePlan is PostgreSQL refusing a prepared statement whose result
// type a schema change altered.
func stalePlan(e *pgconn.PgError) bool {
	return e.Code == "0A000" && strings.Contains(e.Message, "cached plan must not change result type")
}

// unprepare deallocates t on conn; a connection that cannot is closed, so
// the pool opens a fresh one.
func (p *Pilot) unprepare(conn *pgxpool.Conn, name string) {
	c := conn.Conn()
	if v, ok := p.shapes.prepared.Load(c); ok {
		delete(v.(*connPrepared).names, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Deallocate(ctx, name); err != nil {
		_ = c.Close(ctx)
	}
}

// isReceiptConflict is a unique violation of the receipts' primary key:
// the marque was executed (or voided) before. A unique violation of the
// agent's own table is the target's refusal, not a replay.
func isReceiptConflict(e *pgconn.PgError) bool {
	return e.Code == "23505" && e.SchemaName == "harbormaster" && e.TableName == "receipts"
}

// VoidReceipt settles a marque whose outcome nobody recorded (DESIGN.md
// section 6): it inserts a void receipt under the marque's id. The insert
// waits for any transaction still holding that key; a unique violation
// means the statement committed (executed is true, with its rows), and a
// success burns the marque, so it can never run. Either answer is final.
func (p *Pilot) VoidReceipt(ctx context.Context, marqueID, requestID, principal string) (executed bool, rows int64, err error) {
	_, err = p.pool.Exec(ctx, stmtVoid, marqueID, requestID, principal, p.cfg.Target)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return false, 0, nil
	case errors.As(err, &pgErr) && isReceiptConflict(pgErr):
		found, n, err := p.Receipt(ctx, marqueID)
		if err != nil {
			return false, 0, err
		}
		if !found {
			// Voided before: it never ran.
			return false, 0, nil
		}
		return true, n, nil
	default:
		return false, 0, fmt.Errorf("pilot: void receipt: %w", err)
	}
}

// TemplateOf is what this Pilot runs for a compiled statement (its
// canonical text) under a bound (its canonical bytes) on the
// one-round-trip path: the template's text and the values bound to the
// statement's own parameters. ok is false when the statement would take
// the literal path. It verifies no signature and runs nothing: it is for
// explaining, never for authority.
func (p *Pilot) TemplateOf(sql string, canonicalBound []byte) (text string, args []any, ok bool) {
	pb, err := p.parseBound(canonicalBound, sha256.Sum256(canonicalBound))
	if err != nil {
		return "", nil, false
	}
	t, s, res := p.shaped(sql, pb, marque.PathCompiled)
	if res != nil || t == nil || t.broken.Load() {
		return "", nil, false
	}
	return t.text, t.tpl.Args(s), true
}
