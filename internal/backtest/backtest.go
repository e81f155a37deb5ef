// Package backtest replays the statements a grantee sent to a target, as
// the logbook recorded them, through the static check of a delegation that
// is not signed yet, and says what it would have done with each of them
// against what happened then: the grantor sees what they are about to
// grant on real traffic before signing it (DESIGN.md section 4).
//
// A backtest is a grantor's tool. It reads the logbook and nothing else of
// the control plane; it executes nothing and never reaches a target (the
// catalog it checks against is handed in, read by the caller from a schema
// file or the target's catalog); it is not served to agents. Every
// statement is re-parsed by the real PostgreSQL parser and re-checked by
// sqlcheck, exactly as the gateway's step 3 does, so a statement that
// would be referred for a reason the check finds is referred here for the
// same reason. What the check cannot replay is said plainly on the
// report: quotas, switches, suspensions and the Surveyor's judgment are
// decided at request time, so "surveyed" means "the Surveyor would judge
// it", not "it would have run".
package backtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/ledger/entry"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Outcome is what happened to a statement, or what would happen to it.
type Outcome string

// The outcomes. FastPath, Surveyed and Referred are the static check's
// three answers for the new delegation (conforms, survey, refer);
// Rejected is a statement the gateway answers as an error at once,
// whatever the delegations (sqlcheck.Analysis.Rejected: it does not parse,
// or no human could approve it: several statements, DDL, a placeholder),
// and Refused one that was past its principal's referral rate or waiting
// cap (floods) then, which only the recorded side can have.
const (
	FastPath Outcome = "fast_path" // ran at once, on the compiled path (conforms)
	Surveyed Outcome = "surveyed"  // inside the bound only through a residual rule: the Surveyor judges it
	Referred Outcome = "referred"  // a human decides
	Rejected Outcome = "rejected"  // answered as an error at once (does not parse, or no human could approve it): nothing to decide
	Refused  Outcome = "refused"   // past the principal's referral rate or waiting cap (recorded only)
)

// rank orders outcomes by how much runs without a human: a row whose
// outcome rises is one the new delegation would let through where the old
// traffic was stopped.
func (o Outcome) rank() int {
	switch o {
	case FastPath:
		return 2
	case Surveyed:
		return 1
	}
	return 0
}

// Reader is the logbook as the backtest reads it: *logbook.Logbook.
type Reader interface {
	Iterate(ctx context.Context, q logbook.Query, fn func(logbook.Entry) error) error
}

// Input is one backtest.
type Input struct {
	// Logbook is read for the grantee's decisions on the target. Required.
	Logbook Reader
	// Delegation is the new delegation, compiled (bound.Compile) and not
	// necessarily signed. Its grantee and target select the statements.
	// Required.
	Delegation *bound.Bound
	// Catalog is the target's catalog the statements are checked against
	// (a schema file or the live catalog, read by the caller). Required.
	Catalog *sqlcheck.Catalog
	// Since is how far back the window reaches from Now. Required, positive.
	Since time.Duration
	// Now ends the window. Defaults to time.Now().
	Now time.Time
	// Limits cap statements before parsing, as the gateway's. Defaults to
	// sqlcheck's.
	Limits sqlcheck.Limits
	// MaxRows caps Report.Rows (the totals count every statement).
	// Defaults to 1000.
	MaxRows int
}

