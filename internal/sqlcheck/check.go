package sqlcheck

import (
	"fmt"
	"sort"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// Op is a statement or rule operation.
type Op string

// The four operations a delegation can grant.
const (
	OpSelect Op = "select"
	OpInsert Op = "insert"
	OpUpdate Op = "update"
	OpDelete Op = "delete"
)

// ParseOp reads an operation name.
func ParseOp(s string) (Op, bool) {
	switch Op(s) {
	case OpSelect, OpInsert, OpUpdate, OpDelete:
		return Op(s), true
	}
	return "", false
}

// Rule is the part of a compiled delegation rule the static check needs.
type Rule struct {
	// Index is the rule's position in its delegation.
	Index   int
	Op      Op
	Table   TableName
	Columns []string
	// Residual is true when the rule carries a residual clause (Tier B).
	Residual bool
}

func (r Rule) covers(cols []string) (missing []string) {
	have := make(map[string]bool, len(r.Columns))
	for _, c := range r.Columns {
		have[c] = true
	}
	for _, c := range cols {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	return missing
}

func (r Rule) label() string { return fmt.Sprintf("rule %d (%s %s)", r.Index, r.Op, r.Table) }

// Outcome is the decision of the static check.
type Outcome string

const (
	// Conforms: inside rules without a residual clause (the compiled path).
	Conforms Outcome = "conforms"
	// Survey: inside the bound only thanks to a rule with a residual clause,
	// so the Surveyor decides (or a human, when Tier B is off).
	Survey Outcome = "survey"
	// Refer: anything else. A human decides.
	Refer Outcome = "refer"
)

// Use is the rule a decision relies on for one table.
type Use struct {
	Table TableName `json:"table"`
	Op    Op        `json:"op"`
	Rule  int       `json:"rule"`
}

// Decision is the value the static check returns: never an error. Every
// rule that matters was evaluated and every reason is reported.
type Decision struct {
	Outcome Outcome `json:"decision"`
	// Rule is the rule authorizing the statement's operation on its main
	// table (the write rule for a write, the first table's select rule for a
	// read), or nil on refer.
	Rule *int `json:"rule"`
	// Uses lists, per table, the rule relied on (reads and the write).
	Uses    []Use    `json:"uses,omitempty"`
	Reasons []Reason `json:"reasons"`
	// CanonicalSQL is the statement deparsed from the checked tree, comments
	// gone; the text the Pilot runs. Empty when the statement did not parse.
	CanonicalSQL string `json:"canonical_sql"`
	// Facts are the extracted facts, nil when the statement did not parse.
	Facts *Facts `json:"-"`
}

// HasCode reports whether any reason carries code.
func (d Decision) HasCode(code string) bool {
	for _, r := range d.Reasons {
		if r.Code == code {
			return true
		}
	}
	return false
}

// ReasonStrings renders every reason as a readable line.
func (d Decision) ReasonStrings() []string {
	out := make([]string, len(d.Reasons))
	for i, r := range d.Reasons {
		out[i] = r.String()
	}
	return out
}

// Limits caps untrusted input before it reaches the C parser, which
// crashes the process (SIGSEGV in cgo, which recover cannot catch) on very
// deep expressions.
type Limits struct {
	// MaxBytes caps the statement length. Defaults to 64 KiB.
	MaxBytes int
	// MaxDepth caps parenthesis and bracket nesting. Defaults to 200.
	MaxDepth int
	// MaxOperators caps the count of operator tokens, NOT and CASE, a proxy
	// for expression depth the scanner can count without recursion.
	// Defaults to 4000 (the parser crashes near 20,000 chained terms).
	MaxOperators int
}

// WithDefaults fills zero fields with their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = 64 << 10
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 200
	}
	if l.MaxOperators <= 0 {
		l.MaxOperators = 4000
	}
	return l
}

// Analysis is a parsed, walked statement: its tree, facts and the reasons
// it already must refer for (independent of any delegation).
type Analysis struct {
	// Tree is the parse tree of exactly one statement, or nil.
	Tree      *pg.ParseResult
	Facts     *Facts
	Reasons   []Reason
	Canonical string
	// NotApprovable is set when no human could approve the statement,
	// known from its text alone (Unapprovable).
	NotApprovable *Reason
}

// Unparseable reports whether the statement could not be parsed at all
// (a syntax error, or input too large or deep to parse): a client error
// rather than a decision.
func (a *Analysis) Unparseable() bool {
	if a.Facts != nil || len(a.Reasons) == 0 {
		return false
	}
	switch a.Reasons[0].Code {
	case CodeParseError, CodeInputTooLarge, CodeInputTooDeep, CodeEmptyStatement:
		return true
	}
	return false
}

// Stmt returns the one statement node of the tree.
func (a *Analysis) Stmt() *pg.Node {
	if a.Tree == nil || len(a.Tree.Stmts) != 1 {
		return nil
	}
	return a.Tree.Stmts[0].Stmt
}

