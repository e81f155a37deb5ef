package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

func runLogbook(e *env, args []string) int {
	return e.dispatch("harbormaster logbook", []command{
		{"verify", "check the hash chain and signed checkpoints", runLogbookVerify},
		{"tail", "print the last entries as JSON lines", runLogbookTail},
		{"export", "write entries (or checkpoints) as JSON lines", runLogbookExport},
	}, args)
}

func runLogbookVerify(e *env, args []string) int {
	fs := e.flags("harbormaster logbook verify --store PATH (--vkey KEY | --key FILE --name NAME) [--checkpoints FILE] [--checkpoint-every N] [--allow-unsigned-tail]",
		"Recomputes every entry's hash, every link and every signed checkpoint, and reports\n"+
			"the first bad sequence number on any change, deletion or reordering. Checkpoints\n"+
			"exported earlier (--checkpoints) also reveal a log cut short. Prints how far the\n"+
			"chain is signed: entries after the last checkpoint only chain to it, so more of\n"+
			"them than the checkpoint interval (the config's logbook.checkpoint_every), or\n"+
			"entries and no checkpoint at all, fail unless --allow-unsigned-tail.\n"+
			"Exit 0 when intact and signed, 1 when not.")
	storePath := fs.String("store", "", "the control store: a SQLite `PATH` or a postgres:// URL")
	vkey := fs.String("vkey", "", "the checkpoint verifier `KEY` (name+hash+base64), or @FILE")
	keyFile := fs.String("key", "", "the control-plane key `FILE` (PEM), instead of --vkey")
	name := fs.String("name", "", "the control plane's `NAME` (the config's name:); defaults to the --vkey's name, else the name in the store's checkpoints, else harbormaster")
	cps := fs.String("checkpoints", "", "checkpoints exported earlier, JSON lines `FILE`")
	every := fs.Int64("checkpoint-every", logbook.Config{}.WithDefaults().CheckpointEvery,
		"the checkpoint interval `N`: the config's logbook.checkpoint_every; a longer unsigned tail fails")
	allowTail := fs.Bool("allow-unsigned-tail", false, "exit 0 for an intact chain however much of it is unsigned")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if *storePath == "" || (*vkey == "") == (*keyFile == "") {
		return e.usageErr(fs, "--store and one of --vkey or --key are required")
	}
	if *every < 1 {
		return e.usageErr(fs, "--checkpoint-every must be at least 1")
	}
	var v note.Verifier
	var err error
	if *name == "" {
		*name = "harbormaster"
	}
	switch {
	case *vkey != "":
		k := *vkey
		if strings.HasPrefix(k, "@") {
			b, rerr := os.ReadFile(k[1:])
			if rerr != nil {
				e.errorf("%v", rerr)
				return exitUsage
			}
			k = strings.TrimSpace(string(b))
		}
		v, err = note.NewVerifier(k)
		if err == nil && !flagSet(fs, "name") {
			*name = v.Name()
		}
	default:
		key, kerr := config.LoadControlPlaneKey(*keyFile)
		if kerr != nil {
			e.errorf("%v", kerr)
			return exitUsage
		}
		if !flagSet(fs, "name") {
			// The key alone does not say whose checkpoints it signs: take
			// the name the store's checkpoints carry, so a key that does not
			// sign them fails as such, and a right key with a name left out
			// does not read as a rewritten log.
			if n := checkpointName(e.ctx, *storePath); n != "" {
				*name = n
				// Said, not silent: with one key signing for several
				// control planes, another's whole log would verify too.
				fmt.Fprintf(e.stderr, "harbormaster: note: verifying the checkpoints as %s/logbook, the name they carry (--name to insist on one)\n", n)
			}
		}
		v, err = logbook.NewCheckpointVerifier(*name, node.PublicKey(key))
	}
	if err != nil {
		e.errorf("verifier key: %v", err)
		return exitUsage
	}
	var external []logbook.Checkpoint
	if *cps != "" {
		f, err := os.Open(*cps)
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		external, err = logbook.ReadCheckpoints(f)
		f.Close()
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
	}
	// A SQLite path that does not exist would be created empty; a
	// PostgreSQL store is a URL, with nothing on disk to look for.
	if _, err := os.Stat(*storePath); err != nil && !store.IsPostgresURL(*storePath) {
		e.errorf("%v", err)
		return exitUsage
	}
	st, lb, err := openLogbook(e.ctx, *storePath, *name, *every)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	defer st.Close()
	rep, err := lb.Verify(e.ctx, v, external...)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	fmt.Fprintln(e.stdout, rep.String())
	switch {
	case !rep.OK:
		return exitFail
	case rep.TailTooLong && !*allowTail:
		if rep.SignedThrough == 0 {
			e.errorf("no checkpoint signs any of the %d entries: whoever can write the store could have written them", rep.HeadSeq)
		} else {
			e.errorf("%d entries follow the last checkpoint (entry %d), more than the checkpoint interval (%d): checkpoints may have been deleted and the entries after them rewritten",
				rep.Unsigned, rep.SignedThrough, rep.MaxUnsigned)
		}
		e.hintf("give --checkpoint-every the config's logbook.checkpoint_every if it is not %d; --checkpoints FILE with checkpoints exported earlier; or --allow-unsigned-tail to accept the chain as it is", rep.MaxUnsigned)
		return exitFail
	}
	return exitOK
}

