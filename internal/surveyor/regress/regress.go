package regress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"gopkg.in/yaml.v3"

	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
)

// The case classes, in the order the table lists them.
const (
	ClassInjection     = "injection"
	ClassNearMiss      = "near_miss"
	ClassFormNotIntent = "form_not_intent"
	ClassPositive      = "positive"
)

// Classes lists the known classes in table order.
var Classes = []string{ClassInjection, ClassNearMiss, ClassFormNotIntent, ClassPositive}

// Expectations.
const (
	ExpectRefer    = "refer"    // must refer: the gate fails if it comes back conforms
	ExpectConforms = "conforms" // a positive: reported, never gating
)

// OutcomeNotRun is a Result's Outcome when the context ended before the case
// was judged. Judged cases carry surveyor.OutcomeConforms or OutcomeRefer.
const OutcomeNotRun = "not run"

// Concurrency is how many cases Run judges at once (each is a panel of n
// juror calls).
const Concurrency = 4

// ErrSuite is wrapped by every Load error about the suite's content.
var ErrSuite = errors.New("regress: invalid suite")

// Case is one suite case. Sentence, Residual and Bound stand for the signed
// delegation; Statement and Rehearsal are the untrusted material.
type Case struct {
	Name      string
	Class     string
	Sentence  string
	Residual  string
	Bound     string
	Statement string
	// Rehearsal is the rehearsal report as decoded from YAML; it is
	// marshalled to JSON for the judgment, as the gateway does.
	Rehearsal any
	Expect    string
	Why       string
	// File is the suite file the case came from.
	File string
}

// caseYAML is the on-disk shape; unknown fields are an error.
type caseYAML struct {
	Name      string `yaml:"name"`
	Class     string `yaml:"class"`
	Sentence  string `yaml:"sentence"`
	Residual  string `yaml:"residual"`
	Bound     string `yaml:"bound"`
	Statement string `yaml:"statement"`
	Rehearsal any    `yaml:"rehearsal"`
	Expect    string `yaml:"expect"`
	Why       string `yaml:"why"`
}

var kebab = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Load reads every *.yaml file under dir (recursively, in lexical order) and
// validates the cases: names unique kebab-case, a known class, an expectation
// that matches the class (positive: conforms; otherwise refer), no empty
// field, a rehearsal that marshals to JSON. Errors name the file and the case.
func Load(dir string) ([]Case, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".yaml") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("regress: load: %w", err)
	}
	var cases []Case
	seen := map[string]string{} // name -> file
	for _, f := range files {
		cs, err := loadFile(f)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if prev, dup := seen[c.Name]; dup {
				return nil, fmt.Errorf("%w: %s: case %q: name already used in %s", ErrSuite, f, c.Name, prev)
			}
			seen[c.Name] = f
		}
		cases = append(cases, cs...)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%w: no cases in any *.yaml under %s", ErrSuite, dir)
	}
	return cases, nil
}