// Analyze caps, parses and walks one statement against the catalog. It
// never returns an error: failures are reasons.
func Analyze(sql string, cat *Catalog, lim Limits) (a *Analysis) {
	a = &Analysis{}
	defer func() {
		// The walker must not panic; if it ever does, the statement refers.
		if p := recover(); p != nil {
			a.Facts = nil
			a.Reasons = append(a.Reasons, reasonf(CodeInternal, "internal error while checking: %v", p))
		}
	}()
	lim = lim.WithDefaults()
	if r, ok := precheck(sql, lim); !ok {
		a.Reasons = []Reason{r}
		return a
	}
	tree, err := pg.Parse(sql)
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "recursion depth") {
			a.Reasons = []Reason{reasonf(CodeInputTooDeep, "the statement nests too deeply to check")}
		} else {
			a.Reasons = []Reason{reasonf(CodeParseError, "the statement does not parse: %s", msg)}
		}
		return a
	}
	switch len(tree.Stmts) {
	case 0:
		a.Reasons = []Reason{reasonf(CodeEmptyStatement, "the statement is empty (only comments or whitespace)")}
		return a
	case 1:
	default:
		a.Reasons = []Reason{reasonf(CodeMultipleStatements, "%d statements were sent: send exactly one", len(tree.Stmts))}
		a.NotApprovable = &a.Reasons[0]
		return a
	}
	a.Tree = tree
	w := newWalker(cat)
	kind, target := w.statement(tree.Stmts[0].Stmt)
	a.Facts = w.facts(kind, target)
	a.Reasons = w.reasons
	// Deparse only the one statement, so comments and the original bytes
	// never reach the database.
	canon, err := pg.Deparse(&pg.ParseResult{Version: tree.Version, Stmts: []*pg.RawStmt{{Stmt: tree.Stmts[0].Stmt}}})
	if err != nil {
		a.Reasons = append(a.Reasons, reasonf(CodeInternal, "the statement cannot be deparsed: %v", err))
	} else {
		a.Canonical = canon
	}
	if r, ok := notApprovable(a); ok {
		a.NotApprovable = &r
	}
	return a
}

// Precheck reports whether a text may be handed to the C parser: its
// length, brackets and operators are within the limits (the zero Limits:
// the defaults). When not, the reason is the one Analyze gives. A caller
// that parses untrusted text before Analyze does (the wire front) asks
// this first, so the text cannot crash the process.
func Precheck(sql string, lim Limits) (Reason, bool) { return precheck(sql, lim.WithDefaults()) }

// precheck refuses input the C parser must not see.
func precheck(sql string, lim Limits) (Reason, bool) {
	if len(sql) > lim.MaxBytes {
		return reasonf(CodeInputTooLarge, "the statement is %d bytes, over the %d byte limit", len(sql), lim.MaxBytes), false
	}
	if strings.IndexByte(sql, 0) >= 0 {
		return reasonf(CodeParseError, "the statement contains a NUL byte"), false
	}
	res, err := pg.Scan(sql)
	if err != nil {
		return reasonf(CodeParseError, "the statement does not scan: %v", err), false
	}
	return tokenLimits(res, lim)
}

// tokenLimits refuses a statement whose brackets nest, or whose operators
// number, past the limits.
func tokenLimits(res *pg.ScanResult, lim Limits) (Reason, bool) {
	depth, maxDepth, ops := 0, 0, 0
	for _, t := range res.Tokens {
		switch t.Token {
		case pg.Token_ASCII_40, pg.Token_ASCII_91:
			depth++
			if depth > maxDepth {
				maxDepth = depth
			}
		case pg.Token_ASCII_41, pg.Token_ASCII_93:
			depth--
		case pg.Token_ASCII_37, pg.Token_ASCII_42, pg.Token_ASCII_43, pg.Token_ASCII_45, pg.Token_ASCII_47,
			pg.Token_ASCII_60, pg.Token_ASCII_61, pg.Token_ASCII_62, pg.Token_ASCII_94, pg.Token_Op,
			pg.Token_NOT, pg.Token_CASE, pg.Token_AND, pg.Token_OR, pg.Token_LESS_EQUALS,
			pg.Token_GREATER_EQUALS, pg.Token_NOT_EQUALS, pg.Token_TYPECAST:
			ops++
		}
	}
	if maxDepth > lim.MaxDepth {
		return reasonf(CodeInputTooDeep, "the statement nests %d levels of brackets, over the limit of %d", maxDepth, lim.MaxDepth), false
	}
	if ops > lim.MaxOperators {
		return reasonf(CodeInputTooDeep, "the statement has %d operators, over the limit of %d", ops, lim.MaxOperators), false
	}
	return Reason{}, true
}

