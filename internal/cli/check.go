package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// checkOutput is the JSON contract of harbormaster check --json.
type checkOutput struct {
	Decision     sqlcheck.Outcome `json:"decision"`
	Tier         string           `json:"tier"`
	Rule         *int             `json:"rule"`
	Reasons      []string         `json:"reasons"`
	ReasonCodes  []string         `json:"reason_codes"`
	CanonicalSQL string           `json:"canonical_sql"`
	Uses         []sqlcheck.Use   `json:"uses"`
	DelegationID string           `json:"delegation_id,omitempty"`
}

func runCheck(e *env, args []string) int {
	fs := e.flags("harbormaster check --delegation FILE --sql SQL (--schema FILE | --target DSN) [--json] [--exit-code]",
		"Decides one statement against a delegation with the static check, offline:\n"+
			"  conforms  inside a rule without a residual clause (runs at once)\n"+
			"  survey    inside the bound only through a rule with a residual clause\n"+
			"            (the Surveyor would judge it)\n"+
			"  refer     anything else (a human decides)\n"+
			"Exit 0 for a decision of any kind; 2 for bad usage or bad input.\n"+
			"With --exit-code the exit status is the decision: 0 conforms, 3 survey, 4 refer\n"+
			"(2 still bad usage), so a script or CI job can test a statement with no parsing.")
	var cf catalogFlags
	cf.register(fs)
	dfile := fs.String("delegation", "", "the delegation YAML `FILE`")
	sql := fs.String("sql", "", "the statement (`SQL`); - reads it from stdin")
	asJSON := fs.Bool("json", false, "print the decision as JSON")
	exitCode := fs.Bool("exit-code", false, "exit with the decision: 0 conforms, 3 survey, 4 refer")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return e.usageErr(fs, "unexpected argument %q", fs.Arg(0))
	}
	if *dfile == "" {
		return e.usageErr(fs, "--delegation is required")
	}
	stmt := *sql
	if stmt == "-" {
		data, err := readAllLimited(e, 1<<20)
		if err != nil {
			e.errorf("reading the statement from stdin: %v", err)
			return exitUsage
		}
		stmt = string(data)
	} else if stmt == "" {
		return e.usageErr(fs, "--sql is required")
	}
	c, err := compileFile(e, *dfile, &cf, bound.Options{})
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if len(c.bound.Rules) != len(c.report.Rules) || hasRuleProblems(c.report) {
		e.errorf("%s does not compile:", *dfile)
		for _, p := range c.report.Problems {
			fmt.Fprintf(e.stderr, "harbormaster: error:   %s\n", problemString(p))
		}
		return exitUsage
	}
	rules, err := c.bound.CheckRules()
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	cat, err := cf.load(e)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	d := (&sqlcheck.Checker{Catalog: cat}).Check(stmt, rules)
	out := checkOutput{Decision: d.Outcome, Tier: c.bound.Tier(), Rule: d.Rule, Reasons: d.ReasonStrings(),
		CanonicalSQL: d.CanonicalSQL, Uses: d.Uses, DelegationID: c.report.DelegationID}
	for _, r := range d.Reasons {
		out.ReasonCodes = append(out.ReasonCodes, r.Code)
	}
	if out.Reasons == nil {
		out.Reasons = []string{}
	}
	done := exitOK
	if *exitCode {
		done = decisionExit(d.Outcome)
	}
	if *asJSON {
		writeJSON(e, out)
		return done
	}
	fmt.Fprintf(e.stdout, "decision: %s (tier %s delegation)\n", d.Outcome, out.Tier)
	if d.Rule != nil {
		fmt.Fprintf(e.stdout, "rule:     %d\n", *d.Rule)
	}
	if d.CanonicalSQL != "" {
		fmt.Fprintf(e.stdout, "runs as:  %s\n", d.CanonicalSQL)
	}
	fmt.Fprintf(e.stdout, "reasons:\n")
	for _, r := range out.Reasons {
		fmt.Fprintf(e.stdout, "  - %s\n", r)
	}
	return done
}

// The exit codes of check --exit-code, past 1 (failure) and 2 (usage).
const (
	exitSurvey = 3
	exitRefer  = 4
)

// decisionExit is check --exit-code's status: anything not certainly
// conforms or survey is refer.
func decisionExit(o sqlcheck.Outcome) int {
	switch o {
	case sqlcheck.Conforms:
		return exitOK
	case sqlcheck.Survey:
		return exitSurvey
	}
	return exitRefer
}

