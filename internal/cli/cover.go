package cli

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/cover"
)

func runCover(e *env, args []string) int {
	return e.dispatch("harbormaster cover", []command{
		{"study", "the paper's measures of a panel from a label file", runCoverStudy},
		{"gates", "run the gates over a gate corpus: unanimity against unanimity plus gates", runCoverGates},
		{"cost", "token cost and missed-violation exposure of each routing choice", runCoverCost},
		{"label", "run the configured panel over a clause corpus and write a label file", runCoverLabel},
	}, args)
}

func runCoverStudy(e *env, args []string) int {
	fs := e.flags("harbormaster cover study FILE [--json] [--svg OUT]",
		"Computes the measures of a panel from a label file (CSV with the header\n"+
			"predicate,corpus,model,label,gold,variant, or the same fields as JSON lines):\n"+
			"per corpus n, contested rate, pairwise Cohen's kappa, per model over- and\n"+
			"under-claim, precision, coverage and elimination, the same for the unanimous\n"+
			"and majority panels, and flip rates per rubric variant. Every rate carries its\n"+
			"Wilson 95% interval; a rate over 0 items is null.")
	asJSON := fs.Bool("json", false, "print the study as JSON")
	svg := fs.String("svg", "", "also write a chart of the pairwise kappa to `OUT` (SVG)")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "expected exactly one label FILE, got %d arguments", fs.NArg())
	}
	data, err := config.ReadFileLimited(fs.Arg(0), cover.MaxLabelBytes)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	ls, err := cover.ParseLabels(data)
	if err != nil {
		e.errorf("%s: %v", fs.Arg(0), err)
		return exitUsage
	}
	s := cover.Measure(ls)
	if *svg != "" {
		var b bytes.Buffer
		if err := s.WriteKappaSVG(&b); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		if err := os.WriteFile(*svg, b.Bytes(), 0o644); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
	}
	if *asJSON {
		writeJSON(e, s)
	} else {
		s.WriteTable(e.stdout)
	}
	return exitOK
}

func runCoverGates(e *env, args []string) int {
	fs := e.flags("harbormaster cover gates CORPUS [--json]",
		"Runs the gates G0-G3 over a gate corpus (clauses with gold labels, a panel's labels\n"+
			"and candidate elements, over a schema; see testdata/cover/corpus.yaml) and prints\n"+
			"precision, coverage and elimination against gold for each model, majority,\n"+
			"unanimity, unanimity plus the gates, and the gates over every clause, with Wilson\n"+
			"95% intervals. No model is called.")
	asJSON := fs.Bool("json", false, "print the evaluation as JSON (cover cost reads it)")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "expected exactly one CORPUS file, got %d arguments", fs.NArg())
	}
	c, err := cover.LoadCorpus(fs.Arg(0))
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	gs := cover.EvaluateCorpus(c, c.Env(time.Now().UTC()))
	if *asJSON {
		writeJSON(e, gs)
	} else {
		gs.WriteTable(e.stdout)
	}
	return exitOK
}