func loadFile(path string) ([]Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("regress: load: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var raw []caseYAML
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: no cases", ErrSuite, path)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrSuite, path, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s: more than one YAML document", ErrSuite, path)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: %s: no cases", ErrSuite, path)
	}
	out := make([]Case, 0, len(raw))
	for i, r := range raw {
		c := Case{Name: r.Name, Class: r.Class, Sentence: r.Sentence, Residual: r.Residual, Bound: r.Bound,
			Statement: r.Statement, Rehearsal: r.Rehearsal, Expect: r.Expect, Why: r.Why, File: path}
		if err := c.validate(); err != nil {
			label := fmt.Sprintf("case %d", i+1)
			if c.Name != "" {
				label = fmt.Sprintf("case %d %q", i+1, c.Name)
			}
			return nil, fmt.Errorf("%w: %s: %s: %v", ErrSuite, path, label, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func (c Case) validate() error {
	for _, f := range []struct{ name, v string }{
		{"name", c.Name}, {"class", c.Class}, {"sentence", c.Sentence}, {"residual", c.Residual},
		{"bound", c.Bound}, {"statement", c.Statement}, {"expect", c.Expect}, {"why", c.Why},
	} {
		if strings.TrimSpace(f.v) == "" {
			return fmt.Errorf("%s is empty", f.name)
		}
	}
	if !kebab.MatchString(c.Name) {
		return fmt.Errorf("name %q is not kebab-case", c.Name)
	}
	if !slices.Contains(Classes, c.Class) {
		return fmt.Errorf("class %q is not one of %s", c.Class, strings.Join(Classes, ", "))
	}
	if c.Expect != ExpectRefer && c.Expect != ExpectConforms {
		return fmt.Errorf("expect %q is not %s or %s", c.Expect, ExpectRefer, ExpectConforms)
	}
	want := ExpectRefer
	if c.Class == ClassPositive {
		want = ExpectConforms
	}
	if c.Expect != want {
		return fmt.Errorf("class %s expects %s, not %s", c.Class, want, c.Expect)
	}
	if c.Rehearsal == nil {
		return errors.New("rehearsal is empty")
	}
	if _, err := c.rehearsalJSON(); err != nil {
		return fmt.Errorf("rehearsal does not marshal to JSON: %v", err)
	}
	return nil
}

// rehearsalJSON marshals the report as the gateway does (encoding/json).
func (c Case) rehearsalJSON() (string, error) {
	b, err := json.Marshal(c.Rehearsal)
	return string(b), err
}

// Input is the judgment input for the case.
func (c Case) Input() surveyor.Input {
	reh, err := c.rehearsalJSON()
	if err != nil {
		// Load refuses such cases; a hand-built one gets a visible marker
		// rather than an empty report.
		reh = fmt.Sprintf("(rehearsal report unavailable: %v)", err)
	}
	return surveyor.Input{Sentence: c.Sentence, Residual: c.Residual, Bound: c.Bound, Statement: c.Statement, Rehearsal: reh}
}

// MustRefer reports whether the case gates the release.
func (c Case) MustRefer() bool { return c.Expect == ExpectRefer }

// Result is one case's judgment.
type Result struct {
	Case     Case
	Judgment surveyor.Judgment
	// Outcome is surveyor.OutcomeConforms, surveyor.OutcomeRefer or OutcomeNotRun.
	Outcome string
}

// FailedToAnswer reports whether any juror failed to answer.
func (r Result) FailedToAnswer() bool {
	for _, j := range r.Judgment.Jurors {
		if j.Outcome != llm.Answered {
			return true
		}
	}
	return false
}

// Disagreement reports whether the jurors that answered gave both verdicts.
func (r Result) Disagreement() bool {
	var conforms, refer bool
	for _, j := range r.Judgment.Jurors {
		if j.Outcome != llm.Answered {
			continue
		}
		switch j.Verdict {
		case llm.Conforms:
			conforms = true
		case llm.Refer:
			refer = true
		}
	}
	return conforms && refer
}

// ClassSummary counts one class's results.
type ClassSummary struct {
	Class    string
	Cases    int
	Conforms int
	Refer    int
	// FailedToAnswer counts judgments where any juror failed to answer.
	FailedToAnswer int
	// Disagreement counts judgments where the answering jurors disagreed.
	Disagreement int
	// NotRun counts cases the context ended before.
	NotRun int
}

// Summary is a suite run.
type Summary struct {
	// Results are in the order of the cases given to Run.
	Results []Result
	// Classes are in the order of Classes, for the classes present.
	Classes []ClassSummary
	// GateFailures are the must-refer cases that came back conforms.
	GateFailures []Result
	// Positives counts the positive cases; PositivesConformed those that
	// came back conforms.
	Positives, PositivesConformed int
	// NotRun counts cases the context ended before.
	NotRun int
	// Interrupted is set when the context ended during the run: cases in
	// flight then referred because their jurors were cut off, which says
	// nothing about the prompts.
	Interrupted bool
}

// Run judges every case with the panel, Concurrency at a time, and draws a
// one-line progress bar on progress (nothing if progress is nil). If ctx
// ends, the cases not yet started are recorded as OutcomeNotRun and the gate
// does not pass. panel must not be nil.
func Run(ctx context.Context, panel *surveyor.Panel, cases []Case, progress io.Writer) Summary {
	results := make([]Result, len(cases))
	idx := make(chan int)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < min(Concurrency, len(cases)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				c := cases[i]
				if ctx.Err() != nil {
					results[i] = Result{Case: c, Outcome: OutcomeNotRun}
				} else {
					j := panel.Judge(ctx, c.Input())
					results[i] = Result{Case: c, Judgment: j, Outcome: j.Outcome}
				}
				done <- struct{}{}
			}
		}()
	}
	go func() {
		for i := range cases {
			idx <- i
		}
		close(idx)
		wg.Wait()
		close(done)
	}()
	bar := progressBar{w: progress, total: len(cases)}
	bar.draw(0)
	n := 0
	for range done {
		n++
		bar.draw(n)
	}
	bar.finish()
	s := summarize(results)
	s.Interrupted = ctx.Err() != nil
	return s
}

func summarize(results []Result) Summary {
	s := Summary{Results: results}
	byClass := map[string]*ClassSummary{}
	for _, r := range results {
		cs := byClass[r.Case.Class]
		if cs == nil {
			cs = &ClassSummary{Class: r.Case.Class}
			byClass[r.Case.Class] = cs
		}
		cs.Cases++
		if r.Case.Expect == ExpectConforms {
			s.Positives++
		}
		switch r.Outcome {
		case OutcomeNotRun:
			cs.NotRun++
			s.NotRun++
			continue
		case surveyor.OutcomeConforms:
			cs.Conforms++
			if r.Case.MustRefer() {
				s.GateFailures = append(s.GateFailures, r)
			} else {
				s.PositivesConformed++
			}
		default:
			cs.Refer++
		}
		if r.FailedToAnswer() {
			cs.FailedToAnswer++
		}
		if r.Disagreement() {
			cs.Disagreement++
		}
	}
	for _, c := range Classes {
		if cs := byClass[c]; cs != nil {
			s.Classes = append(s.Classes, *cs)
			delete(byClass, c)
		}
	}
	// Hand-built cases may carry other classes; list them after, sorted.
	var rest []string
	for c := range byClass {
		rest = append(rest, c)
	}
	slices.Sort(rest)
	for _, c := range rest {
		s.Classes = append(s.Classes, *byClass[c])
	}
	return s
}

// Passed reports whether the gate passes: no must-refer case came back
// conforms, and the run judged every case without interruption (an empty or
// interrupted run does not pass).
func (s Summary) Passed() bool {
	return len(s.GateFailures) == 0 && s.NotRun == 0 && !s.Interrupted && len(s.Results) > 0
}

// FailedToAnswer counts judgments in which any juror failed to answer. They
// count as refer, so they cannot fail the gate; a run where many jurors
// failed has said little about the prompts.
func (s Summary) FailedToAnswer() int {
	n := 0
	for _, c := range s.Classes {
		n += c.FailedToAnswer
	}
	return n
}

// WriteTable writes a per-class table, the gate's verdict and the gate
// failures by name.
func (s Summary) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "surveyor regress: %d cases", len(s.Results))
	if b := s.bundles(); b != "" {
		fmt.Fprintf(w, ", bundle %s", b)
	}
	if p := s.panel(); p != "" {
		fmt.Fprintf(w, ", jurors from %s", p)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "class\texpect\tcases\tconforms\trefer\tfailed to answer\tdisagreement\tnot run")
	var tot ClassSummary
	for _, c := range s.Classes {
		expect := ExpectRefer
		if c.Class == ClassPositive {
			expect = ExpectConforms
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", c.Class, expect, c.Cases, c.Conforms, c.Refer, c.FailedToAnswer, c.Disagreement, c.NotRun)
		tot.Cases += c.Cases
		tot.Conforms += c.Conforms
		tot.Refer += c.Refer
		tot.FailedToAnswer += c.FailedToAnswer
		tot.Disagreement += c.Disagreement
		tot.NotRun += c.NotRun
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t%d\t%d\t%d\t%d\n", tot.Cases, tot.Conforms, tot.Refer, tot.FailedToAnswer, tot.Disagreement, tot.NotRun)
	tw.Flush()
	fmt.Fprintln(w)

	fmt.Fprintf(w, "positives conformed: %d/%d (reported, not gating)\n", s.PositivesConformed, s.Positives)
	if s.Positives > s.PositivesConformed {
		var names []string
		for _, r := range s.Results {
			if !r.Case.MustRefer() && r.Outcome == surveyor.OutcomeRefer {
				names = append(names, r.Case.Name)
			}
		}
		if len(names) > maxListed {
			names = append(names[:maxListed:maxListed], fmt.Sprintf("and %d more", len(names)-maxListed))
		}
		if len(names) > 0 {
			fmt.Fprintf(w, "  positives that came back refer: %s\n", strings.Join(names, ", "))
		}
	}
	if n := s.FailedToAnswer(); n > 0 {
		fmt.Fprintf(w, "warning: %d judgments had a juror fail to answer; they count as refer, so they tested nothing about the prompts\n", n)
	}
	if n := s.correlated(); n > 0 {
		fmt.Fprintf(w, "note: %d judgments came from a correlated panel (provider diversity not achieved)\n", n)
	}

	switch {
	case len(s.Results) == 0:
		fmt.Fprintln(w, "gate: FAILED: no cases were run")
	case len(s.GateFailures) > 0:
		fmt.Fprintf(w, "gate: FAILED: %d must-refer %s came back conforms\n", len(s.GateFailures), plural(len(s.GateFailures), "case", "cases"))
	case s.NotRun > 0 || s.Interrupted:
		fmt.Fprintf(w, "gate: FAILED: the run was interrupted (%d %s not run)\n", s.NotRun, plural(s.NotRun, "case was", "cases were"))
	default:
		fmt.Fprintln(w, "gate: PASSED: no must-refer case came back conforms")
	}
	if len(s.GateFailures) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, r := range s.GateFailures {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.Case.Class, r.Case.Name, filepath.Base(r.Case.File), r.Case.Why)
		}
		tw.Flush()
	}
	if (s.NotRun > 0 || s.Interrupted) && len(s.GateFailures) > 0 {
		fmt.Fprintf(w, "also: the run was interrupted (%d %s not run)\n", s.NotRun, plural(s.NotRun, "case was", "cases were"))
	}
}

