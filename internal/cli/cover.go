package cli

import (
	"bytes"
	"os"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/cover"
)

func runCover(e *env, args []string) int {
	return e.dispatch("harbormaster cover", []command{
		{"study", "the paper's measures of a panel from a label file", runCoverStudy},
		{"gates", "run the gates over a gate corpus: unanimity against unanimity plus gates", runCoverGates},
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