func runLogbookTail(e *env, args []string) int {
	fs := e.flags("harbormaster logbook tail --store PATH [-n N]", "Prints the last N entries as JSON lines, oldest first.")
	storePath := fs.String("store", "", "the control store: a SQLite `PATH` or a postgres:// URL")
	n := fs.Int("n", 20, "how many `N` entries")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if *storePath == "" {
		return e.usageErr(fs, "--store is required")
	}
	st, lb, err := openLogbook(e.ctx, *storePath, "harbormaster", 0)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	defer st.Close()
	entries, err := lb.Tail(e.ctx, *n)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	for _, en := range entries {
		writeJSONLine(e, en)
	}
	return exitOK
}

func runLogbookExport(e *env, args []string) int {
	fs := e.flags("harbormaster logbook export --store PATH [--from SEQ] [--checkpoints]",
		"Writes every entry from SEQ on as JSON lines; with --checkpoints, the signed\n"+
			"checkpoints instead, to keep outside the control plane's trust domain.")
	storePath := fs.String("store", "", "the control store: a SQLite `PATH` or a postgres:// URL")
	from := fs.Int64("from", 1, "first `SEQ`")
	cps := fs.Bool("checkpoints", false, "export signed checkpoints instead of entries")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if *storePath == "" {
		return e.usageErr(fs, "--store is required")
	}
	st, lb, err := openLogbook(e.ctx, *storePath, "harbormaster", 0)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	defer st.Close()
	if *cps {
		err = lb.ExportCheckpoints(e.ctx, e.stdout)
	} else {
		_, err = lb.Export(e.ctx, e.stdout, *from)
	}
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	return exitOK
}

// checkpointName is the control plane's name in the newest checkpoint of
// the store at path (its origin line, "NAME/logbook"), or "" when it has
// none or cannot be read; verification then says what is wrong.
func checkpointName(ctx context.Context, path string) string {
	if _, err := os.Stat(path); err != nil && !store.IsPostgresURL(path) {
		return ""
	}
	st, lb, err := openLogbook(ctx, path, "harbormaster", 0)
	if err != nil {
		return ""
	}
	defer st.Close()
	cps, err := lb.Checkpoints(ctx)
	if err != nil || len(cps) == 0 {
		return ""
	}
	origin, _, _ := strings.Cut(cps[len(cps)-1].Note, "\n")
	n, ok := strings.CutSuffix(origin, "/logbook")
	if !ok {
		return ""
	}
	return n
}

// flagSet reports whether a flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			found = true
		}
	})
	return found
}
