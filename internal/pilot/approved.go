package pilot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Rehearsal is the evidence a rehearsal collects: what the statement would
// do, from a run that was rolled back. It is evidence, never authority.
type Rehearsal struct {
	Kind string `json:"kind"`
	// RowsReached is the rows the statement would affect (writes) or
	// return (reads, counted up to 10,000).
	RowsReached int64 `json:"rows_reached"`
	// Before and After are row images (at most MaxImageRows each): the rows
	// an UPDATE or DELETE reaches before, and the rows an UPDATE or INSERT
	// leaves after. Values are untrusted data.
	Before          []map[string]any `json:"before"`
	After           []map[string]any `json:"after"`
	ImagesTruncated bool             `json:"images_truncated"`
	ExecutedSQL     string           `json:"executed_sql"`
	// BeforeDigest, for a rehearsal inside a bound (Rehearse), is the
	// digest of every before image (up to max_rows+1): the statement then
	// runs only if it reaches exactly those rows.
	BeforeDigest string `json:"before_digest,omitempty"`
	// AfterDigest, for a rehearsal inside a bound of an UPDATE or INSERT,
	// is the digest of the columns the statement writes in every after
	// image (AfterDigest): the statement then runs only if it writes
	// exactly those values, so a value that depends on the clock or on
	// chance (now(), gen_random_uuid()) cannot differ from what the panel
	// was shown.
	AfterDigest string `json:"after_digest,omitempty"`
}

// AfterDigest is the digest of the written columns of after images,
// independent of the order the rows came back in.
func AfterDigest(images []map[string]any, written []string) string {
	rows := make([]string, 0, len(images))
	for _, img := range images {
		w := make(map[string]any, len(written))
		for _, c := range written {
			w[c] = img[c]
		}
		b, _ := json.Marshal(w)
		rows = append(rows, string(b))
	}
	sort.Strings(rows)
	js, _ := json.Marshal(rows)
	return Digest(js)
}

// PanelReport is what the Surveyor's panel is shown of a rehearsal: the
// rows it reaches, before and after. Values are untrusted data.
func (r *Rehearsal) PanelReport() []byte {
	b, _ := json.Marshal(map[string]any{"rows_reached": r.RowsReached, "before": nonNil(r.Before), "after": nonNil(r.After)})
	return b
}

func nonNil(r []map[string]any) []map[string]any {
	if r == nil {
		return []map[string]any{}
	}
	return r
}

// Digest is the hex SHA-256 of the report's JSON, the value an approval signs.
func Digest(report []byte) string {
	sum := sha256.Sum256(report)
	return hex.EncodeToString(sum[:])
}

// analyzeRaw parses sql and accepts it for the approval path only when the
// static check found nothing structurally wrong: one SELECT, INSERT, UPDATE
// or DELETE over known tables, allow-listed functions only. Coverage by a
// delegation is not required: that is what the human approves.
func (p *Pilot) analyzeRaw(sql string) (*sqlcheck.Analysis, error) {
	a := sqlcheck.Analyze(sql, p.Catalog(), sqlcheck.Limits{})
	if a.Facts == nil || a.Facts.Kind == "" || len(a.Reasons) > 0 {
		why := "it did not parse"
		if len(a.Reasons) > 0 {
			why = a.Reasons[0].Message
		}
		return nil, fmt.Errorf("%w: %s", ErrNotPreviewable, why)
	}
	return a, nil
}

type imageSet struct {
	rows []map[string]any
	more bool
}

func images(ctx context.Context, tx querier, sql string, max int) (imageSet, error) {
	rows, err := tx.Query(ctx, sql)
	if err != nil {
		return imageSet{}, err
	}
	defer rows.Close()
	var s imageSet
	for rows.Next() {
		var img map[string]any
		if err := rows.Scan(&img); err != nil {
			return imageSet{}, err
		}
		if len(s.rows) >= max {
			s.more = true
			break
		}
		s.rows = append(s.rows, img)
	}
	return s, rows.Err()
}

func deparse(stmt *pg.Node) (string, error) {
	return pg.Deparse(&pg.ParseResult{Version: sqlcheck.ParserVersion, Stmts: []*pg.RawStmt{{Stmt: stmt}}})
}

