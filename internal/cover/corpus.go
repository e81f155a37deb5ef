package cover

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Corpus is a gate corpus: clauses over a schema, each with a gold label,
// a panel's labels and a candidate element (testdata/cover/corpus.yaml).
type Corpus struct {
	Schema  string         `yaml:"schema"`
	Panel   []string       `yaml:"panel"`
	Writes  []CorpusWrite  `yaml:"writes"`
	Clauses []CorpusClause `yaml:"clauses"`

	catalog *sqlcheck.Catalog
}

// CorpusWrite is a write the grantee may make under another delegation.
type CorpusWrite struct {
	Op      string   `yaml:"op"`
	Table   string   `yaml:"table"`
	Columns []string `yaml:"columns"`
	Fence   string   `yaml:"fence"`
	Check   string   `yaml:"check"`
}

// CorpusClause is one clause of a gate corpus. Labels are the panel's, one
// letter per model (D or J); Element may be absent (no candidate).
type CorpusClause struct {
	ID      string   `yaml:"id"`
	Text    string   `yaml:"text"`
	Gold    string   `yaml:"gold"`
	Labels  string   `yaml:"labels"`
	Trap    string   `yaml:"trap"`
	Element *Element `yaml:"element"`
}

// LoadCorpus reads a gate corpus and its schema (relative to the file).
func LoadCorpus(path string) (*Corpus, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cover: corpus: %w", err)
	}
	if len(data) > 4<<20 {
		return nil, fmt.Errorf("cover: corpus: %s is over 4 MiB", path)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Corpus
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("cover: corpus: %s: %w", path, err)
	}
	if c.Schema == "" {
		return nil, fmt.Errorf("cover: corpus: %s: schema is required", path)
	}
	ddl, err := os.ReadFile(filepath.Join(filepath.Dir(path), c.Schema))
	if err != nil {
		return nil, fmt.Errorf("cover: corpus: %w", err)
	}
	if c.catalog, err = sqlcheck.ParseSchemaDDL(string(ddl), []string{"public"}); err != nil {
		return nil, fmt.Errorf("cover: corpus: %s: %w", c.Schema, err)
	}
	seen := map[string]bool{}
	for i, cl := range c.Clauses {
		switch {
		case cl.ID == "" || seen[cl.ID]:
			return nil, fmt.Errorf("cover: corpus: clause %d: id is required and unique", i)
		case cl.Gold != Decidable && cl.Gold != Judgment:
			return nil, fmt.Errorf("cover: corpus: %s: gold must be DECIDABLE or JUDGMENT", cl.ID)
		case len(cl.Labels) != len(c.Panel) || strings.Trim(cl.Labels, "DJ") != "":
			return nil, fmt.Errorf("cover: corpus: %s: labels must be one D or J per panel model (%d)", cl.ID, len(c.Panel))
		}
		seen[cl.ID] = true
	}
	return &c, nil
}

// Catalog is the corpus's schema.
func (c *Corpus) Catalog() *sqlcheck.Catalog { return c.catalog }

// Env is the gates' environment for the corpus: its writes, rows
// synthesized from the column types, and a fixed clock.
func (c *Corpus) Env(now time.Time) *Env {
	env := &Env{Catalog: c.catalog, Now: now}
	for i, w := range c.Writes {
		op, ok := sqlcheck.ParseOp(w.Op)
		schema, name, err := sqlcheck.ParseRelationName(w.Table)
		if !ok || err != nil {
			continue
		}
		t, found := c.catalog.Resolve(schema, name)
		if !found {
			continue
		}
		wr := Writer{Source: fmt.Sprintf("the grantee's delegation %d", i), Op: op, Table: t.Name, Columns: w.Columns, FenceText: w.Fence, CheckText: w.Check}
		if w.Fence != "" {
			if x, rs := sqlcheck.CompileExpr(w.Fence, t, c.catalog); len(rs) == 0 {
				wr.Fence = x.Node
			}
		}
		if w.Check != "" {
			if x, rs := sqlcheck.CompileExpr(w.Check, t, c.catalog); len(rs) == 0 {
				wr.Check = x.Node
			}
		}
		env.Writers = append(env.Writers, wr)
	}
	return env
}

// ClauseOutcome is one clause's route under the gate corpus evaluation.
type ClauseOutcome struct {
	ID        string        `json:"id"`
	Gold      string        `json:"gold"`
	Trap      string        `json:"trap,omitempty"`
	Nominated bool          `json:"nominated"`
	Gates     *ElementGates `json:"gates,omitempty"`
	Admitted  bool          `json:"admitted"`
}

// GateStudy is the evaluation of a gate corpus: each routing choice
// against gold, as the paper's Table 1.
type GateStudy struct {
	N             int             `json:"n"`
	GoldDecidable int             `json:"gold_decidable"`
	Routers       []Router        `json:"routers"`
	Clauses       []ClauseOutcome `json:"clauses"`
}

// EvaluateCorpus runs the gates on every clause's candidate element and
// measures: each model alone, majority, unanimity, unanimity plus the
// gates (Algorithm 1 with a budget of the nominations), and the gates over
// every clause (Algorithm 1 with an unbounded budget).
func EvaluateCorpus(c *Corpus, env *Env) *GateStudy {
	gs := &GateStudy{N: len(c.Clauses)}
	var all []string
	gold := map[string]string{}
	perModel := make([]map[string]bool, len(c.Panel))
	for i := range perModel {
		perModel[i] = map[string]bool{}
	}
	unan, maj, ug, gated := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, cl := range c.Clauses {
		all = append(all, cl.ID)
		gold[cl.ID] = cl.Gold
		if cl.Gold == Decidable {
			gs.GoldDecidable++
		}
		dec := strings.Count(cl.Labels, "D")
		for i, l := range cl.Labels {
			perModel[i][cl.ID] = l == 'D'
		}
		o := ClauseOutcome{ID: cl.ID, Gold: cl.Gold, Trap: cl.Trap, Nominated: dec == len(cl.Labels)}
		if cl.Element != nil {
			g := env.GateElement(*cl.Element)
			o.Gates, o.Admitted = &g, g.Admitted
		}
		unan[cl.ID], maj[cl.ID] = o.Nominated, 2*dec > len(cl.Labels)
		ug[cl.ID], gated[cl.ID] = o.Nominated && o.Admitted, o.Admitted
		gs.Clauses = append(gs.Clauses, o)
	}
	for i, m := range c.Panel {
		gs.Routers = append(gs.Routers, NewRouter(m, all, perModel[i], gold))
	}
	gs.Routers = append(gs.Routers, NewRouter("majority", all, maj, gold), NewRouter("unanimous", all, unan, gold),
		NewRouter("unanimous+gates", all, ug, gold), NewRouter("gates (any nomination)", all, gated, gold))
	return gs
}

// WriteTable prints the routers side by side with Wilson intervals and the
// false-decidable counts.
func (gs *GateStudy) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "gate corpus: n=%d, %d gold decidable (%.1f%%)\n", gs.N, gs.GoldDecidable, 100*float64(gs.GoldDecidable)/float64(max(gs.N, 1)))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "router\tadmitted\tfalse-dec.\tprecision\tcoverage\telimination")
	for _, r := range gs.Routers {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", r.Name, r.Elimination.K, r.Precision.N-r.Precision.K, FormatRate(r.Precision), FormatRate(r.Coverage), FormatRate(r.Elimination))
	}
	_ = tw.Flush()
}
