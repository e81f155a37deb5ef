package pilot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Fences are real barriers (DESIGN.md invariant 10, section 6 step 3).
//
// A fence written into the statement as a plain subquery, (SELECT * FROM t
// WHERE fence) AS t, is no barrier: the planner flattens the subquery and
// orders every qual by cost, so a predicate of the agent's that raises on
// some inputs (a cast, a division, a regular expression) runs on rows
// outside the fence first, and whether the statement fails tells the agent
// something about those rows. PostgreSQL's own answer is the
// security-barrier view: its quals are evaluated before any qual from the
// query above it, and only leakproof operators (=, <, > on the ordinary
// types) are pushed below it, so an index still serves id = 3.
//
// Row-level security would give the same ordering but changes the table
// for every user of the database (ENABLE ROW LEVEL SECURITY, policies that
// would have to name the Pilot's role, owners bypassing it unless FORCE),
// and its policies are per table, not per delegation rule. A view is the
// Pilot's own object: one per (table, fence, columns), named from the hash
// of its definition, created once in the harbormaster schema, shared by
// every Pilot of the target and by every delegation with the same fence.
// It is a security_invoker view, so the table's privileges are checked
// for whoever reads it (the configured least-privilege role), never the
// view's owner. It is auto-updatable, so UPDATE and DELETE reach their
// target through it too.

// ViewSchema holds the Pilot's fence views.
const ViewSchema = "harbormaster"

// viewPrefix starts every fence view's name; harbormaster.drop_fence_views()
// drops exactly these.
const viewPrefix = "fence_"

// FenceView is one security-barrier view of a fenced table.
type FenceView struct {
	// Name is the view's name in ViewSchema: fence_ and 32 hex digits of
	// the SHA-256 of Create.
	Name string
	// Create is the CREATE VIEW statement.
	Create string
}

type viewKey struct {
	cat   *sqlcheck.Catalog
	table sqlcheck.TableName
	expr  string
	inh   bool
}

// view returns the fence view of expr over table t (with its inheritance
// children unless inh is false), remembered per catalog.
func (c *ExprCache) view(expr string, t sqlcheck.TableName, inh bool, cat *sqlcheck.Catalog) (FenceView, error) {
	k := viewKey{cat, t, expr, inh}
	if c != nil {
		c.mu.Lock()
		v, ok := c.views[k]
		c.mu.Unlock()
		if ok {
			return v, nil
		}
	}
	tbl, ok := cat.Table(t)
	if !ok {
		return FenceView{}, fmt.Errorf("%w: table %s left the catalog", ErrGuard, t)
	}
	node, err := c.compile(expr, tbl, cat)
	if err != nil {
		return FenceView{}, err
	}
	v, err := buildView(tbl, node, inh)
	if err != nil {
		return FenceView{}, err
	}
	if c != nil {
		c.mu.Lock()
		if c.views == nil || len(c.views) >= maxCachedExprs {
			c.views = map[viewKey]FenceView{}
		}
		c.views[k] = v
		c.mu.Unlock()
	}
	return v, nil
}

// buildView writes the view's definition from the tree: SELECT the
// table's columns, as the Pilot's catalog lists them, FROM the table WHERE
// the fence. The columns are named, never *: a column added to the table
// after the catalog was read is not in a view created later either, so no
// *, t.* or whole-row reference through it reads a column the check never
// saw (invariant 10). Its name hashes the definition and the table's
// columns as the catalog has them, so a changed table gets a new view.
func buildView(tbl *sqlcheck.Table, fence *pg.Node, inh bool) (FenceView, error) {
	if len(tbl.Columns) == 0 {
		return FenceView{}, fmt.Errorf("%w: table %s has no columns in the catalog", ErrGuard, tbl.Name)
	}
	sel := &pg.SelectStmt{
		TargetList:  columnTargets("", tbl.Columns),
		FromClause:  []*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: &pg.RangeVar{Schemaname: tbl.Name.Schema, Relname: tbl.Name.Name, Inh: inh, Relpersistence: "p"}}}},
		WhereClause: fence,
		LimitOption: pg.LimitOption_LIMIT_OPTION_DEFAULT,
		Op:          pg.SetOperation_SETOP_NONE,
	}
	body, err := deparse(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sel}})
	if err != nil {
		return FenceView{}, fmt.Errorf("%w: fence view: %v", ErrGuard, err)
	}
	h := sha256.New()
	h.Write([]byte(body))
	for _, col := range tbl.Columns {
		fmt.Fprintf(h, "\x00%s\x00%s", col.Name, col.Type)
	}
	name := viewPrefix + hex.EncodeToString(h.Sum(nil))[:32]
	create := "CREATE VIEW " + ViewSchema + "." + name +
		" WITH (security_barrier = true, security_invoker = true) AS " + body
	return FenceView{Name: name, Create: create}, nil
}