func runCoverCost(e *env, args []string) int {
	fs := e.flags("harbormaster cover cost REPORT --n N --judge-cost C [--loss L] [--corpus NAME] [--json]",
		"The dual-cost model (the paper's Appendix F) of a deployment: for each routing choice\n"+
			"(each single model, majority, unanimity, unanimity plus the gates) the token cost\n"+
			"N(1-q)c per period and the expected missed-violation exposure N·q·f, where q is the\n"+
			"share routed to a fixed check and f = 1 - precision is its false-decidable rate\n"+
			"(with the range from precision's Wilson interval). REPORT is the JSON of cover study,\n"+
			"cover gates or delegation draft (a draft has no gold: its exposure is unknown).")
	n := fs.Float64("n", 0, "predicate evaluations per period (agents x steps x rules checked)")
	c := fs.Float64("judge-cost", 0, "cost of one judge call")
	loss := fs.Float64("loss", 0, "expected loss per missed determination (optional)")
	corpus := fs.String("corpus", "", "only this corpus of a study")
	asJSON := fs.Bool("json", false, "print the cost tables as JSON")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "expected exactly one REPORT file, got %d arguments", fs.NArg())
	}
	if *n <= 0 || *c < 0 || *loss < 0 {
		return e.usageErr(fs, "--n must be positive; --judge-cost and --loss must not be negative")
	}
	data, err := config.ReadFileLimited(fs.Arg(0), cover.MaxLabelBytes)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	routers, order, err := cover.RoutersFromReport(data)
	if err != nil {
		e.errorf("%s: %v", fs.Arg(0), err)
		return exitUsage
	}
	var tables []cover.CostTable
	for _, name := range order {
		if *corpus != "" && name != *corpus {
			continue
		}
		tables = append(tables, cover.Costs(name, cover.CostInput{N: *n, JudgeCost: *c, Loss: *loss}, routers[name]))
	}
	if len(tables) == 0 {
		e.errorf("%s has no corpus %q", fs.Arg(0), *corpus)
		return exitUsage
	}
	if *asJSON {
		writeJSON(e, tables)
		return exitOK
	}
	for i, t := range tables {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		t.WriteTable(e.stdout)
	}
	return exitOK
}

func runCoverLabel(e *env, args []string) int {
	fs := e.flags("harbormaster cover label CORPUS --config FILE [--out FILE] [--variant NAME]",
		"Runs every surveyor provider of the config over the clauses of a corpus (the YAML\n"+
			"of cover gates: id, text, gold) and writes a label file for cover study:\n"+
			"predicate,corpus,model,label,gold,variant. Each call is at temperature 0 with a\n"+
			"fixed schema; any failure is labelled JUDGMENT (and counted on stderr). A progress\n"+
			"bar goes to stderr. --variant names a rubric variant (prescriptive); repeat the\n"+
			"run per variant and concatenate the files to measure flip rates.")
	cfgPath := fs.String("config", "", "a serve config `FILE` with the surveyor providers")
	out := fs.String("out", "", "write the label file to `FILE` (default stdout)")
	variant := fs.String("variant", "", "the rubric variant `NAME` (empty: the base rubric)")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || *cfgPath == "" {
		return e.usageErr(fs, "expected one CORPUS and --config")
	}
	if _, ok := cover.Rubrics[*variant]; !ok {
		return e.usageErr(fs, "unknown --variant %q (known: prescriptive)", *variant)
	}
	c, err := cover.LoadCorpus(fs.Arg(0))
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	cfg, err := config.LoadSurveyor(*cfgPath)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	panel, err := coverPanel(cfg, e.getenv)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	name := strings.TrimSuffix(filepath.Base(fs.Arg(0)), filepath.Ext(fs.Arg(0)))
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(cover.LabelHeader)
	total := len(c.Clauses) * len(panel.Labelers)
	done, failed := 0, 0
	progress := func() {
		const width = 30
		filled := width * done / max(total, 1)
		fmt.Fprintf(e.stderr, "\r[%s%s] %d/%d calls, %d failed", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, failed)
	}
	progress()
	for _, cl := range c.Clauses {
		for _, m := range panel.Labelers {
			if e.ctx.Err() != nil {
				fmt.Fprintln(e.stderr)
				e.errorf("interrupted after %d of %d calls; nothing written", done, total)
				return exitFail
			}
			l := cover.LabelClauseRubric(e.ctx, m, *variant, "", cl.Text)
			if l.Failure != "" {
				failed++
			}
			_ = w.Write([]string{cl.ID, name, l.Model, l.Label, cl.Gold, *variant})
			done++
			progress()
		}
	}
	fmt.Fprintln(e.stderr)
	w.Flush()
	if *out == "" {
		_, _ = e.stdout.Write(buf.Bytes())
	} else if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if failed > 0 {
		e.hintf("%d of %d calls failed and were labelled JUDGMENT: check the providers before reading the study", failed, total)
	}
	return exitOK
}