// Report is a backtest's result: totals over the window and a row per
// statement, oldest first.
type Report struct {
	Grantee string    `json:"grantee"`
	Target  string    `json:"target"`
	Tier    string    `json:"tier"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Totals  Totals    `json:"totals"`
	Rows    []Row     `json:"rows"`
	// Truncated says Rows stops at Input.MaxRows; the totals do not.
	Truncated bool `json:"truncated"`
	// Caveat says what a static replay cannot know.
	Caveat string `json:"caveat"`
}

// Totals count the statements of the window by outcome. Each statement is
// counted once in Would, once in Was, and, if its outcome changed, once in
// exactly one of Wider, Narrower and Neither.
type Totals struct {
	Statements int `json:"statements"`
	// Would is what the new delegation's static check would do.
	Would Counts `json:"would"`
	// Was is what the decision recorded then was.
	Was Counts `json:"was"`
	// Changed counts statements whose outcome differs; Wider those that
	// would run with less human involvement than they did (referred then,
	// fast path or surveyed now), Narrower the reverse, and Neither those
	// that run without a human neither then nor now (between referred,
	// rejected and refused).
	Changed  int `json:"changed"`
	Wider    int `json:"wider"`
	Narrower int `json:"narrower"`
	Neither  int `json:"neither"`
}

// Counts are statements by outcome.
type Counts struct {
	FastPath int `json:"fast_path"`
	Surveyed int `json:"surveyed"`
	Referred int `json:"referred"`
	Rejected int `json:"rejected"`
	Refused  int `json:"refused"`
}

func (c *Counts) add(o Outcome) {
	switch o {
	case FastPath:
		c.FastPath++
	case Surveyed:
		c.Surveyed++
	case Referred:
		c.Referred++
	case Rejected:
		c.Rejected++
	case Refused:
		c.Refused++
	}
}

// Row is one statement of the window.
type Row struct {
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id"`
	// Statement is the text the agent sent: untrusted, escape it wherever
	// it is rendered.
	Statement string `json:"statement"`
	// Was is the decision recorded then, WasReasons its reasons, and
	// WasDelegation the delegation that covered it, if any.
	Was           Outcome  `json:"was"`
	WasReasons    []string `json:"was_reasons"`
	WasDelegation string   `json:"was_delegation,omitempty"`
	// Then is what came of the decision afterwards: for a referral what a
	// human or the queue did ("approved", "denied", "expired"), for a
	// statement sent to the Pilot that it rolled back and referred
	// ("rolled back by the Pilot: CODE"), or "".
	Then string `json:"then,omitempty"`
	// Would is the new delegation's static check, Rule the rule it relies
	// on, Reasons every reason the check gave.
	Would   Outcome  `json:"would"`
	Rule    *int     `json:"rule"`
	Reasons []string `json:"reasons"`
	// CanonicalSQL is the statement as the check deparsed it.
	CanonicalSQL string `json:"canonical_sql"`
	// Changed says Would differs from Was.
	Changed bool `json:"changed"`
}

// Caveat is Report.Caveat.
const Caveat = "a static replay: quotas, the Tier B switches, suspensions and the Surveyor's judgment are decided " +
	"when a statement arrives, so \"surveyed\" means the Surveyor would judge it (and a human if Tier B is off), " +
	"and a statement on the fast path still takes quota"

// Errors of Run.
var (
	ErrBadInput = errors.New("backtest: bad input")
)

// decision is a decision entry's payload, in the schema the ledger writes.
type decision = entry.Decision

