package cover

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Panel is the models a draft consults: one decomposes the sentence and
// synthesizes elements, every Labeler labels every clause.
type Panel struct {
	Decomposer  llm.Asker
	Synthesizer llm.Asker
	Labelers    []llm.Asker
}

// MaxPromptTables caps the tables a synthesis prompt lists, so a large
// catalog does not make a huge prompt; elements are still resolved
// against the whole catalog.
const MaxPromptTables = 200

// MinLabelers is the smallest panel a draft accepts.
const MinLabelers = 2

// DraftConfig is what a draft is asked for.
type DraftConfig struct {
	Sentence string
	Grantee  string
	Target   string
	// Budget caps synthesis attempts: unanimous nominations are attempted
	// first, the other clauses while the budget lasts. Defaults to every
	// clause.
	Budget int
	// MaxClauses caps the decomposition. Defaults to 24.
	MaxClauses int
}

// Limits on what a model may answer.
const (
	maxAnswerBytes = 16 << 10
	maxClauseBytes = 500
)

// Route of a clause.
const (
	RouteCompiled = "compiled"
	RouteResidual = "residual"
)

// ModelLabel is one panel model's label of a clause.
type ModelLabel struct {
	Model   string `json:"model"`
	Label   string `json:"label"`
	Failure string `json:"failure,omitempty"`
}

// ClauseReport is one clause's route and evidence.
type ClauseReport struct {
	Index     int          `json:"index"`
	Text      string       `json:"text"`
	Labels    []ModelLabel `json:"labels"`
	Nominated bool         `json:"nominated"`
	Attempted bool         `json:"attempted"`
	Element   *Element     `json:"element,omitempty"`
	// SynthesisFailure says why no element came back.
	SynthesisFailure string        `json:"synthesis_failure,omitempty"`
	Gates            *ElementGates `json:"gates,omitempty"`
	Route            string        `json:"route"`
	Why              string        `json:"why"`
	// Rule is the allow[] index the clause went into, or -1.
	Rule int `json:"rule"`
}

// DraftReport is what a draft says: every clause's route and gate
// evidence, the proposed delegation and its compilation report. A draft is
// never signed: only a human's signature makes it a delegation.
type DraftReport struct {
	Sentence string         `json:"sentence"`
	Grantee  string         `json:"grantee"`
	Target   string         `json:"target"`
	Clauses  []ClauseReport `json:"clauses"`
	// DecomposeFailure says why the sentence could not be split (the whole
	// sentence is then one residual clause that no rule holds).
	DecomposeFailure string `json:"decompose_failure,omitempty"`
	// YAML is the proposed delegation, for a human to edit and sign.
	YAML string `json:"yaml"`
	// Compile is the compilation report of YAML, gates included.
	Compile *bound.Report `json:"compile,omitempty"`
	// Signable is Compile.Signable with every clause placed on a rule.
	Signable bool     `json:"signable"`
	Problems []string `json:"problems"`
	// Routers are the routing choices measured on this sentence (no gold:
	// precision is unknown), for cover cost.
	Routers []Router `json:"routers"`
}

var (
	decomposeSchema = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"clauses": map[string]any{"type": "array", "items": map[string]any{
				"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}},
				"required": []any{"text"}, "additionalProperties": false,
			}},
		},
		"required": []any{"clauses"}, "additionalProperties": false,
	}
	labelSchema = map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"label": map[string]any{"type": "string", "enum": []any{Decidable, Judgment}}},
		"required":             []any{"label"},
		"additionalProperties": false,
	}
	elementSchema = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"op":    map[string]any{"type": "string", "enum": []any{"select", "insert", "update", "delete"}},
			"table": map[string]any{"type": "string"}, "columns": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"kind": map[string]any{"type": "string", "enum": []any{KindFence, KindCheck, KindMaxRows, KindExpires, KindStatement}},
			"expr": map[string]any{"type": "string"}, "max_rows": map[string]any{"type": "integer"},
			"expires": map[string]any{"type": "string"}, "slots": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		},
		"required":             []any{"op", "table", "columns", "kind", "expr", "max_rows", "expires", "slots"},
		"additionalProperties": false,
	}
)

const decomposeSystem = `You split an operator's grant to a database agent into atomic clauses.
Each clause states one condition, limit, scope or time window. Keep the operator's words.
Answer only with the JSON object {"clauses":[{"text":"..."}]}.`

const labelSystem = `You decide whether a clause of a grant to a database agent can be settled by a fixed,
deterministic check over database rows and server time (DECIDABLE), or needs judgment (JUDGMENT).
Answer only with {"label":"DECIDABLE"} or {"label":"JUDGMENT"}. No other text.`