// toJSONB is to_jsonb(alias.*), the whole row; with cols, only those
// columns: jsonb_build_object('c1', alias.c1, ...).
func toJSONB(alias string, cols []string) *pg.Node {
	if cols == nil {
		return pg.MakeFuncCallNode([]*pg.Node{pg.MakeStrNode("to_jsonb")},
			[]*pg.Node{pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(alias), pg.MakeAStarNode()}, -1)}, -1)
	}
	var args []*pg.Node
	for _, c := range cols {
		args = append(args, pg.MakeAConstStrNode(c, -1), pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(alias), pg.MakeStrNode(c)}, -1))
	}
	return pg.MakeFuncCallNode([]*pg.Node{pg.MakeStrNode("jsonb_build_object")}, args, -1)
}

func relAlias(rv *pg.RangeVar) string {
	if rv.Alias != nil && rv.Alias.Aliasname != "" {
		return rv.Alias.Aliasname
	}
	return rv.Relname
}

// beforeImageQuery turns an UPDATE or DELETE into the SELECT of the rows it
// reaches, as to_jsonb images, built on the tree.
func beforeImageQuery(stmt *pg.Node, limit int, cols []string) (bool, string, error) {
	var rel *pg.RangeVar
	var from []*pg.Node
	var where *pg.Node
	var with *pg.WithClause
	switch s := stmt.GetNode().(type) {
	case *pg.Node_UpdateStmt:
		rel, from, where, with = s.UpdateStmt.Relation, s.UpdateStmt.FromClause, s.UpdateStmt.WhereClause, s.UpdateStmt.WithClause
	case *pg.Node_DeleteStmt:
		rel, from, where, with = s.DeleteStmt.Relation, s.DeleteStmt.UsingClause, s.DeleteStmt.WhereClause, s.DeleteStmt.WithClause
	default:
		return false, "", nil
	}
	sel := &pg.SelectStmt{
		TargetList:  []*pg.Node{pg.MakeResTargetNodeWithVal(toJSONB(relAlias(rel), cols), -1)},
		FromClause:  []*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: proto.Clone(rel).(*pg.RangeVar)}}},
		LimitCount:  pg.MakeAConstIntNode(int64(limit), -1),
		LimitOption: pg.LimitOption_LIMIT_OPTION_COUNT,
		Op:          pg.SetOperation_SETOP_NONE,
	}
	for _, f := range from {
		sel.FromClause = append(sel.FromClause, proto.Clone(f).(*pg.Node))
	}
	if where != nil {
		sel.WhereClause = proto.Clone(where).(*pg.Node)
	}
	if with != nil {
		sel.WithClause = proto.Clone(with).(*pg.WithClause)
	}
	text, err := deparse(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sel}})
	return err == nil, text, err
}

// afterImageColumn appends RETURNING to_jsonb(alias.*) to an UPDATE or
// INSERT, as the last column (only cols, when given).
func afterImageColumn(stmt *pg.Node, cols []string) (string, bool) {
	switch s := stmt.GetNode().(type) {
	case *pg.Node_UpdateStmt:
		a := relAlias(s.UpdateStmt.Relation)
		s.UpdateStmt.ReturningList = append(s.UpdateStmt.ReturningList, pg.MakeResTargetNodeWithNameAndVal(GuardColumn, toJSONB(a, cols), -1))
		return a, true
	case *pg.Node_InsertStmt:
		a := relAlias(s.InsertStmt.Relation)
		s.InsertStmt.ReturningList = append(s.InsertStmt.ReturningList, pg.MakeResTargetNodeWithNameAndVal(GuardColumn, toJSONB(a, cols), -1))
		return a, true
	}
	return "", false
}

// querier runs statements in a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ApprovedRequest is an approved statement to execute.
type ApprovedRequest struct {
	Marque string
	SQL    string
	// Approval is the signed canonical approval bytes.
	Approval []byte
}