// Run replays the window. It reads the entries about the grantee (the
// logbook's subject index serves it) and checks each decision's statement
// against the delegation; it writes nothing anywhere.
func Run(ctx context.Context, in Input) (*Report, error) {
	switch {
	case in.Logbook == nil || in.Delegation == nil || in.Catalog == nil:
		return nil, fmt.Errorf("%w: the logbook, the delegation and the catalog are required", ErrBadInput)
	case in.Since <= 0:
		return nil, fmt.Errorf("%w: the window must be positive, got %s", ErrBadInput, in.Since)
	case in.Delegation.Grantee == "" || in.Delegation.Target == "":
		return nil, fmt.Errorf("%w: the delegation names no grantee or target", ErrBadInput)
	}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	if in.MaxRows <= 0 {
		in.MaxRows = 1000
	}
	rules, err := in.Delegation.CheckRules()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	checker := &sqlcheck.Checker{Catalog: in.Catalog, Limits: in.Limits.WithDefaults()}
	rep := &Report{Grantee: in.Delegation.Grantee, Target: in.Delegation.Target, Tier: in.Delegation.Tier(),
		From: in.Now.Add(-in.Since).UTC(), To: in.Now.UTC(), Rows: []Row{}, Caveat: Caveat}
	then := map[string]string{} // request id -> approved, denied, expired
	var rows []Row
	err = in.Logbook.Iterate(ctx, logbook.Query{SubjectKey: "principal", SubjectValue: in.Delegation.Grantee}, func(e logbook.Entry) error {
		if e.Subjects["target"] != in.Delegation.Target || e.Time.Before(rep.From) || e.Time.After(rep.To) {
			return nil
		}
		switch e.Kind {
		case logbook.KindApproval:
			then[e.Subjects["request"]] = "approved"
		case logbook.KindDenial:
			then[e.Subjects["request"]] = "denied"
		case logbook.KindExpiry:
			then[e.Subjects["request"]] = "expired"
		case logbook.KindDecision:
			d, err := entry.ReadDecision(e.Payload)
			if err != nil {
				return fmt.Errorf("backtest: decision entry %d: %w", e.Seq, err)
			}
			if d.Principal != in.Delegation.Grantee || d.Target != in.Delegation.Target {
				return nil
			}
			rows = append(rows, replay(checker, rules, e, d))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("backtest: %w", err)
	}
	if len(rows) > 0 {
		// Execution entries name no principal: one pass over the window's.
		sent := map[string]bool{}
		for _, r := range rows {
			if r.Was == FastPath || r.Was == Surveyed {
				sent[r.RequestID] = true
			}
		}
		err = in.Logbook.Iterate(ctx, logbook.Query{From: rows[0].Seq, Kind: logbook.KindExecution}, func(e logbook.Entry) error {
			id := e.Subjects["request"]
			if !sent[id] {
				return nil
			}
			var x struct{ Outcome, Code string }
			if err := json.Unmarshal(e.Payload, &x); err != nil {
				return fmt.Errorf("backtest: execution entry %d: %w", e.Seq, err)
			}
			if x.Outcome != "executed" {
				then[id] = "rolled back by the Pilot: " + x.Code
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("backtest: %w", err)
		}
	}
	for i := range rows {
		r := &rows[i]
		r.Then = then[r.RequestID]
		t := &rep.Totals
		t.Statements++
		t.Would.add(r.Would)
		t.Was.add(r.Was)
		if r.Changed {
			t.Changed++
			switch {
			case r.Would.rank() > r.Was.rank():
				t.Wider++
			case r.Would.rank() < r.Was.rank():
				t.Narrower++
			default:
				t.Neither++
			}
		}
	}
	if len(rows) > in.MaxRows {
		rows, rep.Truncated = rows[len(rows)-in.MaxRows:], true
	}
	if rows != nil {
		rep.Rows = rows
	}
	return rep, nil
}

// replay checks one recorded statement against the new rules.
func replay(checker *sqlcheck.Checker, rules []sqlcheck.Rule, e logbook.Entry, d decision) Row {
	r := Row{Seq: e.Seq, Time: e.Time, RequestID: d.RequestID, Statement: d.Statement,
		Was: recorded(d), WasReasons: nonNil(d.Reasons), WasDelegation: d.DelegationID}
	a := sqlcheck.Analyze(d.Statement, checker.Catalog, checker.Limits)
	// The gateway's step 2: such a statement is answered as an error
	// before any delegation is consulted, whatever the delegation.
	if why, ok := a.Rejected(); ok {
		r.Would, r.Reasons, r.CanonicalSQL = Rejected, []string{why.String()}, a.Canonical
		r.Changed = r.Would != r.Was
		return r
	}
	dec := sqlcheck.Check(a, rules)
	r.Rule, r.Reasons, r.CanonicalSQL = dec.Rule, nonNil(dec.ReasonStrings()), dec.CanonicalSQL
	switch {
	case dec.Outcome == sqlcheck.Conforms:
		r.Would = FastPath
	case dec.Outcome == sqlcheck.Survey:
		r.Would = Surveyed
	default:
		r.Would = Referred
	}
	r.Changed = r.Would != r.Was
	return r
}

// recorded is the outcome a decision entry records. The gateway writes
// "run" with the path for a statement it sent to the Pilot, "referred",
// "rejected" or "refused" otherwise.
func recorded(d decision) Outcome {
	switch {
	case d.Outcome == "rejected":
		return Rejected
	case d.Outcome == "refused":
		return Refused
	case d.Path == "surveyed":
		return Surveyed
	case d.Path != "":
		return FastPath
	}
	return Referred
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ParseWindow parses a window length: a whole number of weeks (2w), days
// (30d), hours (12h) or minutes (90m), or any Go duration (1h30m).
func ParseWindow(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n := len(s); n >= 2 {
		unit := map[byte]time.Duration{'w': 7 * 24 * time.Hour, 'd': 24 * time.Hour}[s[n-1]]
		if unit != 0 {
			k, err := strconv.ParseInt(s[:n-1], 10, 32)
			if err != nil || k <= 0 {
				return 0, fmt.Errorf("window %q: want a positive whole number before %q, as in 30d", s, s[n-1:])
			}
			return time.Duration(k) * unit, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("window %q: want a positive length such as 30d, 12h or 90m", s)
	}
	return d, nil
}

// ErrDoesNotCompile is returned by Compile for a delegation whose rules do
// not compile against the catalog; the report says why.
var ErrDoesNotCompile = errors.New("backtest: the delegation does not compile")

// Compile parses and compiles a delegation file (YAML, signed or not)
// against cat for Run. A delegation that could not be signed for another
// reason (a missing or past expiry, say) still backtests; one whose rules
// do not compile returns ErrDoesNotCompile with the report, whose
// Problems say why.
func Compile(yaml []byte, name string, cat *sqlcheck.Catalog) (*bound.Bound, *bound.Report, error) {
	d, err := bound.Parse(yaml, name)
	if err != nil {
		return nil, nil, err
	}
	b, rep := bound.Compile(d, cat, bound.Options{})
	if len(b.Rules) != len(rep.Rules) {
		return nil, rep, ErrDoesNotCompile
	}
	for _, p := range rep.Problems {
		if strings.HasPrefix(p.Field, "allow") {
			return nil, rep, ErrDoesNotCompile
		}
	}
	return b, rep, nil
}
