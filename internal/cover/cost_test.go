package cover

import (
	"encoding/json"
	"math"
	"testing"
)

// TestCostsByHand: N=1000 evaluations, c=0.01. A router that removes 3 of 4
// predicates at precision 2/3 costs 1000*(1/4)*0.01 = 2.5 and exposes
// 1000*0.75*(1/3) = 250 missed violations; with loss 2 the safety cost is
// 500. A router with no gold has unknown exposure, not zero.
func TestCostsByHand(t *testing.T) {
	t.Parallel()
	gold := map[string]string{"a": Decidable, "b": Decidable, "c": Judgment, "d": Judgment}
	all := []string{"a", "b", "c", "d"}
	r := NewRouter("x", all, map[string]bool{"a": true, "b": true, "c": true}, gold)
	nogold := NewRouter("y", all, map[string]bool{"a": true}, map[string]string{})
	ct := Costs("c", CostInput{N: 1000, JudgeCost: 0.01, Loss: 2}, []Router{r, nogold})
	if len(ct.Routes) != 3 || ct.Routes[0].TokenCost != 10 || *ct.Routes[0].Exposure != 0 || *ct.Routes[0].SafetyCost != 0 {
		t.Fatalf("judge everything: %+v", ct.Routes[0])
	}
	x := ct.Routes[1]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(*x.Q, 0.75) || !near(*x.F, 1.0/3) || !near(x.TokenCost, 2.5) || !near(x.Savings, 7.5) || !near(*x.Exposure, 250) || !near(*x.SafetyCost, 500) {
		t.Errorf("x: %+v", x)
	}
	lo, hi := Wilson(2, 3)
	if !near(*x.ExposureLow, 750*(1-hi)) || !near(*x.ExposureHigh, 750*(1-lo)) {
		t.Errorf("exposure range %v-%v", *x.ExposureLow, *x.ExposureHigh)
	}
	y := ct.Routes[2]
	if y.Exposure != nil || y.F != nil || !near(y.TokenCost, 7.5) {
		t.Errorf("no gold: %+v", y)
	}
	b, err := json.Marshal(ct)
	if err != nil || string(b) == "" {
		t.Fatal(err)
	}
	// The three report kinds are recognized.
	s := &Study{Corpora: []CorpusStudy{{Corpus: "reg", Unanimous: r, Majority: r}}}
	sj, _ := json.Marshal(s)
	if got, order, err := RoutersFromReport(sj); err != nil || len(order) != 1 || len(got["reg"]) != 2 {
		t.Errorf("study: %v %v %v", got, order, err)
	}
	gj, _ := json.Marshal(&GateStudy{N: 4, Routers: []Router{r}})
	if got, _, err := RoutersFromReport(gj); err != nil || len(got["gate corpus"]) != 1 {
		t.Errorf("gate study: %v %v", got, err)
	}
	dj, _ := json.Marshal(&DraftReport{Routers: []Router{nogold}, YAML: "x"})
	if got, _, err := RoutersFromReport(dj); err != nil || len(got["draft"]) != 1 {
		t.Errorf("draft: %v %v", got, err)
	}
	if _, _, err := RoutersFromReport([]byte(`{"x":1}`)); err == nil {
		t.Error("an unknown report was read")
	}
}