// ExecuteApproved runs a statement a human approved: it verifies the
// marque, the approver's signature over the approval with the signers
// file, that the approval names this request, target and statement and
// has not expired. Then, in one REPEATABLE READ snapshot, it computes the
// statement's preview again and runs the statement only if the preview's
// digest is the one the approval signed, and commits only if the
// statement reached exactly the preview's count of rows and wrote exactly
// its values (an UPDATE's or INSERT's values known before it runs, a
// DELETE's whole rows). Anything else rolls back as a drift refusal: the
// approver was shown something else (a row the statement's subquery reads
// changed, another session wrote one of its rows), and the request goes
// back to the queue for a fresh preview.
func (p *Pilot) ExecuteApproved(ctx context.Context, req ApprovedRequest) (*Result, error) {
	now := p.cfg.Clock()
	claims, err := p.verifier.Verify(req.Marque, marque.Expect{Target: p.cfg.Target, StatementHash: marque.StatementHash(req.SQL)})
	if err != nil {
		return refused(RefusedMarque, "the marque is not valid: %v", err), nil
	}
	if claims.Path != marque.PathApproved || claims.Auth.Kind != marque.AuthApproval || claims.MaxRows == nil {
		return refused(RefusedMarque, "not an approval marque"), nil
	}
	sum := sha256.Sum256(req.Approval)
	if hex.EncodeToString(sum[:]) != claims.Auth.ApprovalSHA256 {
		return refused(RefusedSignature, "the approval bytes do not match the marque"), nil
	}
	signer, err := p.signers.Verify(req.Approval, []byte(claims.Auth.Signature), signing.NamespaceApproval, p.cfg.Target, now)
	if err != nil {
		return refused(RefusedSignature, "the approver's signature does not verify: %v", err), nil
	}
	if signer.Name != claims.Auth.Signer {
		return refused(RefusedSignature, "the approval was signed by %s, not %s", signer.Name, claims.Auth.Signer), nil
	}
	ap, err := acts.ParseApproval(req.Approval)
	if err != nil {
		return refused(RefusedSignature, "%v", err), nil
	}
	switch {
	case ap.RequestID != claims.RequestID, ap.Target != p.cfg.Target, ap.StatementSHA256 != claims.StatementHash:
		return refused(RefusedSignature, "the approval is for another request, target or statement"), nil
	case !now.Before(ap.ExpiresAt()):
		return refused(RefusedSignature, "the approval expired at %s", ap.Expires), nil
	case ap.MaxRows != *claims.MaxRows:
		return refused(RefusedSignature, "the marque's row guard differs from the approval's"), nil
	}
	a, err := p.analyzeRaw(req.SQL)
	if err != nil {
		return refused(RefusedCheck, "%v", err), nil
	}
	plan, err := buildPreview(a, p.Catalog())
	if err != nil {
		return refused(RefusedCheck, "%v", err), nil
	}
	g, err := approvedGuards(a, plan, ap.MaxRows)
	if err != nil {
		return refused(RefusedCheck, "%v", err), nil
	}
	return p.runApproved(ctx, &claims, g, plan, ap.PreviewSHA256)
}

// approvedGuards is an approved statement as it runs: a read capped at the
// preview's count (one more marks a change), a write returning, as its
// last column, the image execution compares with the preview: an UPDATE's
// or INSERT's values known before it runs, a DELETE's whole row.
func approvedGuards(a *sqlcheck.Analysis, plan *previewPlan, maxRows int64) (*Guarded, error) {
	stmt := a.Stmt()
	g := &Guarded{Kind: a.Facts.Kind, MaxRows: maxRows}
	image := func(rel *pg.RangeVar) *pg.Node {
		alias := relAlias(rel)
		if g.Kind == sqlcheck.OpDelete {
			return toJSONB(alias, nil)
		}
		var pairs []pair
		for _, c := range plan.compared {
			pairs = append(pairs, pair{c, pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(alias), pg.MakeStrNode(c)}, -1)})
		}
		return object(pairs)
	}
	var returning *[]*pg.Node
	var rel *pg.RangeVar
	switch s := stmt.GetNode().(type) {
	case *pg.Node_SelectStmt:
		g.Returning = true
		limitRows(s.SelectStmt, maxRows+1)
	case *pg.Node_UpdateStmt:
		returning, rel = &s.UpdateStmt.ReturningList, s.UpdateStmt.Relation
	case *pg.Node_DeleteStmt:
		returning, rel = &s.DeleteStmt.ReturningList, s.DeleteStmt.Relation
	case *pg.Node_InsertStmt:
		returning, rel = &s.InsertStmt.ReturningList, s.InsertStmt.Relation
	}
	var err error
	if returning != nil {
		g.Returning = len(*returning) > 0
		// The row cap stops the write as it writes one row more than its
		// preview reached (issue 22): a run that would reach more, on a
		// value that changed at run time, draws no more than one sequence
		// value and writes no more than one row past it before it rolls
		// back.
		g.Hidden = AddRowCap(stmt, maxRows)
		if g.SQL, err = deparse(stmt); err != nil {
			return nil, err
		}
		*returning = append(*returning, pg.MakeResTargetNodeWithNameAndVal(GuardColumn, asJSONB(image(rel)), -1))
		if g.ImageSQL, err = deparse(stmt); err != nil {
			return nil, err
		}
		return g, nil
	}
	g.SQL, err = deparse(stmt)
	return g, err
}