// columnTargets is a select list naming each column (qualified by
// relation when it is not ""), in the catalog's order.
func columnTargets(relation string, cols []sqlcheck.Column) []*pg.Node {
	out := make([]*pg.Node, len(cols))
	for i, col := range cols {
		fields := []*pg.Node{pg.MakeStrNode(col.Name)}
		if relation != "" {
			fields = append([]*pg.Node{pg.MakeStrNode(relation)}, fields...)
		}
		out[i] = pg.MakeResTargetNodeWithVal(pg.MakeColumnRefNode(fields, -1), -1)
	}
	return out
}

// ensureViews makes sure every view g reads through exists in the target
// and is a security barrier, creating the missing ones. A view is created
// at most once per Pilot process (and, across Pilots, once per target: the
// creation holds an advisory lock and looks first). It runs on a
// connection of its own, outside any statement's transaction, so a
// rolled-back statement never takes its view with it; the statement's READ
// COMMITTED transaction, open already, sees the view at its next statement.
func (p *Pilot) ensureViews(ctx context.Context, views []FenceView) error {
	var missing []FenceView
	for _, v := range views {
		if _, ok := p.views.Load(v.Name); !ok {
			missing = append(missing, v)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	p.ddlMu.Lock()
	defer p.ddlMu.Unlock()
	conn, err := pgx.ConnectConfig(ctx, p.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("pilot: fence views: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, v := range missing {
		if err := createView(ctx, conn, v, p.pins[0].(string)); err != nil {
			return err
		}
		p.views.Store(v.Name, true)
	}
	return nil
}

// viewLockKey is the advisory lock (pg_advisory_xact_lock) that serializes
// fence-view creation on a target.
const viewLockKey = 0x686d5f76 // "hm_v"

func createView(ctx context.Context, conn *pgx.Conn, v FenceView, searchPath string) error {
	qname := ViewSchema + "." + v.Name
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1), set_config('search_path', $2, true)`, int64(viewLockKey), searchPath); err != nil {
			return err
		}
		var opts []string
		var isView bool
		err := tx.QueryRow(ctx, `SELECT coalesce(reloptions, '{}'), relkind = 'v' FROM pg_class WHERE oid = to_regclass($1)`, qname).Scan(&opts, &isView)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case !isView || !hasOption(opts, "security_barrier") || !hasOption(opts, "security_invoker"):
			// Someone else's object under our name: never read through it.
			return fmt.Errorf("%s exists but is not a security-barrier, security-invoker view; drop it (SELECT harbormaster.drop_fence_views()) and the Pilot recreates it", qname)
		default:
			return nil
		}
		if _, err := tx.Exec(ctx, v.Create); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `GRANT SELECT, UPDATE, DELETE ON `+qname+` TO PUBLIC`)
		return err
	})
	if err != nil {
		return fmt.Errorf("pilot: fence view %s: %w", qname, err)
	}
	return nil
}

func hasOption(opts []string, name string) bool {
	for _, o := range opts {
		k, val, _ := strings.Cut(o, "=")
		if k == name && (val == "" || val == "true" || val == "on") {
			return true
		}
	}
	return false
}

// forgetViews drops the Pilot's memory of which views exist, after a
// statement found one missing (someone ran drop_fence_views): the next
// statement recreates it.
func (p *Pilot) forgetViews(err error) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		p.views.Clear()
	}
}
