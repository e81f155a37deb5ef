package cover

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestGateCorpus runs the gates over testdata/cover/corpus.yaml and
// prints the paper's Table 1 for it: unanimity alone against unanimity
// plus the gates, with Wilson intervals. Every trap the gates are meant
// to catch must be caught; the figures are pinned so a change to the
// gates that moves them is seen (update docs/cover.md with them).
func TestGateCorpus(t *testing.T) {
	t.Parallel()
	c, err := LoadCorpus("../../testdata/cover/corpus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Clauses) < 60 {
		t.Fatalf("the corpus has %d clauses, want at least 60", len(c.Clauses))
	}
	gs := EvaluateCorpus(c, c.Env(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
	var buf bytes.Buffer
	gs.WriteTable(&buf)
	t.Logf("\n%s", buf.String())
	for _, o := range gs.Clauses {
		switch {
		case o.Trap != "" && o.Trap != "partial" && o.Admitted:
			t.Errorf("%s (trap %s) was admitted: %+v", o.ID, o.Trap, o.Gates)
		case o.Trap == "" && o.Gold == Decidable && !o.Admitted:
			t.Errorf("%s (gold decidable, sound check) was not admitted: %+v", o.ID, o.Gates)
		case o.Trap == "partial" && !o.Admitted:
			t.Errorf("%s (a grounded partial check) was not admitted, so the corpus no longer shows what the gates cannot certify: %+v", o.ID, o.Gates)
		}
	}
	r := map[string]Router{}
	for _, x := range gs.Routers {
		r[x.Name] = x
	}
	pin := func(name string, prec, precN, cov, covN, elim int) {
		t.Helper()
		x := r[name]
		if x.Precision.K != prec || x.Precision.N != precN || x.Coverage.K != cov || x.Coverage.N != covN || x.Elimination.K != elim || x.Elimination.N != gs.N {
			t.Errorf("%s: precision %d/%d coverage %d/%d elimination %d/%d; pinned %d/%d %d/%d %d/%d",
				name, x.Precision.K, x.Precision.N, x.Coverage.K, x.Coverage.N, x.Elimination.K, x.Elimination.N, prec, precN, cov, covN, elim, gs.N)
		}
	}
	pin("unanimous", 34, 41, 34, 40, 41)
	pin("unanimous+gates", 29, 30, 29, 40, 30)
	pin("gates (any nomination)", 35, 40, 35, 40, 40)
	if !strings.Contains(buf.String(), "unanimous+gates") {
		t.Error("the table lacks the gated router")
	}
}