// hasRuleProblems reports problems that change what the rules mean (as
// opposed to signability problems such as a missing expiry, which do not
// stop an offline check).
func hasRuleProblems(r *bound.Report) bool {
	for _, p := range r.Problems {
		if len(p.Field) >= 5 && p.Field[:5] == "allow" {
			return true
		}
	}
	return false
}

func readAllLimited(e *env, limit int64) ([]byte, error) {
	buf, err := io.ReadAll(io.LimitReader(e.stdin, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(buf)) > limit {
		return nil, fmt.Errorf("over %d bytes", limit)
	}
	return buf, nil
}

func runKeygen(e *env, args []string) int {
	fs := e.flags("harbormaster keygen --out FILE [--name NAME] [--targets PATTERN]",
		"Makes an Ed25519 SSH key pair for a human signer: FILE (private, mode 0600) and\n"+
			"FILE.pub, and prints the allowed-signers line that lets NAME sign for targets\n"+
			"matching PATTERN. Keys from ssh-keygen -t ed25519 work the same way.")
	out := fs.String("out", "", "private key `FILE` to write")
	name := fs.String("name", "", "the signer's `NAME` for the allowed-signers line")
	targets := fs.String("targets", "*", "target `PATTERN` the signer may sign for")
	controlPlane := fs.Bool("control-plane", false, "make the control plane's Ed25519 key (PEM, for control_plane_key) instead")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if *out == "" {
		return e.usageErr(fs, "--out is required")
	}
	if _, err := os.Stat(*out); err == nil {
		e.errorf("%s already exists; not overwriting a key", *out)
		return exitUsage
	}
	if *controlPlane {
		if _, err := os.Stat(*out + ".pub"); err == nil {
			e.errorf("%s.pub already exists; not overwriting a key", *out)
			return exitUsage
		}
		pemKey, key, err := config.NewControlPlaneKey()
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		if err := writeNew(*out, pemKey, 0o600); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		vkey, err := logbook.CheckpointVerifierKey("harbormaster", node.PublicKey(key))
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		pubPEM, err := config.ControlPlanePublicKeyPEM(node.PublicKey(key))
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		if err := writeNew(*out+".pub", pubPEM, 0o644); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		fmt.Fprintf(e.stdout, "wrote %s and %s.pub (the public key, for a Pilot in its own process)\nlogbook verifier key (for a control plane named harbormaster): %s\n", *out, *out, vkey)
		return exitOK
	}
	priv, pub, err := generateKey(*name)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if *name != "" {
		if _, err := allowedLine(*name, *targets, pub); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
	}
	if err := writeNew(*out, priv, 0o600); err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if err := writeNew(*out+".pub", pub, 0o644); err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, "wrote %s and %s.pub\n", *out, *out)
	if *name != "" {
		line, err := allowedLine(*name, *targets, pub)
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		fmt.Fprintf(e.stdout, "allowed-signers line:\n%s\n", line)
	}
	return exitOK
}

// writeNew creates path with perm, refusing to overwrite.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func runToken(e *env, args []string) int {
	fs := e.flags("harbormaster token --principal agent:NAME [--json]",
		"Makes a random bearer token for an agent and prints it with the agents: entry for the\n"+
			"serve config, which stores only its SHA-256 and, for the wire front, a SCRAM\n"+
			"verifier derived from it. Give the token to the agent; it is not\n"+
			"stored anywhere.")
	principal := fs.String("principal", "", "the agent `PRINCIPAL` (agent:NAME)")
	asJSON := fs.Bool("json", false, "print the principal, token and token_sha256 as JSON")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if *principal == "" || fs.NArg() > 0 {
		return e.usageErr(fs, "--principal is required")
	}
	tok, sum := config.NewAgentToken()
	if *asJSON {
		writeJSON(e, map[string]string{"principal": *principal, "token": tok, "token_sha256": sum, "pg_scram": pgwire.NewVerifier(tok)})
		return exitOK
	}
	fmt.Fprintf(e.stdout, "token: %s\n\nagents:\n  - principal: %s\n    token_sha256: %s\n    pg_scram: %s\n", tok, *principal, sum, pgwire.NewVerifier(tok))
	return exitOK
}
