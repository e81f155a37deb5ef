package bound

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// CompilerVersion is recorded in every bound's provenance.
const CompilerVersion = "harbormaster-compiler/1"

// NoBundle is the prompt-bundle provenance when no Surveyor bundle is in force.
const NoBundle = "none"

// DefaultSelectMaxRows caps reads of a select rule that gives no max_rows.
const DefaultSelectMaxRows = 1000

// LargeTableRows is the estimated row count above which an unfenced select
// rule is linted.
const LargeTableRows = 10000

// Bound is the compiled, deterministic part of a delegation: what a grantor
// signs. Its canonical JSON (Canonical) is the signed bytes. A Bound never
// changes once signed.
type Bound struct {
	Version    int        `json:"version"`
	Sentence   string     `json:"sentence"`
	Grantee    string     `json:"grantee"`
	Target     string     `json:"target"`
	NotBefore  string     `json:"not_before,omitempty"`
	Expires    string     `json:"expires"`
	Quota      *Quota     `json:"quota,omitempty"`
	SearchPath []string   `json:"search_path"`
	Rules      []Rule     `json:"rules"`
	Provenance Provenance `json:"provenance"`
}

// Quota is the fast-path rate a grantor signed: Count statements per Per.
type Quota struct {
	Count int64  `json:"count"`
	Per   string `json:"per"`
}

// String renders "120/hour".
func (q Quota) String() string { return fmt.Sprintf("%d/%s", q.Count, q.Per) }

// Interval is the quota window as a duration.
func (q Quota) Interval() time.Duration {
	switch q.Per {
	case "second":
		return time.Second
	case "minute":
		return time.Minute
	case "hour":
		return time.Hour
	case "day":
		return 24 * time.Hour
	}
	return 0
}

// Provenance records what produced the bound.
type Provenance struct {
	Compiler string `json:"compiler"`
	Bundle   string `json:"bundle"`
}

// Rule is one compiled rule: op table(columns) fence check max_rows.
type Rule struct {
	Op       sqlcheck.Op `json:"op"`
	Table    string      `json:"table"`
	Columns  []string    `json:"columns"`
	Fence    string      `json:"fence,omitempty"`
	Check    string      `json:"check,omitempty"`
	MaxRows  int64       `json:"max_rows"`
	Residual string      `json:"residual,omitempty"`
}

// TableName parses the rule's qualified table name.
func (r Rule) TableName() (sqlcheck.TableName, error) {
	s, n, err := sqlcheck.ParseRelationName(r.Table)
	if err != nil {
		return sqlcheck.TableName{}, err
	}
	if s == "" {
		return sqlcheck.TableName{}, fmt.Errorf("bound: rule table %q is not schema-qualified", r.Table)
	}
	return sqlcheck.TableName{Schema: s, Name: n}, nil
}

// Tier is "A" when no rule has a residual clause, else "B".
func (b *Bound) Tier() string {
	for _, r := range b.Rules {
		if r.Residual != "" {
			return "B"
		}
	}
	return "A"
}

// CheckRules returns the rules in the form the static check takes.
func (b *Bound) CheckRules() ([]sqlcheck.Rule, error) {
	out := make([]sqlcheck.Rule, len(b.Rules))
	for i, r := range b.Rules {
		t, err := r.TableName()
		if err != nil {
			return nil, err
		}
		out[i] = sqlcheck.Rule{Index: i, Op: r.Op, Table: t, Columns: r.Columns, Residual: r.Residual != ""}
	}
	return out, nil
}

// ExpiresAt and NotBeforeAt parse the signed times.
func (b *Bound) ExpiresAt() (time.Time, error) { return time.Parse(time.RFC3339, b.Expires) }

// NotBeforeAt returns the zero time when the bound has no not_before.
func (b *Bound) NotBeforeAt() (time.Time, error) {
	if b.NotBefore == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339, b.NotBefore)
}

