package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor/regress"
)

func runSurveyor(e *env, args []string) int {
	return e.dispatch("harbormaster surveyor", []command{
		{"regress", "run the regression suite against the configured providers (the release gate)", runSurveyorRegress},
		{"mark-auditable", "mark a residual clause auditable from the evidence set (a reviewer's signed act)", runMarkAuditable},
		{"enable", "enable or disable the Surveyor for a residual rule (a signed act)", runSurveyorEnable},
		{"reinstate", "lift an audit suspension of a delegation's fast path (a signed act)", runReinstate},
	}, args)
}

func runSurveyorRegress(e *env, args []string) int {
	fs := e.flags("harbormaster surveyor regress [--suite DIR] --config FILE",
		"Runs the Surveyor regression suite (injection attempts, near misses, statements that\n"+
			"conform in form but not in intent, and positives) against the providers in the\n"+
			"config's surveyor section, with a summary per class. Exits 1 if any must-refer\n"+
			"case comes back conforms: the release gate for any prompt-bundle or model change.")
	suite := fs.String("suite", "testdata/surveyor/suite", "the suite `DIR`")
	cfgPath := fs.String("config", "", "a serve config `FILE` with a surveyor section")
	allowFailed := fs.Bool("allow-failed", false, "pass even if some jurors failed to answer (by default a provider that fails to answer fails the run: it proves nothing)")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if *cfgPath == "" {
		return e.usageErr(fs, "--config is required")
	}
	cfg, err := config.LoadSurveyor(*cfgPath)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	panel, err := node.NewPanel(cfg.Surveyor, e.getenv)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if panel == nil {
		e.errorf("%s configures no surveyor providers", *cfgPath)
		return exitUsage
	}
	cases, err := regress.Load(*suite)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, "running %d cases with %d jurors, bundle %s\n", len(cases), cfg.Surveyor.Jurors, panel.Bundle().Version)
	sum := regress.Run(e.ctx, panel, cases, e.stderr)
	sum.WriteTable(e.stdout)
	if !sum.Passed() {
		e.errorf("the release gate failed: %d must-refer case(s) came back conforms", len(sum.GateFailures))
		return exitFail
	}
	if n := sum.FailedToAnswer(); n > 0 && !*allowFailed {
		e.errorf("%d judgment(s) had a juror that failed to answer; the run proves nothing about them (check the providers, or pass --allow-failed)", n)
		return exitFail
	}
	fmt.Fprintln(e.stdout, "release gate passed: no must-refer case came back conforms")
	return exitOK
}

// signAct signs a canonical act and posts it.
func (e *env) postAct(c *humanClient, path, namespace string, act any, out any) error {
	b, err := acts.Canonical(act)
	if err != nil {
		return err
	}
	sig, err := c.key.Sign(namespace, b)
	if err != nil {
		return err
	}
	return c.do(http.MethodPost, path, "", map[string]string{"act": string(b), "signature": string(sig)}, out)
}

