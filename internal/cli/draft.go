package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/cover"
	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// coverPanel builds the CoVer panel from the surveyor providers of a
// config: the first provider decomposes and synthesizes, every provider
// labels.
func coverPanel(cfg *config.Config, getenv func(string) string) (cover.Panel, error) {
	var ps []llm.Asker
	for _, p := range cfg.Surveyor.Providers {
		a, err := llm.NewAsker(llm.ProviderConfig{Name: p.Name, Kind: p.Kind, BaseURL: p.BaseURL, Model: p.Model, APIKeyEnv: p.APIKeyEnv,
			Timeout: p.Timeout.D(), Proxy: p.Proxy, StructuredOutput: p.StructuredOutput}, getenv)
		if err != nil {
			return cover.Panel{}, fmt.Errorf("surveyor provider %s: %w", p.Name, err)
		}
		ps = append(ps, a)
	}
	if len(ps) < cover.MinLabelers {
		return cover.Panel{}, fmt.Errorf("CoVer needs at least %d surveyor providers in the config (ideally from different labs), got %d", cover.MinLabelers, len(ps))
	}
	return cover.Panel{Decomposer: ps[0], Synthesizer: ps[0], Labelers: ps}, nil
}

func runDelegationDraft(e *env, args []string) int {
	fs := e.flags(`harbormaster delegation draft "SENTENCE" --target NAME --grantee PRINCIPAL --config FILE [--out FILE] [--json]`,
		"Drafts a delegation from a sentence with CoVer (DESIGN.md section 8): a model splits\n"+
			"it into clauses, every surveyor provider labels each clause DECIDABLE or JUDGMENT,\n"+
			"a model synthesizes the bound element each clause implies, and only elements that\n"+
			"pass the gates G0-G3 (which consult no model) compile; the rest are residual\n"+
			"clauses. Prints every clause's route and gate evidence and the proposed YAML.\n"+
			"A draft signs nothing: edit it, compile it and sign it yourself.\n"+
			"Exit 0 when the draft would be signable, 1 when not.")
	target := fs.String("target", "", "the target `NAME` in the config (its catalog and sample rows are read, read-only)")
	grantee := fs.String("grantee", "", "the grantee `PRINCIPAL`, e.g. agent:ops-bot")
	cfgPath := fs.String("config", "", "a serve config `FILE` with the target and the surveyor providers")
	dsn := fs.String("dsn", "", "read the target through this `DSN` instead of the config's")
	out := fs.String("out", "", "write the proposed delegation YAML to `FILE`")
	asJSON := fs.Bool("json", false, "print the draft report as JSON")
	budget := fs.Int("budget", 0, "synthesize at most `N` clauses (nominations first); default every clause")
	var active listFlag
	fs.Var(&active, "active", "another active delegation `FILE` of the grantee, whose writes the gates count (repeatable)")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "expected exactly one SENTENCE (quote it), got %d arguments", fs.NArg())
	}
	if *target == "" || *grantee == "" || *cfgPath == "" {
		return e.usageErr(fs, "--target, --grantee and --config are required")
	}
	cfg, err := config.LoadSurveyor(*cfgPath)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	panel, err := coverPanel(cfg, e.getenv)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	var tc *config.Target
	for i := range cfg.Targets {
		if cfg.Targets[i].Name == *target {
			tc = &cfg.Targets[i]
		}
	}
	if tc == nil {
		e.errorf("%s has no target named %q", *cfgPath, *target)
		return exitUsage
	}
	conn := *dsn
	if conn == "" {
		if tc.Remote() {
			e.errorf("target %s runs its Pilot in its own process, so this config holds no credentials for it", *target)
			e.hintf("give a read-only --dsn for the target's catalog and sample rows")
			return exitUsage
		}
		conn = tc.ResolveDSN(e.getenv)
	}
	searchPath := tc.SearchPath
	if len(searchPath) == 0 {
		searchPath = []string{"public"}
	}
	g, err := openGateTarget(e.ctx, conn, searchPath)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	defer g.close(e.ctx)
	var writers []cover.Writer
	for _, f := range active {
		data, err := config.ReadFileLimited(f, bound.MaxFileBytes)
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		d, err := bound.Parse(data, f)
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		ob, _ := bound.Compile(d, g.cat, bound.Options{})
		if ob.Grantee != *grantee || ob.Target != *target {
			e.errorf("%s is not a delegation to %s on %s", f, *grantee, *target)
			return exitUsage
		}
		writers = append(writers, cover.WritersOf(ob, g.cat, f, nil)...)
	}
	var tables []sqlcheck.TableName
	for _, t := range g.cat.Tables() {
		if !sqlcheck.IsReservedSchema(t.Name.Schema) {
			tables = append(tables, t.Name)
		}
	}
	env, _, err := g.env(e.ctx, tables, writers, time.Now().UTC())
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	rep := cover.Draft(e.ctx, cover.DraftConfig{Sentence: fs.Arg(0), Grantee: *grantee, Target: *target, Budget: *budget}, panel, env)
	if *out != "" && rep.YAML != "" {
		if err := os.WriteFile(*out, []byte(rep.YAML), 0o644); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
	}
	if *asJSON {
		writeJSON(e, rep)
	} else {
		printDraft(e, rep, *out)
	}
	if !rep.Signable {
		return exitFail
	}
	return exitOK
}