// ActiveAt reports whether now is inside [not_before, expires).
func (b *Bound) ActiveAt(now time.Time) bool {
	exp, err := b.ExpiresAt()
	if err != nil || !now.Before(exp) {
		return false
	}
	nb, err := b.NotBeforeAt()
	return err == nil && !now.Before(nb)
}

// Canonical returns the exact bytes a grantor signs: JSON with fields in a
// fixed order, no insignificant whitespace, no HTML escaping, and a final
// newline.
func (b *Bound) Canonical() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return nil, fmt.Errorf("bound: canonical: %w", err)
	}
	return buf.Bytes(), nil
}

// ID derives a delegation id from the signed canonical bytes.
func ID(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "dlg_" + hex.EncodeToString(sum[:12])
}

// SHA256 is the hex SHA-256 of the canonical bytes.
func SHA256(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// ParseCanonical reads signed canonical bytes back into a Bound, refusing
// anything that is not exactly canonical (so two byte strings never decode
// to the same bound).
func ParseCanonical(data []byte) (*Bound, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("bound: canonical form over %d bytes", MaxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var b Bound
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("bound: parse canonical: %w", err)
	}
	again, err := b.Canonical()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, data) {
		return nil, fmt.Errorf("bound: parse canonical: the bytes are not in canonical form")
	}
	if b.Version != 1 {
		return nil, fmt.Errorf("bound: parse canonical: unknown version %d", b.Version)
	}
	for i, r := range b.Rules {
		if r.Columns == nil {
			return nil, fmt.Errorf("bound: parse canonical: rule %d: columns must be a list", i)
		}
	}
	if _, err := b.CheckRules(); err != nil {
		return nil, fmt.Errorf("bound: parse canonical: %w", err)
	}
	return &b, nil
}

// Options tune compilation.
type Options struct {
	// Bundle is the Surveyor prompt-bundle version in force, recorded in
	// the provenance. Defaults to NoBundle.
	Bundle string
	// Now, when set, lets Compile flag an expiry in the past.
	Now func() time.Time
}