const synthSystem = `You write the bound element a clause of a grant implies, over the given catalog:
the rule (op, table, columns the agent may write or read) and one term: a fence (SQL boolean expression
over the table's columns on the rows a statement may reach), a check (SQL boolean expression every new or
changed row must satisfy), max_rows (a row cap per statement), expires (a duration such as 7d), or statement
(a regular expression over the statement text). Name the fields the term reads in slots.
Answer only with the JSON object {"op","table","columns","kind","expr","max_rows","expires","slots"};
unused fields are "" or 0.`

var zero = 0.0

// strictDecode decodes exactly one JSON object into v with no unknown
// fields and nothing after it.
func strictDecode(text string, v any) error {
	if len(text) > maxAnswerBytes {
		return fmt.Errorf("answer over %d bytes", maxAnswerBytes)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not the JSON object asked for: %v", err)
	}
	if dec.More() {
		return fmt.Errorf("text after the JSON object")
	}
	var rest json.RawMessage
	if err := dec.Decode(&rest); err == nil {
		return fmt.Errorf("text after the JSON object")
	}
	return nil
}

// requireFields fails when the answer lacks one of the keys (a missing
// field fails closed, even where Go would fill a zero value).
func requireFields(text string, keys ...string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		return fmt.Errorf("not a JSON object")
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("missing field %q", k)
		}
	}
	return nil
}

// Decompose asks the decomposer for the clauses of a sentence.
func Decompose(ctx context.Context, m llm.Asker, sentence string, max int) ([]string, string) {
	rep := m.Ask(ctx, llm.Question{System: decomposeSystem, User: "Sentence:\n<<<\n" + sentence + "\n>>>",
		SchemaName: "clauses", Schema: decomposeSchema, MaxTokens: 2048, Temperature: &zero})
	if rep.Failure != "" {
		return nil, fmt.Sprintf("%s (%s): %s", rep.Provider, rep.Model, rep.Failure)
	}
	var ans struct {
		Clauses []struct {
			Text string `json:"text"`
		} `json:"clauses"`
	}
	if err := strictDecode(rep.Text, &ans); err != nil {
		return nil, fmt.Sprintf("%s (%s): %v", rep.Provider, rep.Model, err)
	}
	if len(ans.Clauses) == 0 || len(ans.Clauses) > max {
		return nil, fmt.Sprintf("%s (%s): %d clauses, want 1 to %d", rep.Provider, rep.Model, len(ans.Clauses), max)
	}
	var out []string
	for _, c := range ans.Clauses {
		t := strings.TrimSpace(c.Text)
		if t == "" || len(t) > maxClauseBytes {
			return nil, fmt.Sprintf("%s (%s): a clause is empty or over %d bytes", rep.Provider, rep.Model, maxClauseBytes)
		}
		out = append(out, t)
	}
	return out, ""
}

// Rubrics are the labelling instructions by variant name: "" is the base
// rubric; "prescriptive" spells out what a fixed check may read, for
// measuring whether a stricter rubric buys agreement (flip rates).
var Rubrics = map[string]string{
	"": labelSystem,
	"prescriptive": labelSystem + `
A clause is DECIDABLE only if a check can settle it from columns the agent cannot write, constants,
row counts and server time. A column the agent writes, a note, a reason or the statement's text
is never enough: such a clause is JUDGMENT.`,
}

// LabelClause asks one model for a clause's label under the base rubric;
// any failure is JUDGMENT.
func LabelClause(ctx context.Context, m llm.Asker, sentence, clause string) ModelLabel {
	return LabelClauseRubric(ctx, m, "", sentence, clause)
}

// LabelClauseRubric is LabelClause under a named rubric (Rubrics); an
// unknown rubric is a failure, so JUDGMENT.
func LabelClauseRubric(ctx context.Context, m llm.Asker, rubric, sentence, clause string) ModelLabel {
	name := m.Provider() + "/" + m.Model()
	system, ok := Rubrics[rubric]
	if !ok {
		return ModelLabel{Model: name, Label: Judgment, Failure: fmt.Sprintf("unknown rubric %q", rubric)}
	}
	user := "Clause:\n<<<\n" + clause + "\n>>>"
	if sentence != "" {
		user = "Grant:\n<<<\n" + sentence + "\n>>>\n" + user
	}
	rep := m.Ask(ctx, llm.Question{System: system,
		User:       user,
		SchemaName: "label", Schema: labelSchema, MaxTokens: 64, Temperature: &zero})
	if rep.Failure != "" {
		return ModelLabel{Model: name, Label: Judgment, Failure: rep.Failure}
	}
	var ans struct {
		Label string `json:"label"`
	}
	if err := strictDecode(rep.Text, &ans); err != nil {
		return ModelLabel{Model: name, Label: Judgment, Failure: err.Error()}
	}
	if ans.Label != Decidable && ans.Label != Judgment {
		return ModelLabel{Model: name, Label: Judgment, Failure: fmt.Sprintf("label %q is neither DECIDABLE nor JUDGMENT", ans.Label)}
	}
	return ModelLabel{Model: name, Label: ans.Label}
}

