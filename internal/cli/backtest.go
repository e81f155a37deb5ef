package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/backtest"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

func runDelegationBacktest(e *env, args []string) int {
	fs := e.flags("harbormaster delegation backtest FILE (--config FILE | --store PATH) [--since 30d] [--schema FILE | --target DSN] [--json]",
		"Replays the statements the logbook recorded for the delegation's grantee and target\n"+
			"over the window through the static check of the delegation in FILE (signed or\n"+
			"not), and prints, per statement and in totals, what it would have run on the fast\n"+
			"path, what the Surveyor would have judged and what it would have referred, against\n"+
			"the decision recorded then. Nothing is executed and nothing is written; the target\n"+
			"is only read for its catalog (from the config's target, unless --schema or --target\n"+
			"is given). Exit 0 when the backtest ran, 2 for bad usage or input, 1 otherwise.")
	var cf catalogFlags
	cf.register(fs)
	cfgPath := fs.String("config", "", "a serve config `FILE`: its store, and its target's catalog")
	loc := fs.String("store", "", "the control store: a SQLite `PATH` or a postgres:// URL")
	since := fs.String("since", "30d", "the window `LENGTH` back from now: 30d, 12h, 90m, 2w")
	maxRows := fs.Int("max-rows", 1000, "print at most `N` statements (the totals count them all)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	file, code, ok := e.oneFile(fs)
	if !ok {
		return code
	}
	if (*cfgPath == "") == (*loc == "") {
		return e.usageErr(fs, "one of --config or --store is required")
	}
	window, err := backtest.ParseWindow(*since)
	if err != nil {
		return e.usageErr(fs, "--since: %v", err)
	}
	data, err := config.ReadFileLimited(file, bound.MaxFileBytes)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	d, err := bound.Parse(data, file) // for its target, before the catalog
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	name := "harbormaster"
	var cat *sqlcheck.Catalog
	if *cfgPath != "" {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		*loc, name = cfg.StoreLocation(), cfg.Name
		if cf.schema == "" && cf.target == "" {
			if cat, err = configCatalog(e, cfg, d.Target); err != nil {
				e.errorf("%v", err)
				return exitUsage
			}
		}
	}
	if cat == nil {
		if cat, err = cf.load(e); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
	}
	b, rep, err := backtest.Compile(data, file, cat)
	if errors.Is(err, backtest.ErrDoesNotCompile) {
		e.errorf("%s does not compile:", file)
		for _, p := range rep.Problems {
			fmt.Fprintf(e.stderr, "harbormaster: error:   %s\n", problemString(p))
		}
		return exitUsage
	}
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	// A SQLite path that does not exist would be created empty.
	if _, err := os.Stat(*loc); err != nil && !store.IsPostgresURL(*loc) {
		e.errorf("%v", err)
		return exitUsage
	}
	st, lb, err := openLogbook(e.ctx, *loc, name, 0)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	defer st.Close()
	r, err := backtest.Run(e.ctx, backtest.Input{Logbook: lb, Delegation: b, Catalog: cat, Since: window, Now: time.Now(), MaxRows: *maxRows})
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	if *asJSON {
		writeJSON(e, r)
		return exitOK
	}
	printBacktest(e, r)
	return exitOK
}

// configCatalog reads the catalog of the config's target named target.
func configCatalog(e *env, cfg *config.Config, target string) (*sqlcheck.Catalog, error) {
	for _, t := range cfg.Targets {
		if t.Name != target {
			continue
		}
		if t.Remote() {
			return nil, fmt.Errorf("target %s has its Pilot in its own process, which holds its credentials: give --schema FILE or --target DSN", target)
		}
		return pilot.LoadCatalogDSN(e.ctx, t.ResolveDSN(e.getenv), t.SearchPath)
	}
	return nil, errors.New("the config has no target " + target + ": give --schema FILE or --target DSN")
}

func printBacktest(e *env, r *backtest.Report) {
	w := e.stdout
	t := r.Totals
	fmt.Fprintf(w, "backtest of a tier %s delegation for %s on %s\n", r.Tier, r.Grantee, r.Target)
	fmt.Fprintf(w, "window    %s to %s: %d statement(s)\n", r.From.Local().Format(time.RFC1123), r.To.Local().Format(time.RFC1123), t.Statements)
	fmt.Fprintf(w, "                 fast path  surveyed  referred  rejected  refused\n")
	fmt.Fprintf(w, "  would now      %9d  %8d  %8d  %8d  %7s\n", t.Would.FastPath, t.Would.Surveyed, t.Would.Referred, t.Would.Rejected, "-")
	fmt.Fprintf(w, "  was then       %9d  %8d  %8d  %8d  %7d\n", t.Was.FastPath, t.Was.Surveyed, t.Was.Referred, t.Was.Rejected, t.Was.Refused)
	fmt.Fprintf(w, "changed   %d: %d with less human involvement than then, %d with more, %d between referred, rejected and refused\n",
		t.Changed, t.Wider, t.Narrower, t.Neither)
	fmt.Fprintf(w, "note      %s\n", r.Caveat)
	if len(r.Rows) == 0 {
		return
	}
	if r.Truncated {
		fmt.Fprintf(w, "statements (the last %d):\n", len(r.Rows))
	} else {
		fmt.Fprintf(w, "statements:\n")
	}
	for _, row := range r.Rows {
		mark := " "
		if row.Changed {
			mark = "*"
		}
		then := ""
		if row.Then != "" {
			then = ", then " + row.Then
		}
		fmt.Fprintf(w, "%s %s  was %s%s, would be %s\n    %s\n", mark, row.Time.Local().Format("2006-01-02 15:04:05"), row.Was, then, row.Would,
			oneLine(row.Statement, 200))
		if row.Would != backtest.FastPath && len(row.Reasons) > 0 {
			fmt.Fprintf(w, "    why: %s\n", oneLine(strings.Join(row.Reasons, "; "), 300))
		}
	}
}