// Problem is something that makes a delegation unsignable; Lint is advice.
type Problem struct {
	Field   string `json:"field"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// RuleReport is the compilation report for one rule.
type RuleReport struct {
	Index    int    `json:"index"`
	Op       string `json:"op"`
	Table    string `json:"table"`
	Route    string `json:"route"` // "compiled" or "residual"
	Summary  string `json:"summary"`
	Residual string `json:"residual,omitempty"`
	// Note says what the rule's max_rows bounds, where that is easy to
	// misread (select rules).
	Note string `json:"note,omitempty"`
	// Gates is the CoVer gate evidence on the rule's fence and check, when
	// the delegation was compiled against a live target.
	Gates *RuleGates `json:"gates,omitempty"`
}

// ReadCapNote is the Note of every select rule: what max_rows bounds on
// a read (docs/security.md, "What max_rows bounds on a read").
const ReadCapNote = "max_rows caps the rows one read returns, not the rows it reads: an aggregate (count, sum, string_agg) can summarize every row inside the fence in one row; the fence and the columns bound what a read can learn"

// Report is what Compile says about a delegation.
type Report struct {
	Tier              string       `json:"tier"`
	Signable          bool         `json:"signable"`
	Problems          []Problem    `json:"problems"`
	Lints             []Problem    `json:"lints"`
	Rules             []RuleReport `json:"rules"`
	FallbackAuthority string       `json:"fallback_authority,omitempty"`
	// DelegationID and CanonicalSHA256 identify the bytes a signature
	// would cover (empty when not signable).
	DelegationID    string `json:"delegation_id,omitempty"`
	CanonicalSHA256 string `json:"canonical_sha256,omitempty"`
	// SideEffects are the triggers, rewrite rules and foreign-key cascades
	// on the tables in scope (compiled against a live target only): their
	// effects escape a fence.
	SideEffects []SideEffect `json:"side_effects,omitempty"`
	// GatesNote says how the gates ran (sample rows, other delegations
	// considered), or why they did not.
	GatesNote string `json:"gates_note,omitempty"`
}

var (
	granteeRE = regexp.MustCompile(`^agent:[a-z0-9][a-z0-9._-]{0,62}$`)
	targetRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	quotaRE   = regexp.MustCompile(`^([0-9]{1,9})\s*/\s*(second|minute|hour|day)$`)
)

// Compile turns a delegation into its bound against a catalog, with the
// report. The bound is nil only when the delegation is too broken to
// render; otherwise it is returned even when the report lists problems, so
// a human can see it, but only a Report with Signable may be signed.
func Compile(d *Delegation, cat *sqlcheck.Catalog, opt Options) (*Bound, *Report) {
	if opt.Bundle == "" {
		opt.Bundle = NoBundle
	}
	rep := &Report{Problems: []Problem{}, Lints: []Problem{}, Rules: []RuleReport{}}
	prob := func(field, format string, args ...any) {
		rep.Problems = append(rep.Problems, Problem{Field: field, Line: d.Line(field), Message: fmt.Sprintf(format, args...)})
	}
	lint := func(field, format string, args ...any) {
		rep.Lints = append(rep.Lints, Problem{Field: field, Line: d.Line(field), Message: fmt.Sprintf(format, args...)})
	}
	b := &Bound{Version: 1, Sentence: d.Sentence, Grantee: d.Grantee, Target: d.Target,
		SearchPath: cat.SearchPath(), Rules: []Rule{}, Provenance: Provenance{Compiler: CompilerVersion, Bundle: opt.Bundle}}
	if d.Sentence == "" {
		prob("sentence", "required: the plain-language grant the rules implement")
	}
	if !granteeRE.MatchString(d.Grantee) {
		prob("grantee", "must be an agent principal such as agent:ops-bot, got %q", d.Grantee)
	}
	if !targetRE.MatchString(d.Target) {
		prob("target", "must be a target name of lower-case letters, digits, _ and -, got %q", d.Target)
	}
	if d.Expires == nil {
		prob("expires", "required: every delegation must expire")
	} else {
		b.Expires = d.Expires.UTC().Format(time.RFC3339)
		if opt.Now != nil && !d.Expires.After(opt.Now()) {
			prob("expires", "%s is already past", b.Expires)
		}
	}
	if d.NotBefore != nil {
		b.NotBefore = d.NotBefore.UTC().Format(time.RFC3339)
		if d.Expires != nil && !d.Expires.After(*d.NotBefore) {
			prob("not_before", "must be before expires")
		}
	}
	if d.Quota != "" {
		m := quotaRE.FindStringSubmatch(strings.ToLower(d.Quota))
		if m == nil {
			prob("quota", "must look like 120/hour (per second, minute, hour or day), got %q", d.Quota)
		} else {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			if n <= 0 {
				prob("quota", "must allow at least one statement")
			}
			b.Quota = &Quota{Count: n, Per: m[2]}
		}
	}
	fences := map[int][]string{} // allow index -> the columns its fence reads
	for i, rs := range d.Allow {
		field := fmt.Sprintf("allow[%d]", i)
		r, fenceCols, ok := compileRule(rs, field, cat, prob, lint)
		if !ok {
			continue
		}
		fences[i] = fenceCols
		b.Rules = append(b.Rules, r)
		route := "compiled"
		if r.Residual != "" {
			route = "residual"
		}
		rr := RuleReport{Index: i, Op: string(r.Op), Table: r.Table, Route: route, Summary: Summary(r), Residual: r.Residual}
		if r.Op == sqlcheck.OpSelect {
			rr.Note = ReadCapNote
		}
		rep.Rules = append(rep.Rules, rr)
	}
	lintUnreadableFences(b.Rules, rep.Rules, fences, lint)
	lintHiddenConstraints(b.Rules, rep.Rules, cat, lint)
	dupes := map[string]int{}
	for i, r := range b.Rules {
		key := string(r.Op) + " " + r.Table
		if j, ok := dupes[key]; ok && (r.Op != sqlcheck.OpSelect || b.Rules[j].Fence == r.Fence) {
			lint(fmt.Sprintf("allow[%d]", i), "rule %d already grants %s on %s; the first covering rule wins", j, r.Op, r.Table)
		}
		dupes[key] = i
	}
	rep.Tier = b.Tier()
	if rep.Tier == "B" {
		rep.FallbackAuthority = FallbackAuthority(b)
	}
	rep.Signable = len(rep.Problems) == 0
	if rep.Signable {
		if c, err := b.Canonical(); err == nil {
			rep.DelegationID = ID(c)
			rep.CanonicalSHA256 = SHA256(c)
		} else {
			rep.Signable = false
			prob("", "cannot render the canonical form: %v", err)
		}
	}
	return b, rep
}

// lintUnreadableFences flags a write rule's fence column that no select
// rule on its table lets the grantee read. A write that reaches a row
// outside its fence is rolled back, so an agent stays inside by filtering
// on the fence's own columns (WHERE status = 'pending'), and a read of a
// column no select rule lists is referred: such a delegation refers the
// very statements it was written for.
func lintUnreadableFences(rules []Rule, reports []RuleReport, fences map[int][]string, lint func(string, string, ...any)) {
	readable := map[string]map[string]bool{}
	for _, r := range rules {
		if r.Op != sqlcheck.OpSelect {
			continue
		}
		if readable[r.Table] == nil {
			readable[r.Table] = map[string]bool{}
		}
		for _, c := range r.Columns {
			readable[r.Table][c] = true
		}
	}
	for k, r := range rules {
		if r.Op == sqlcheck.OpSelect {
			// A read's fence is applied for the agent (a security-barrier
			// view): it need not filter on it. A write's fence is a guard the
			// agent's WHERE must stay inside.
			continue
		}
		i := reports[k].Index
		var missing []string
		for _, c := range fences[i] {
			if !readable[r.Table][c] && !slices.Contains(missing, c) {
				missing = append(missing, c)
			}
		}
		if len(missing) == 0 {
			continue
		}
		sort.Strings(missing)
		lint(fmt.Sprintf("allow[%d].fence", i), "the fence reads %s, which no select rule on %s lets the grantee read: "+
			"a statement that filters on it, as agents commonly do to reach the fenced rows, is referred (column_not_readable); "+
			"add it to a select rule's columns", quotedList(missing), r.Table)
	}
}

func compileRule(rs RuleSpec, field string, cat *sqlcheck.Catalog, prob, lint func(string, string, ...any)) (Rule, []string, bool) {
	op, ok := sqlcheck.ParseOp(rs.Op)
	if !ok {
		prob(field+".op", "must be select, insert, update or delete, got %q", rs.Op)
		return Rule{}, nil, false
	}
	schema, name, err := sqlcheck.ParseRelationName(rs.Table)
	if err != nil {
		prob(field+".table", "not a table name: %q", rs.Table)
		return Rule{}, nil, false
	}
	if sqlcheck.IsReservedSchema(schema) || schema == "" && strings.HasPrefix(name, "pg_") {
		prob(field+".table", "%s is in a reserved schema and can never be granted", rs.Table)
		return Rule{}, nil, false
	}
	t, ok := cat.Resolve(schema, name)
	if !ok {
		prob(field+".table", "table %s is not in the target catalog", rs.Table)
		return Rule{}, nil, false
	}
	if sqlcheck.IsReservedSchema(t.Name.Schema) {
		prob(field+".table", "%s is in a reserved schema and can never be granted", t.Name)
		return Rule{}, nil, false
	}
	r := Rule{Op: op, Table: t.Name.String(), Columns: []string{}, Residual: rs.Residual}
	seen := map[string]bool{}
	for _, c := range rs.Columns {
		col, err := sqlcheck.ParseColumnName(c)
		if err != nil {
			prob(field+".columns", "not a column name: %q", c)
			continue
		}
		if !t.Has(col) {
			prob(field+".columns", "column %s does not exist in %s", sqlcheck.QuoteIdent(col), t.Name)
			continue
		}
		if !seen[col] {
			seen[col] = true
			r.Columns = append(r.Columns, col)
		}
	}
	sort.Strings(r.Columns)
	switch op {
	case sqlcheck.OpSelect, sqlcheck.OpUpdate, sqlcheck.OpInsert:
		if len(rs.Columns) == 0 {
			prob(field+".columns", "a %s rule must list its columns", op)
		}
	case sqlcheck.OpDelete:
		if len(rs.Columns) > 0 {
			prob(field+".columns", "a delete rule has no columns (reads in WHERE need a select rule)")
		}
	}
	var fenceCols []string
	if rs.Fence != "" {
		if op == sqlcheck.OpInsert {
			prob(field+".fence", "an insert reaches no existing row; use check for what new rows must satisfy")
		} else if e, reasons := sqlcheck.CompileExpr(rs.Fence, t, cat); len(reasons) > 0 {
			prob(field+".fence", "%s", joinReasons(reasons))
		} else {
			r.Fence = e.Canonical
			fenceCols = e.Columns
			if op == sqlcheck.OpSelect && mayRaise(e.Node) {
				lint(field+".fence", "the fence can fail on some values (a cast, arithmetic or a function of a column): "+
					"it is evaluated on rows outside it too, so one such row makes every read of %s fail, and tells the grantee it exists; "+
					"compare columns with constants", t.Name)
			}
		}
	}
	if rs.Check != "" {
		if op != sqlcheck.OpInsert && op != sqlcheck.OpUpdate {
			prob(field+".check", "only insert and update rules have a check (it tests new rows)")
		} else if e, reasons := sqlcheck.CompileExpr(rs.Check, t, cat); len(reasons) > 0 {
			prob(field+".check", "%s", joinReasons(reasons))
		} else {
			r.Check = e.Canonical
		}
	}
	switch {
	case rs.MaxRows != nil:
		r.MaxRows = *rs.MaxRows
	case op == sqlcheck.OpSelect:
		r.MaxRows = DefaultSelectMaxRows
		lint(field+".max_rows", "no max_rows: reads are capped at %d rows", DefaultSelectMaxRows)
	default:
		prob(field+".max_rows", "required for %s rules: writes need an exact row cap", op)
	}
	if rs.Residual != "" {
		if r.Fence == "" {
			prob(field+".fence", "a rule with a residual clause must have a fence: the row fence is what the residual clause narrows")
		}
		if op == sqlcheck.OpSelect {
			lint(field+".residual", "a residual clause on a select rule sends reads to the Surveyor")
		}
	}
	if op == sqlcheck.OpSelect && r.Fence == "" && t.EstimatedRows > LargeTableRows {
		lint(field+".fence", "a select rule without a fence on %s (about %d rows) reads every row", t.Name, t.EstimatedRows)
	}
	if op == sqlcheck.OpUpdate && len(fenceCols) > 0 {
		var both []string
		for _, c := range fenceCols {
			if seen[c] {
				both = append(both, c)
			}
		}
		if len(both) > 0 {
			lint(field+".fence", "the fence reads %s, which this rule lets the grantee write: a statement can move rows out of the fence", quotedList(both))
		}
	}
	if op == sqlcheck.OpUpdate && r.Fence == "" {
		lint(field+".fence", "an update rule without a fence may reach any row of %s (up to max_rows per statement)", t.Name)
	}
	return r, fenceCols, true
}

func joinReasons(rs []sqlcheck.Reason) string {
	msgs := make([]string, len(rs))
	for i, r := range rs {
		msgs[i] = r.Message
	}
	return strings.Join(msgs, "; ")
}