// Synthesize asks for the element a clause implies.
func Synthesize(ctx context.Context, m llm.Asker, cat *sqlcheck.Catalog, tables []sqlcheck.TableName, sentence, clause string) (*Element, string) {
	var b strings.Builder
	b.WriteString("Catalog:\n")
	for _, tn := range tables {
		t, ok := cat.Table(tn)
		if !ok {
			continue
		}
		var cols []string
		for _, c := range t.Columns {
			cols = append(cols, c.Name+" "+c.Type)
		}
		fmt.Fprintf(&b, "  %s(%s)\n", t.Name, strings.Join(cols, ", "))
	}
	fmt.Fprintf(&b, "Grant:\n<<<\n%s\n>>>\nClause:\n<<<\n%s\n>>>", sentence, clause)
	rep := m.Ask(ctx, llm.Question{System: synthSystem, User: b.String(), SchemaName: "element", Schema: elementSchema, MaxTokens: 1024, Temperature: &zero})
	if rep.Failure != "" {
		return nil, fmt.Sprintf("%s (%s): %s", rep.Provider, rep.Model, rep.Failure)
	}
	var el Element
	if err := strictDecode(rep.Text, &el); err != nil {
		return nil, fmt.Sprintf("%s (%s): %v", rep.Provider, rep.Model, err)
	}
	if err := requireFields(rep.Text, "op", "table", "columns", "kind", "expr", "max_rows", "expires", "slots"); err != nil {
		return nil, fmt.Sprintf("%s (%s): %v", rep.Provider, rep.Model, err)
	}
	return &el, ""
}

// Draft runs Algorithm 1 on a sentence: decompose, corroborate, synthesize
// in nomination order, admit through the gates. It consults the models
// only for decomposition, labels and synthesis; nothing after synthesis
// reads a model. It signs nothing. env.Writers are the writes of the
// grantee's other active delegations.
func Draft(ctx context.Context, cfg DraftConfig, p Panel, env *Env) *DraftReport {
	if cfg.MaxClauses <= 0 {
		cfg.MaxClauses = 24
	}
	rep := &DraftReport{Sentence: cfg.Sentence, Grantee: cfg.Grantee, Target: cfg.Target, Clauses: []ClauseReport{}, Problems: []string{}}
	if len(p.Labelers) < MinLabelers || p.Decomposer == nil || p.Synthesizer == nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("a draft needs a decomposer, a synthesizer and at least %d panel models", MinLabelers))
		return rep
	}
	clauses, failure := Decompose(ctx, p.Decomposer, cfg.Sentence, cfg.MaxClauses)
	if failure != "" {
		rep.DecomposeFailure = failure
		clauses = []string{cfg.Sentence}
	}
	// Corroborate: every model labels every clause, in parallel per clause.
	for i, c := range clauses {
		cr := ClauseReport{Index: i, Text: c, Labels: make([]ModelLabel, len(p.Labelers)), Rule: -1, Route: RouteResidual}
		if failure == "" {
			var wg sync.WaitGroup
			for j, m := range p.Labelers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cr.Labels[j] = LabelClause(ctx, m, cfg.Sentence, c)
				}()
			}
			wg.Wait()
		} else {
			for j, m := range p.Labelers {
				cr.Labels[j] = ModelLabel{Model: m.Provider() + "/" + m.Model(), Label: Judgment, Failure: "not asked: the sentence could not be decomposed"}
			}
		}
		cr.Nominated = true
		for _, l := range cr.Labels {
			cr.Nominated = cr.Nominated && l.Label == Decidable
		}
		rep.Clauses = append(rep.Clauses, cr)
	}
	order := make([]int, 0, len(clauses))
	for i, c := range rep.Clauses {
		if c.Nominated {
			order = append(order, i)
		}
	}
	for i, c := range rep.Clauses {
		if !c.Nominated {
			order = append(order, i)
		}
	}
	budget := cfg.Budget
	if budget <= 0 {
		budget = len(order)
	}
	tables := make([]sqlcheck.TableName, 0)
	for _, t := range env.Catalog.Tables() {
		if !sqlcheck.IsReservedSchema(t.Name.Schema) && len(tables) < MaxPromptTables {
			tables = append(tables, t.Name)
		}
	}
	for n, i := range order {
		cr := &rep.Clauses[i]
		if failure != "" {
			cr.Why = "the sentence could not be decomposed: " + failure
			continue
		}
		if n >= budget {
			cr.Why = "not attempted: the synthesis budget ran out (unattempted clauses are judged)"
			continue
		}
		cr.Attempted = true
		el, why := Synthesize(ctx, p.Synthesizer, env.Catalog, tables, cfg.Sentence, cr.Text)
		if el == nil {
			cr.SynthesisFailure = why
			cr.Why = "synthesis failed, so the clause is residual: " + why
			continue
		}
		cr.Element = el
		g := env.GateElement(*el)
		cr.Gates = &g
		if g.Admitted {
			cr.Route = RouteCompiled
			cr.Why = "admitted: every gate passed"
			if !cr.Nominated {
				cr.Why += " (the panel did not nominate it; the gates admit on the check's behaviour, not on labels)"
			}
		} else {
			cr.Why = "residual: " + firstFailure(g)
		}
	}
	assemble(rep, env)
	rep.Routers = draftRouters(rep)
	return rep
}

