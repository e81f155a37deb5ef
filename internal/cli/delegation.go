package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// catalogFlags are --schema FILE | --target DSN, shared by every command
// that compiles a delegation.
type catalogFlags struct {
	schema     string
	target     string
	searchPath string
	// gates runs the CoVer gates when the catalog is a live target (sign
	// does: a gate problem makes a delegation unsignable).
	gates bool
}

func (c *catalogFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.schema, "schema", "", "schema `FILE`: SQL DDL as pg_dump --schema-only writes it")
	fs.StringVar(&c.target, "target", "", "read the catalog of a live target `DSN` instead of --schema")
	fs.StringVar(&c.searchPath, "search-path", "public", "pinned search path, comma-separated `SCHEMAS`")
}

func (c *catalogFlags) path() []string {
	path := strings.Split(c.searchPath, ",")
	for i := range path {
		path[i] = strings.TrimSpace(path[i])
	}
	return path
}

func (c *catalogFlags) load(e *env) (*sqlcheck.Catalog, error) {
	path := c.path()
	switch {
	case c.schema != "" && c.target != "":
		return nil, errors.New("give --schema or --target, not both")
	case c.schema != "":
		ddl, err := config.ReadFileLimited(c.schema, sqlcheck.MaxSchemaBytes)
		if err != nil {
			return nil, err
		}
		cat, err := sqlcheck.ParseSchemaDDL(string(ddl), path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.schema, err)
		}
		return cat, nil
	case c.target != "":
		return pilot.LoadCatalogDSN(e.ctx, c.target, path)
	}
	return nil, errors.New("a catalog is needed: give --schema FILE or --target DSN")
}

// compiled is a delegation file compiled against a catalog.
type compiled struct {
	bound  *bound.Bound
	report *bound.Report
}