// runApproved runs an approved statement in one snapshot with its receipt,
// and commits only if it does what its preview showed (ExecuteApproved).
func (p *Pilot) runApproved(ctx context.Context, claims *marque.Claims, g *Guarded, plan *previewPlan, want string) (*Result, error) {
	t, err := p.beginAt(ctx, true, true)
	if err != nil {
		return nil, err
	}
	defer t.Close() // rolls back unless committed
	b := &pgx.Batch{}
	b.Queue(stmtReceipt, claims.ID, claims.RequestID, claims.Principal, claims.Target, claims.StatementHash, claims.Path)
	if p.cfg.Role != "" {
		b.Queue(`SELECT set_config('role', $1, true)`, p.cfg.Role)
	}
	br := t.conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		if isUniqueViolation(err) {
			return refused(RefusedReplay, "marque %s was already executed", claims.ID), nil
		}
		return nil, fmt.Errorf("pilot: receipt: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("pilot: session settings: %w", err)
	}
	drift := func(detail string) *Result {
		r := refused(RefusedDrift, MessageApprovalDrift)
		r.Detail = detail
		return r
	}
	pv, err := plan.run(ctx, t.conn, 0)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || errors.Is(err, ErrNotPreviewable) {
			return drift("its preview could not be computed again: " + err.Error()), nil
		}
		return nil, err
	}
	switch {
	case pv.TooMany:
		return drift(fmt.Sprintf("it now reaches more than %d rows", MaxPreviewRows)), nil
	case pv.Digest != want:
		return drift(fmt.Sprintf("its preview differs from the one the approval signed (it now reaches %d rows)", pv.Rows)), nil
	}
	withImages := g.ImageSQL != ""
	rows, err := t.conn.Query(ctx, g.text(withImages))
	var out stmtResult
	if err == nil {
		out, err = p.statement(rows, g, withImages)
	}
	if err != nil {
		p.forgetViews(err)
		if isSerializationFailure(err) {
			// Another session changed a row it reaches after its snapshot
			// was taken: nothing ran, and the row is not the one shown.
			return drift("another session changed a row it reaches while it ran"), nil
		}
		res, err := statementRefusal(err)
		if res != nil && res.Code == RefusedMaxRows {
			return drift(fmt.Sprintf("it reaches more rows than its preview (%d)", pv.Rows)), nil
		}
		return res, err
	}
	if out.n != pv.Rows {
		return drift(fmt.Sprintf("it affects %d rows, its preview %d", out.n, pv.Rows)), nil
	}
	if withImages && multisetDigest(out.images) != pv.written {
		return drift("it writes other values than its preview showed"), nil
	}
	res := &Result{Outcome: Executed, ExecutedSQL: g.SQL, MarqueID: claims.ID, TxID: t.id, RowsAffected: out.n}
	if g.Returning {
		res.Columns, res.Rows, res.Truncated = out.cols, out.rows, out.truncated
	}
	// From here the outcome must not hang on the caller's context.
	if err := p.commit(context.WithoutCancel(ctx), t, claims.ID, g, out.n); err != nil {
		return nil, err
	}
	return res, nil
}

// isSerializationFailure is PostgreSQL's "could not serialize access"
// (40001): in the approved statement's REPEATABLE READ snapshot, another
// session updated or deleted a row it reaches after the snapshot was
// taken.
func isSerializationFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40001"
}