func firstFailure(g ElementGates) string {
	for _, x := range []struct {
		n string
		g bound.Gate
	}{{"G0", g.G0}, {"G1", g.G1}, {"G2", g.G2}, {"G3", g.G3}} {
		if !x.g.OK {
			return x.n + " failed: " + x.g.Why
		}
	}
	return "not admitted"
}

// yamlRule and yamlDelegation render the proposed delegation.
type yamlRule struct {
	Op       string   `yaml:"op"`
	Table    string   `yaml:"table"`
	Columns  []string `yaml:"columns,omitempty,flow"`
	Fence    string   `yaml:"fence,omitempty"`
	Check    string   `yaml:"check,omitempty"`
	MaxRows  *int64   `yaml:"max_rows,omitempty"`
	Residual string   `yaml:"residual,omitempty"`
}

type yamlDelegation struct {
	Sentence string     `yaml:"sentence"`
	Grantee  string     `yaml:"grantee"`
	Target   string     `yaml:"target"`
	Expires  string     `yaml:"expires,omitempty"`
	Allow    []yamlRule `yaml:"allow"`
}

// assemble groups the clauses' elements into rules by (op, table):
// admitted fences and checks are ANDed, the smallest admitted row cap
// wins, the earliest admitted expiry wins, and residual clauses are
// attached to the rule of their element's (op, table). A residual clause
// with no rule to attach to makes the draft unsignable.
func assemble(rep *DraftReport, env *Env) {
	type group struct {
		op, table      string
		cols           map[string]bool
		fences, checks []string
		maxRows        *int64
		residual       []string
		first          int
	}
	var groups []*group
	byKey := map[string]*group{}
	var expires *time.Time
	get := func(el *Element) *group {
		t, op, _ := el.Resolve(env.Catalog)
		key := string(op) + " " + t.Name.String()
		g := byKey[key]
		if g == nil {
			g = &group{op: string(op), table: t.Name.String(), cols: map[string]bool{}}
			byKey[key] = g
			groups = append(groups, g)
		}
		for _, c := range el.Columns {
			g.cols[c] = true
		}
		return g
	}
	for i := range rep.Clauses {
		cr := &rep.Clauses[i]
		el := cr.Element
		if el == nil {
			continue
		}
		if t, _, _ := el.Resolve(env.Catalog); t == nil {
			continue
		}
		if el.Kind == KindExpires && cr.Route == RouteCompiled {
			// An expiry applies to the whole delegation, not to a rule.
			if t, err := ParseExpiry(el.Expires, env.Now); err == nil && (expires == nil || t.Before(*expires)) {
				expires = &t
			}
			continue
		}
		g := get(el)
		if cr.Route != RouteCompiled {
			g.residual = append(g.residual, cr.Text)
			continue
		}
		switch el.Kind {
		case KindFence:
			g.fences = append(g.fences, canonicalExpr(el, env.Catalog))
		case KindCheck:
			g.checks = append(g.checks, canonicalExpr(el, env.Catalog))
		case KindMaxRows:
			if g.maxRows == nil || el.MaxRows < *g.maxRows {
				n := el.MaxRows
				g.maxRows = &n
			}
		}
	}
	kept := groups
	d := yamlDelegation{Sentence: rep.Sentence, Grantee: rep.Grantee, Target: rep.Target, Allow: []yamlRule{}}
	if expires != nil {
		d.Expires = expires.Format(time.RFC3339)
	}
	index := map[string]int{}
	for i, g := range kept {
		cols := make([]string, 0, len(g.cols))
		for c := range g.cols {
			cols = append(cols, c)
		}
		sort.Strings(cols)
		if g.op == string(sqlcheck.OpDelete) {
			cols = nil
		}
		r := yamlRule{Op: g.op, Table: g.table, Columns: cols, MaxRows: g.maxRows,
			Fence: andAll(g.fences), Check: andAll(g.checks), Residual: strings.Join(g.residual, "; ")}
		d.Allow = append(d.Allow, r)
		index[g.op+" "+g.table] = i
	}
	for i := range rep.Clauses {
		cr := &rep.Clauses[i]
		if cr.Element == nil {
			if cr.Route == RouteResidual {
				rep.Problems = append(rep.Problems, fmt.Sprintf("clause %d (%q) is residual and names no rule to hold it: a human must write its rule", i, cr.Text))
			}
			continue
		}
		t, op, why := cr.Element.Resolve(env.Catalog)
		if t != nil && cr.Element.Kind == KindExpires && cr.Route == RouteCompiled {
			continue
		}
		if t == nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("clause %d (%q) is residual and its rule is unusable (%s): a human must write its rule", i, cr.Text, why))
			continue
		}
		if j, ok := index[string(op)+" "+t.Name.String()]; ok {
			cr.Rule = j
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(d); err != nil {
		rep.Problems = append(rep.Problems, "cannot render the delegation: "+err.Error())
		return
	}
	rep.YAML = "# Drafted by harbormaster delegation draft: a proposal, not a delegation.\n# Read the draft report, edit, compile and sign it yourself.\n" + buf.String()
	parsed, err := bound.Parse([]byte(rep.YAML), "draft")
	if err != nil {
		rep.Problems = append(rep.Problems, "the drafted delegation does not parse: "+err.Error())
		return
	}
	b, crep := bound.Compile(parsed, env.Catalog, bound.Options{Now: func() time.Time { return env.Now }})
	if b != nil {
		ApplyGates(parsed, b, crep, env)
	}
	rep.Compile = crep
	rep.Signable = crep.Signable && len(rep.Problems) == 0
}