func runMarkAuditable(e *env, args []string) int {
	fs := e.flags("harbormaster surveyor mark-auditable DELEGATION_ID RULE --server URL --key KEY [--note TEXT]",
		"As a reviewer, states that the residual clause of RULE can be judged from the\n"+
			"evidence set (statement, sentence, bound, juror verdicts, rehearsal), so the sampled\n"+
			"audit can correct it. Required before the Surveyor can be enabled for the rule.\n"+
			"Signed with your SSH key (namespace harbormaster-review).")
	var sf serverFlags
	sf.register(e, fs)
	note := fs.String("note", "", "why it is auditable")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	rule, err := strconv.Atoi(fs.Arg(1))
	if fs.NArg() != 2 || err != nil {
		return e.usageErr(fs, "expected DELEGATION_ID RULE")
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	if err := e.postAct(c, "/v1/delegations/"+fs.Arg(0)+"/auditable", signing.NamespaceReview,
		acts.Auditable{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindAuditable, DelegationID: fs.Arg(0), Rule: rule, Note: *note}, nil); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	fmt.Fprintf(e.stdout, "rule %d of %s is marked auditable\n", rule, fs.Arg(0))
	return exitOK
}

func runSurveyorEnable(e *env, args []string) int {
	fs := e.flags("harbormaster surveyor enable DELEGATION_ID RULE on|off --server URL --key KEY [--surveyor ID] [--bundle VERSION]",
		"Enables (or disables) the Surveyor for one residual rule: a signed act (namespace\n"+
			"harbormaster-enable) naming the Surveyor identity, the rule and the prompt bundle in\n"+
			"force. The rule must be marked auditable first, and Tier B must also be switched on\n"+
			"for the deployment and the target (harbormaster switch).")
	var sf serverFlags
	sf.register(e, fs)
	sid := fs.String("surveyor", "surveyor:default", "the Surveyor `IDENTITY`")
	bundle := fs.String("bundle", surveyor.DefaultBundle().Version, "the prompt bundle `VERSION` in force")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	rule, err := strconv.Atoi(fs.Arg(1))
	if fs.NArg() != 3 || err != nil || (fs.Arg(2) != "on" && fs.Arg(2) != "off") {
		return e.usageErr(fs, "expected DELEGATION_ID RULE on|off")
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	if err := e.postAct(c, "/v1/delegations/"+fs.Arg(0)+"/surveyor", signing.NamespaceEnable,
		acts.Enable{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindEnable, DelegationID: fs.Arg(0), Rule: rule, Surveyor: *sid, Bundle: *bundle, On: fs.Arg(2) == "on"}, nil); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	fmt.Fprintf(e.stdout, "the Surveyor %s is %s for rule %d of %s (bundle %s)\n", *sid, fs.Arg(2), rule, fs.Arg(0), *bundle)
	return exitOK
}

func runReinstate(e *env, args []string) int {
	fs := e.flags("harbormaster surveyor reinstate DELEGATION_ID --server URL --key KEY --note TEXT",
		"Lifts a suspension the sampled audit put on a delegation's fast path: a grantor's\nsigned act (namespace harbormaster-enable).")
	var sf serverFlags
	sf.register(e, fs)
	note := fs.String("note", "", "why")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || *note == "" {
		return e.usageErr(fs, "expected DELEGATION_ID and --note")
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	if err := e.postAct(c, "/v1/delegations/"+fs.Arg(0)+"/reinstate", signing.NamespaceEnable,
		acts.Reinstate{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindReinstate, DelegationID: fs.Arg(0), Note: *note}, nil); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	fmt.Fprintf(e.stdout, "%s is reinstated\n", fs.Arg(0))
	return exitOK
}

func runAudit(e *env, args []string) int {
	return e.dispatch("harbormaster audit", []command{
		{"list", "list sampled judgments waiting for review", runAuditList},
		{"show", "show one sampled judgment's evidence set", runAuditShow},
		{"review", "mark a sampled judgment right or wrong (a signed act)", runAuditReview},
	}, args)
}

func runAuditList(e *env, args []string) int {
	fs := e.flags("harbormaster audit list --server URL --key KEY [--all] [--json]", "Lists sampled Surveyor judgments waiting for review.")
	var sf serverFlags
	sf.register(e, fs)
	all := fs.Bool("all", false, "include reviewed ones")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	path := "/v1/audit?status=pending"
	if *all {
		path = "/v1/audit"
	}
	var out struct {
		Audits []audit.Audit `json:"audits"`
	}
	if err := c.do(http.MethodGet, path, signing.NamespaceSession, nil, &out); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	if *asJSON {
		writeJSON(e, out)
		return exitOK
	}
	if len(out.Audits) == 0 {
		fmt.Fprintln(e.stdout, "no sampled judgment is waiting for review")
	}
	for _, a := range out.Audits {
		fmt.Fprintf(e.stdout, "%s  %s  request %s  delegation %s  %s\n    %s\n", a.ID, a.Created.Local().Format(time.DateTime), a.RequestID, a.DelegationID, a.Status, a.Why)
	}
	return exitOK
}

func runAuditShow(e *env, args []string) int {
	fs := e.flags("harbormaster audit show ID --server URL --key KEY", "Shows a sampled judgment's evidence set: the statement as submitted and as signed,\nthe sentence, the bound, every juror's framing and verdict, and the rehearsal.")
	var sf serverFlags
	sf.register(e, fs)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "expected one audit ID")
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	var a audit.Audit
	if err := c.do(http.MethodGet, "/v1/audit/"+fs.Arg(0), signing.NamespaceSession, nil, &a); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	var ev map[string]json.RawMessage
	_ = json.Unmarshal(a.Evidence, &ev)
	fmt.Fprintf(e.stdout, "audit %s (%s): %s\n", a.ID, a.Status, a.Why)
	for _, k := range []string{"sentence", "residual", "statement_submitted", "statement_signed", "bound", "jurors", "correlated", "rehearsal", "bundle"} {
		if v, ok := ev[k]; ok {
			fmt.Fprintf(e.stdout, "%-20s %s\n", k+":", oneLine(string(v), 2000))
		}
	}
	return exitOK
}

func runAuditReview(e *env, args []string) int {
	fs := e.flags("harbormaster audit review ID right|wrong --server URL --key KEY [--note TEXT] [--json]",
		"Records your verdict on a sampled judgment, signed with your SSH key (namespace\n"+
			"harbormaster-review). A wrong verdict writes a logbook finding, notifies the grantor\n"+
			"and, at the threshold, suspends the delegation's fast path.")
	var sf serverFlags
	sf.register(e, fs)
	note := fs.String("note", "", "what you found")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 || (fs.Arg(1) != "right" && fs.Arg(1) != "wrong") {
		return e.usageErr(fs, "expected ID right|wrong")
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	var out struct {
		Suspended bool `json:"delegation_suspended"`
	}
	if err := e.postAct(c, "/v1/audit/"+fs.Arg(0)+"/review", signing.NamespaceReview,
		acts.Review{Version: 1, Kind: acts.KindReview, AuditID: fs.Arg(0), Verdict: fs.Arg(1), Note: *note}, &out); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	if *asJSON {
		writeJSON(e, map[string]any{"audit_id": fs.Arg(0), "verdict": fs.Arg(1), "delegation_suspended": out.Suspended})
		return exitOK
	}
	fmt.Fprintf(e.stdout, "reviewed %s: %s\n", fs.Arg(0), fs.Arg(1))
	if out.Suspended {
		fmt.Fprintln(e.stdout, "the delegation's fast path is now suspended until a grantor reinstates it")
	}
	return exitOK
}
