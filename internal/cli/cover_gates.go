package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/cover"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// gateTarget is a live target opened for the gates: its catalog, sample
// rows of the tables in scope and their side effects.
type gateTarget struct {
	conn *pgx.Conn
	cat  *sqlcheck.Catalog
}

func openGateTarget(ctx context.Context, dsn string, searchPath []string) (*gateTarget, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to the target: %w", err)
	}
	cat, err := pilot.LoadCatalog(ctx, conn, searchPath)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return &gateTarget{conn: conn, cat: cat}, nil
}

func (g *gateTarget) close(ctx context.Context) { g.conn.Close(context.WithoutCancel(ctx)) }

// env reads sample rows of every table the bounds name and builds the
// gates' environment; now is the server time the evaluator uses.
func (g *gateTarget) env(ctx context.Context, tables []sqlcheck.TableName, writers []cover.Writer, now time.Time) (*cover.Env, []string, error) {
	env := &cover.Env{Catalog: g.cat, Writers: writers, Rows: map[sqlcheck.TableName][]cover.Row{}, Now: now}
	var notes []string
	for _, tn := range tables {
		t, ok := g.cat.Table(tn)
		if !ok {
			continue
		}
		rows, err := cover.SampleRows(ctx, g.conn, t, cover.DefaultSampleRows)
		if err != nil {
			return nil, nil, err
		}
		env.Rows[tn] = rows
		if len(rows) == 0 {
			notes = append(notes, fmt.Sprintf("%s is empty: rows synthesized from its column types", tn))
		} else {
			notes = append(notes, fmt.Sprintf("%d sample rows of %s", len(rows), tn))
		}
	}
	return env, notes, nil
}

func boundTables(bs ...*bound.Bound) []sqlcheck.TableName {
	seen := map[sqlcheck.TableName]bool{}
	var out []sqlcheck.TableName
	for _, b := range bs {
		for _, r := range b.Rules {
			if tn, err := r.TableName(); err == nil && !seen[tn] {
				seen[tn] = true
				out = append(out, tn)
			}
		}
	}
	return out
}

// compileGated compiles FILE against a live target and runs the gates on
// every fence and check, with the grantee's other active delegations
// (files) counted as writes it may make.
func compileGated(e *env, file string, cf *catalogFlags, opt bound.Options, active []string) (*compiled, error) {
	data, err := config.ReadFileLimited(file, bound.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	d, err := bound.Parse(data, file)
	if err != nil {
		return nil, err
	}
	g, err := openGateTarget(e.ctx, cf.target, cf.path())
	if err != nil {
		return nil, err
	}
	defer g.close(e.ctx)
	b, rep := bound.Compile(d, g.cat, opt)
	var writers []cover.Writer
	considered := []string{}
	for _, f := range active {
		od, err := config.ReadFileLimited(f, bound.MaxFileBytes)
		if err != nil {
			return nil, err
		}
		odel, err := bound.Parse(od, f)
		if err != nil {
			return nil, err
		}
		ob, _ := bound.Compile(odel, g.cat, bound.Options{})
		if ob == nil || ob.Grantee != b.Grantee || ob.Target != b.Target {
			return nil, fmt.Errorf("%s is not a delegation to %s on %s", f, b.Grantee, b.Target)
		}
		writers = append(writers, cover.WritersOf(ob, g.cat, f, nil)...)
		considered = append(considered, f)
	}
	env, notes, err := g.env(e.ctx, boundTables(b), writers, time.Now().UTC())
	if err != nil {
		return nil, err
	}
	cover.ApplyGates(d, b, rep, env)
	se, err := cover.SideEffects(e.ctx, g.conn, boundTables(b))
	if err != nil {
		return nil, err
	}
	rep.SideEffects = se
	other := "no other active delegations of the grantee given (--active)"
	if len(considered) > 0 {
		other = "writes under " + strings.Join(considered, ", ") + " counted"
	}
	rep.GatesNote = fmt.Sprintf("G0-G2 ran on every fence and check: %s; %s", strings.Join(notes, "; "), other)
	return &compiled{bound: b, report: rep}, nil
}

func printGates(e *env, r *bound.Report) {
	w := e.stdout
	if r.GatesNote == "" {
		return
	}
	fmt.Fprintf(w, "\nGates (%s):\n", r.GatesNote)
	for _, rr := range r.Rules {
		if rr.Gates == nil {
			continue
		}
		for _, x := range []struct {
			kind string
			g    *bound.ExprGates
		}{{"fence", rr.Gates.Fence}, {"check", rr.Gates.Check}} {
			if x.g == nil {
				continue
			}
			fmt.Fprintf(w, "  rule %d %s %s\n", rr.Index, x.kind, x.g.Expr)
			for _, gg := range []struct {
				name string
				g    bound.Gate
			}{{"G0", x.g.G0}, {"G1", x.g.G1}, {"G2", x.g.G2}} {
				mark := "ok  "
				if !gg.g.OK {
					mark = "FAIL"
				}
				fmt.Fprintf(w, "    %s %s %s\n", gg.name, mark, gg.g.Why)
			}
		}
	}
	if len(r.SideEffects) > 0 {
		fmt.Fprintf(w, "\nSide effects on tables in scope (they escape a fence):\n")
		for _, s := range r.SideEffects {
			fmt.Fprintf(w, "  - %s %s on %s: %s\n", s.Kind, s.Name, s.Table, s.Detail)
		}
	} else {
		fmt.Fprintf(w, "\nSide effects on tables in scope: no triggers, rules or cascades\n")
	}
}