// Check decides an analyzed statement against the rules of one delegation.
// Every rule for every table the statement touches is evaluated.
func Check(a *Analysis, rules []Rule) Decision {
	d := Decision{Outcome: Refer, Reasons: append([]Reason(nil), a.Reasons...), CanonicalSQL: a.Canonical, Facts: a.Facts}
	f := a.Facts
	if f == nil || f.Kind == "" {
		return d
	}
	byTable := map[TableName][]Rule{}
	for _, r := range rules {
		byTable[r.Table] = append(byTable[r.Table], r)
	}
	residual := false
	var uses []Use
	var primary *int
	refer := len(d.Reasons) > 0

	// Reads: every table scanned or whose columns are read needs one select
	// rule listing every column read from it.
	readTables := make([]TableName, 0, len(f.Reads))
	for t := range f.Reads {
		readTables = append(readTables, t)
	}
	sortTables(readTables)
	for _, t := range readTables {
		cols := f.Reads[t]
		tr := byTable[t]
		if len(tr) == 0 {
			d.Reasons = append(d.Reasons, reasonf(CodeRelationNotCovered, "no rule of this delegation covers %s", t))
			refer = true
			continue
		}
		var best *Rule
		var misses []Reason
		nselect := 0
		for i := range tr {
			r := tr[i]
			if r.Op != OpSelect {
				continue
			}
			nselect++
			if missing := r.covers(cols); len(missing) > 0 {
				m := reasonf(CodeColumnNotReadable, "%s does not let the statement read %s", r.label(), strings.Join(quoteAll(missing), ", "))
				m.Rule = r.Index
				misses = append(misses, m)
				continue
			}
			if best == nil || best.Residual && !r.Residual {
				best = &tr[i]
			}
		}
		switch {
		case best != nil:
			uses = append(uses, Use{Table: t, Op: OpSelect, Rule: best.Index})
			residual = residual || best.Residual
			d.Reasons = append(d.Reasons, coveredReason(*best, cols, "read"))
		case nselect == 0:
			d.Reasons = append(d.Reasons, reasonf(CodeOpNotCovered, "no select rule covers reading %s", t))
			refer = true
		default:
			d.Reasons = append(d.Reasons, misses...)
			refer = true
		}
	}

	// The write: one rule of the statement's op on the target listing every
	// column written.
	if f.Kind != OpSelect && f.Target != nil {
		t := *f.Target
		tr := byTable[t]
		var best *Rule
		var misses []Reason
		nop := 0
		for i := range tr {
			r := tr[i]
			if r.Op != f.Kind {
				continue
			}
			nop++
			if missing := r.covers(f.Written); len(missing) > 0 {
				m := reasonf(CodeColumnNotWritable, "%s does not let the statement write %s", r.label(), strings.Join(quoteAll(missing), ", "))
				m.Rule = r.Index
				misses = append(misses, m)
				continue
			}
			if best == nil || best.Residual && !r.Residual {
				best = &tr[i]
			}
		}
		switch {
		case len(tr) == 0:
			d.Reasons = append(d.Reasons, reasonf(CodeRelationNotCovered, "no rule of this delegation covers %s", t))
			refer = true
		case best != nil:
			uses = append(uses, Use{Table: t, Op: f.Kind, Rule: best.Index})
			residual = residual || best.Residual
			idx := best.Index
			primary = &idx
			d.Reasons = append(d.Reasons, coveredReason(*best, f.Written, "write"))
		case nop == 0:
			d.Reasons = append(d.Reasons, reasonf(CodeOpNotCovered, "no %s rule covers %s", f.Kind, t))
			refer = true
		default:
			d.Reasons = append(d.Reasons, misses...)
			refer = true
		}
	} else if f.Kind != OpSelect {
		refer = true
	}
	if f.Kind == OpSelect && len(uses) > 0 {
		// The main table is the first one named in the statement.
		main := uses[0].Rule
		for _, ref := range f.References {
			for _, u := range uses {
				if u.Table == ref.Table {
					main = u.Rule
					goto found
				}
			}
		}
	found:
		primary = &main
	}
	if f.Kind == OpSelect && len(f.Relations) == 0 && !refer {
		// A SELECT of constants reaches no table: nothing to authorize it.
		d.Reasons = append(d.Reasons, reasonf(CodeRelationNotCovered, "the statement reads no table of this delegation"))
		refer = true
	}
	sort.SliceStable(uses, func(i, j int) bool { return uses[i].Rule < uses[j].Rule })
	d.Uses = uses
	switch {
	case refer:
		d.Outcome = Refer
		d.Rule = nil
	case residual:
		d.Outcome = Survey
		d.Rule = primary
		d.Reasons = append(d.Reasons, reasonf(CodeResidual, "a rule with a residual clause is needed, so the Surveyor decides"))
	default:
		d.Outcome = Conforms
		d.Rule = primary
	}
	return d
}

func coveredReason(r Rule, cols []string, verb string) Reason {
	what := "no column"
	if len(cols) > 0 {
		what = strings.Join(quoteAll(cols), ", ")
	}
	m := reasonf(CodeCovered, "%s covers the %s of %s", r.label(), verb, what)
	if r.Residual {
		m = reasonf(CodeResidual, "%s covers the %s of %s, under its residual clause", r.label(), verb, what)
	}
	m.Rule = r.Index
	return m
}

// Checker holds a catalog and limits; it is immutable and safe for
// concurrent use.
type Checker struct {
	Catalog *Catalog
	Limits  Limits
}

// Check analyzes sql and decides it against rules.
func (c *Checker) Check(sql string, rules []Rule) Decision {
	return Check(Analyze(sql, c.Catalog, c.Limits), rules)
}