func printDraft(e *env, r *cover.DraftReport, out string) {
	w := e.stdout
	fmt.Fprintf(w, "Sentence:  %s\nGrantee:   %s on target %s\n", r.Sentence, r.Grantee, r.Target)
	if r.DecomposeFailure != "" {
		fmt.Fprintf(w, "Decomposition failed (the whole sentence is residual): %s\n", r.DecomposeFailure)
	}
	fmt.Fprintf(w, "\nClauses:\n")
	for _, c := range r.Clauses {
		var ls []string
		for _, l := range c.Labels {
			s := l.Model + "=" + l.Label
			if l.Failure != "" {
				s += " (failed: " + l.Failure + ")"
			}
			ls = append(ls, s)
		}
		nom := "not nominated"
		if c.Nominated {
			nom = "nominated"
		}
		fmt.Fprintf(w, "  %d. [%s] %s\n     panel: %s; %s\n", c.Index, c.Route, c.Text, strings.Join(ls, ", "), nom)
		if c.Element != nil {
			term := c.Element.Expr
			switch c.Element.Kind {
			case cover.KindMaxRows:
				term = fmt.Sprint(c.Element.MaxRows)
			case cover.KindExpires:
				term = c.Element.Expires
			}
			fmt.Fprintf(w, "     element: %s %s %s: %s\n", c.Element.Op, c.Element.Table, c.Element.Kind, term)
		}
		if c.Gates != nil {
			for _, g := range []struct {
				n string
				g bound.Gate
			}{{"G0", c.Gates.G0}, {"G1", c.Gates.G1}, {"G2", c.Gates.G2}, {"G3", c.Gates.G3}} {
				mark := "ok  "
				if !g.g.OK {
					mark = "FAIL"
				}
				fmt.Fprintf(w, "     %s %s %s\n", g.n, mark, g.g.Why)
			}
		}
		fmt.Fprintf(w, "     route: %s\n", c.Why)
	}
	fmt.Fprintf(w, "\nProposed delegation")
	if out != "" {
		fmt.Fprintf(w, " (written to %s)", out)
	}
	fmt.Fprintf(w, ":\n%s\n", r.YAML)
	if r.Compile != nil {
		for _, l := range r.Compile.Lints {
			fmt.Fprintf(w, "lint: %s\n", problemString(l))
		}
	}
	if r.Signable {
		fmt.Fprintf(w, "Signable once you sign it: yes. A draft is not a delegation until a human signs it.\n")
		return
	}
	fmt.Fprintf(w, "Signable: no\n")
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  - %s\n", p)
	}
	if r.Compile != nil {
		for _, p := range r.Compile.Problems {
			fmt.Fprintf(w, "  - %s\n", problemString(p))
		}
	}
}