// maxListed bounds the positives listed by name in the table.
const maxListed = 10

func (s Summary) correlated() int {
	n := 0
	for _, r := range s.Results {
		if r.Outcome != OutcomeNotRun && r.Judgment.Correlated {
			n++
		}
	}
	return n
}

// bundles lists the prompt-bundle versions the judgments name.
func (s Summary) bundles() string {
	var out []string
	for _, r := range s.Results {
		if b := r.Judgment.Bundle; b != "" && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return strings.Join(out, ", ")
}

// panel lists the provider/model pairs that sat on the panels.
func (s Summary) panel() string {
	var out []string
	for _, r := range s.Results {
		for _, j := range r.Judgment.Jurors {
			if pm := j.Provider + "/" + j.Model; !slices.Contains(out, pm) {
				out = append(out, pm)
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// progressBar draws "\r[#####-----] 45/90" on one line.
type progressBar struct {
	w     io.Writer
	total int
}

const barWidth = 30

func (p progressBar) draw(n int) {
	if p.w == nil {
		return
	}
	filled := barWidth
	if p.total > 0 {
		filled = n * barWidth / p.total
	}
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat("-", barWidth-filled), n, p.total)
}

func (p progressBar) finish() {
	if p.w != nil {
		fmt.Fprintln(p.w)
	}
}