// canonicalExpr is an admitted element's expression in canonical form
// (admitted means it compiled).
func canonicalExpr(el *Element, cat *sqlcheck.Catalog) string {
	t, _, _ := el.Resolve(cat)
	if x, reasons := sqlcheck.CompileExpr(el.Expr, t, cat); len(reasons) == 0 {
		return x.Canonical
	}
	return el.Expr
}

func andAll(es []string) string {
	switch len(es) {
	case 0:
		return ""
	case 1:
		return es[0]
	}
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = "(" + e + ")"
	}
	return strings.Join(parts, " AND ")
}

// draftRouters measures each routing choice on the draft's clauses: the
// share each single model, the majority, unanimity and unanimity plus the
// gates would remove from the judge (no gold, so no precision).
func draftRouters(rep *DraftReport) []Router {
	var all []string
	gold := map[string]string{}
	byModel := map[string]map[string]bool{}
	unan, maj, gated, cover := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	var models []string
	for _, c := range rep.Clauses {
		id := fmt.Sprint(c.Index)
		all = append(all, id)
		dec := 0
		for _, l := range c.Labels {
			if byModel[l.Model] == nil {
				byModel[l.Model] = map[string]bool{}
				models = append(models, l.Model)
			}
			byModel[l.Model][id] = l.Label == Decidable
			if l.Label == Decidable {
				dec++
			}
		}
		unan[id] = c.Nominated
		maj[id] = 2*dec > len(c.Labels)
		gated[id] = c.Nominated && c.Route == RouteCompiled
		cover[id] = c.Route == RouteCompiled
	}
	var out []Router
	for _, m := range models {
		out = append(out, NewRouter(m, all, byModel[m], gold))
	}
	return append(out, NewRouter("majority", all, maj, gold), NewRouter("unanimous", all, unan, gold), NewRouter("unanimous+gates", all, gated, gold), NewRouter("gates (any nomination)", all, cover, gold))
}