// compileFile compiles FILE against the catalog; opt.Now, when set, makes
// an expiry already past a problem.
func compileFile(e *env, file string, cf *catalogFlags, opt bound.Options) (*compiled, error) {
	data, err := config.ReadFileLimited(file, bound.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	d, err := bound.Parse(data, file)
	if err != nil {
		return nil, err
	}
	cat, err := cf.load(e)
	if err != nil {
		return nil, err
	}
	b, rep := bound.Compile(d, cat, opt)
	return &compiled{bound: b, report: rep}, nil
}

func runDelegation(e *env, args []string) int {
	return e.dispatch("harbormaster delegation", []command{
		{"compile", "compile a delegation and print the report", runDelegationCompile},
		{"draft", "draft a delegation from a sentence with CoVer (signs nothing)", runDelegationDraft},
		{"canonical", "print the exact bytes a grantor signs", runDelegationCanonical},
		{"sign", "sign a delegation with an SSH key (sshsig)", runDelegationSign},
		{"verify", "verify a delegation's signature against an allowed-signers file", runDelegationVerify},
		{"revoke", "revoke a delegation (a signed act)", runDelegationRevoke},
		{"backtest", "replay the logbook's statements through an unsigned delegation", runDelegationBacktest},
	}, args)
}

func runDelegationCompile(e *env, args []string) int {
	fs := e.flags("harbormaster delegation compile FILE (--schema FILE | --target DSN [--active FILE]...) [--json]",
		"Compiles a delegation (YAML) into its bound and prints the compilation report:\n"+
			"tier, whether it can be signed and why not, lints, what each rule permits and,\n"+
			"for Tier B, the fallback-authority sentence. Against a live target (--target)\n"+
			"it also runs the CoVer gates G0-G2 on every fence and check, on sample rows\n"+
			"read in a read-only transaction, and lists the triggers, rules and foreign-key\n"+
			"cascades on the tables in scope. Exit 0 when signable, 1 when not.")
	var cf catalogFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	var active listFlag
	fs.Var(&active, "active", "another active delegation `FILE` of the same grantee, whose writes the gates count (repeatable)")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	file, code, ok := e.oneFile(fs)
	if !ok {
		return code
	}
	if len(active) > 0 && cf.target == "" {
		return e.usageErr(fs, "--active needs --target: the gates run against a live target")
	}
	// With the clock, as sign: "signable" means sign would sign it now.
	var c *compiled
	var err error
	if cf.target != "" && cf.schema == "" {
		c, err = compileGated(e, file, &cf, bound.Options{Now: time.Now}, active)
	} else {
		c, err = compileFile(e, file, &cf, bound.Options{Now: time.Now})
	}
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if *asJSON {
		writeJSON(e, c.report)
	} else {
		printReport(e, c)
	}
	if !c.report.Signable {
		return exitFail
	}
	return exitOK
}

func (e *env) oneFile(fs *flag.FlagSet) (string, int, bool) {
	if fs.NArg() != 1 {
		return "", e.usageErr(fs, "expected exactly one delegation FILE, got %d arguments", fs.NArg()), false
	}
	return fs.Arg(0), 0, true
}

func writeJSON(e *env, v any) {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func printReport(e *env, c *compiled) {
	r := c.report
	w := e.stdout
	fmt.Fprintf(w, "Sentence:  %s\n", c.bound.Sentence)
	fmt.Fprintf(w, "Grantee:   %s on target %s\n", c.bound.Grantee, c.bound.Target)
	fmt.Fprintf(w, "Tier:      %s", r.Tier)
	if r.Tier == "A" {
		fmt.Fprintf(w, " (every clause compiled; no model runs)\n")
	} else {
		fmt.Fprintf(w, " (some rules carry a residual clause: the Surveyor judges them inside the bound)\n")
	}
	exp := c.bound.Expires
	if exp == "" {
		exp = "(none)"
	}
	fmt.Fprintf(w, "Expires:   %s\n", exp)
	if c.bound.Quota != nil {
		fmt.Fprintf(w, "Quota:     %s on the fast path\n", c.bound.Quota)
	}
	fmt.Fprintf(w, "\nRules:\n")
	for _, rr := range r.Rules {
		fmt.Fprintf(w, "  %d. [%s] %s\n", rr.Index, rr.Route, rr.Summary)
		if rr.Note != "" {
			fmt.Fprintf(w, "     note: %s\n", rr.Note)
		}
	}
	if r.FallbackAuthority != "" {
		fmt.Fprintf(w, "\nFallback authority:\n  %s\n", r.FallbackAuthority)
	}
	if len(r.Lints) > 0 {
		fmt.Fprintf(w, "\nLints:\n")
		for _, l := range r.Lints {
			fmt.Fprintf(w, "  - %s\n", problemString(l))
		}
	}
	printGates(e, r)
	if r.Signable {
		fmt.Fprintf(w, "\nSignable:  yes (delegation id %s)\n", r.DelegationID)
	} else {
		fmt.Fprintf(w, "\nSignable:  no\n")
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  - %s\n", problemString(p))
		}
	}
}

func problemString(p bound.Problem) string {
	loc := p.Field
	if p.Line > 0 {
		loc = fmt.Sprintf("line %d: %s", p.Line, p.Field)
	}
	if loc == "" {
		return p.Message
	}
	return loc + ": " + p.Message
}

// signableCanonical compiles FILE (with opt) and returns its canonical
// bytes, or reports why it cannot be signed.
func (e *env) signableCanonical(file string, cf *catalogFlags, opt bound.Options) (*compiled, []byte, int, bool) {
	var c *compiled
	var err error
	if cf.gates && cf.target != "" && cf.schema == "" {
		c, err = compileGated(e, file, cf, opt, nil)
	} else {
		c, err = compileFile(e, file, cf, opt)
	}
	if err != nil {
		e.errorf("%v", err)
		return nil, nil, exitUsage, false
	}
	if !c.report.Signable {
		e.errorf("%s cannot be signed:", file)
		for _, p := range c.report.Problems {
			fmt.Fprintf(e.stderr, "harbormaster: error:   %s\n", problemString(p))
		}
		e.hintf("run 'harbormaster delegation compile %s' for the whole report", file)
		return nil, nil, exitUsage, false
	}
	canon, err := c.bound.Canonical()
	if err != nil {
		e.errorf("%v", err)
		return nil, nil, exitUsage, false
	}
	return c, canon, 0, true
}

func runDelegationCanonical(e *env, args []string) int {
	fs := e.flags("harbormaster delegation canonical FILE (--schema FILE | --target DSN)",
		"Prints the exact bytes that are signed: the canonical JSON of the bound. Pipe it to\n"+
			"'ssh-keygen -Y sign -n harbormaster-delegation -f KEY' to sign with OpenSSH itself.")
	var cf catalogFlags
	cf.register(fs)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	file, code, ok := e.oneFile(fs)
	if !ok {
		return code
	}
	// No clock: the bytes of a delegation that has since expired are still
	// what its signature covers (ssh-keygen -Y verify needs them).
	_, canon, code, ok := e.signableCanonical(file, &cf, bound.Options{})
	if !ok {
		return code
	}
	_, _ = e.stdout.Write(canon)
	return exitOK
}

func runDelegationSign(e *env, args []string) int {
	fs := e.flags("harbormaster delegation sign FILE (--schema FILE | --target DSN) --key SSH_PRIVATE_KEY --out SIG",
		"Signs the delegation's canonical bytes with an SSH key in OpenSSH's sshsig format,\n"+
			"namespace harbormaster-delegation, exactly as 'ssh-keygen -Y sign' would.\n"+
			"Refuses a delegation that is not signable, or whose expires has passed, and prints\n"+
			"the report's lints with the signature.")
	var cf catalogFlags
	cf.register(fs)
	cf.gates = true
	key := fs.String("key", "", "the grantor's SSH private key `FILE` (unencrypted)")
	out := fs.String("out", "", "write the armored signature to `SIG` (- for stdout)")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	file, code, ok := e.oneFile(fs)
	if !ok {
		return code
	}
	if *key == "" || *out == "" {
		return e.usageErr(fs, "--key and --out are required")
	}
	// A delegation already expired would be refused on upload and grant
	// nothing: refuse to sign it.
	c, canon, code, ok := e.signableCanonical(file, &cf, bound.Options{Now: time.Now})
	if !ok {
		return code
	}
	k, err := signing.LoadPrivateKey(*key)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	sig, err := k.Sign(signing.NamespaceDelegation, canon)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if *out == "-" {
		_, _ = e.stdout.Write(sig)
	} else if err := os.WriteFile(*out, sig, 0o644); err != nil {
		e.errorf("%v", err)
		return exitUsage
	} else {
		fmt.Fprintf(e.stdout, "signed %s (delegation %s, tier %s) with key %s: %s\n", file, c.report.DelegationID, c.report.Tier, k.Fingerprint(), *out)
		if c.report.FallbackAuthority != "" {
			fmt.Fprintf(e.stdout, "%s\n", c.report.FallbackAuthority)
		}
		// What the signature accepts: among the lints, what a write
		// inside the bound can still tell the grantee.
		if len(c.report.Lints) > 0 {
			fmt.Fprintf(e.stdout, "Lints (advice; the signature accepts them):\n")
			for _, l := range c.report.Lints {
				fmt.Fprintf(e.stdout, "  - %s\n", problemString(l))
			}
		}
	}
	return exitOK
}

func runDelegationVerify(e *env, args []string) int {
	fs := e.flags("harbormaster delegation verify FILE (--schema FILE | --target DSN) --sig SIG --signers ALLOWED_SIGNERS",
		"Verifies that SIG is a valid sshsig signature over the delegation's canonical bytes,\n"+
			"namespace harbormaster-delegation, by a key the allowed-signers file lets sign for\n"+
			"the delegation's target. Exit 0 only then; 1 for a bad or unauthorized signature.")
	var cf catalogFlags
	cf.register(fs)
	sigPath := fs.String("sig", "", "the armored signature `FILE`")
	signers := fs.String("signers", "", "the allowed-signers `FILE` (principals written NAME@TARGET)")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	file, code, ok := e.oneFile(fs)
	if !ok {
		return code
	}
	if *sigPath == "" || *signers == "" {
		return e.usageErr(fs, "--sig and --signers are required")
	}
	c, canon, code, ok := e.signableCanonical(file, &cf, bound.Options{})
	if !ok {
		return code
	}
	sig, err := config.ReadFileLimited(*sigPath, 1<<20)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	as, err := signing.LoadAllowedSigners(*signers)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	s, err := as.Verify(canon, sig, signing.NamespaceDelegation, c.bound.Target, time.Now())
	if err != nil {
		e.errorf("signature does not verify: %v", err)
		return exitFail
	}
	fmt.Fprintf(e.stdout, "good signature by %s (%s) for target %s: delegation %s, tier %s\n", s.Name, s.Fingerprint, c.bound.Target, c.report.DelegationID, c.report.Tier)
	return exitOK
}

func writeJSONLine(e *env, v any) {
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
