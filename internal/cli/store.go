package cli

import (
	"fmt"

	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

func runStore(e *env, args []string) int {
	return e.dispatch("harbormaster store", []command{
		{"migrate", "apply pending migrations and print the schema version", runStoreMigrate},
	}, args)
}

func runStoreMigrate(e *env, args []string) int {
	fs := e.flags("harbormaster store migrate (--config FILE | --store PATH|URL)",
		"Applies the control store's pending migrations, under an advisory lock on\n"+
			"PostgreSQL so that nodes starting at once take turns, and prints the schema\n"+
			"version. serve applies them too when it starts; run this first to upgrade a\n"+
			"shared store before the new binary rolls out (docs/operations.md). Refuses a\n"+
			"store whose applied migrations this binary does not know.")
	cfgPath := fs.String("config", "", "a serve config `FILE`: its store")
	loc := fs.String("store", "", "the control store: a SQLite `PATH` or a postgres:// URL")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if (*cfgPath == "") == (*loc == "") {
		return e.usageErr(fs, "one of --config or --store is required")
	}
	if *cfgPath != "" {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		*loc = cfg.StoreLocation()
	}
	st, err := store.Open(e.ctx, *loc)
	if err != nil {
		e.errorf("%v", err)
		if store.IsPostgresURL(*loc) {
			e.hintf("the store needs a database of its own and a role that may create tables in it (docs/operations.md)")
		}
		return exitFail
	}
	defer st.Close()
	v, err := st.SchemaVersion(e.ctx)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	fmt.Fprintf(e.stdout, "%s store %s: schema version %d (%d migrations applied now)\n", st.Driver(), st.Path(), v, st.Applied())
	return exitOK
}
