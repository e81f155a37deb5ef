package cover

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

func loadStudy(t *testing.T, path string) *Study {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := ParseLabels(data)
	if err != nil {
		t.Fatal(err)
	}
	return Measure(ls)
}

func wantRate(t *testing.T, what string, got Rate, k, n int) {
	t.Helper()
	if got.K != k || got.N != n {
		t.Errorf("%s = %d/%d, want %d/%d", what, got.K, got.N, k, n)
		return
	}
	if n == 0 {
		if got.Rate != nil || got.WilsonLow != nil || got.WilsonHigh != nil {
			t.Errorf("%s over 0 items has a rate; want null", what)
		}
		return
	}
	if got.Rate == nil || math.Abs(*got.Rate-float64(k)/float64(n)) > 1e-12 {
		t.Errorf("%s rate = %v, want %v", what, got.Rate, float64(k)/float64(n))
	}
}

func approx(a, b float64) bool { return math.Abs(a-b) < 5e-5 }

// TestWilsonByHand checks the interval against values computed by hand
// (and in any statistics package): 1/2, 0/2, 2/2, 8/10.
func TestWilsonByHand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		k, n   int
		lo, hi float64
	}{
		{1, 2, 0.0945, 0.9055},
		{0, 2, 0, 0.6576},
		{2, 2, 0.3424, 1},
		{8, 10, 0.4902, 0.9433},
		{0, 1, 0, 0.7935},
	} {
		lo, hi := Wilson(c.k, c.n)
		if !approx(lo, c.lo) || !approx(hi, c.hi) {
			t.Errorf("Wilson(%d, %d) = %.4f-%.4f, want %.4f-%.4f", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
	r := NewRate(0, 0)
	b, _ := json.Marshal(r)
	if string(b) != `{"k":0,"n":0,"rate":null,"wilson_low":null,"wilson_high":null}` {
		t.Errorf("a rate over 0 items marshals as %s, want nulls", b)
	}
}

// TestStudyByHand: every measure of testdata/study/small.csv, computed by
// hand (see the comments).
func TestStudyByHand(t *testing.T) {
	t.Parallel()
	s := loadStudy(t, "testdata/study/small.csv")
	if len(s.Corpora) != 1 {
		t.Fatalf("got %d corpora, want 1", len(s.Corpora))
	}
	c := s.Corpora[0]
	if c.N != 4 || strings.Join(c.Models, ",") != "A,B,C" || c.Gold != 4 || c.GoldDecidable != 2 {
		t.Fatalf("n=%d models=%v gold=%d/%d", c.N, c.Models, c.GoldDecidable, c.Gold)
	}
	// p2 (D,J,D) and p3 (D,D,J) are contested.
	wantRate(t, "contested", c.ContestedRate, 2, 4)
	// A=DDDJ B=DJDJ C=DDJJ: A~B po .75 pe .5 -> .5; A~C .5; B~C po .5 pe .5 -> 0.
	wantKappa := map[string]float64{"A~B": 0.5, "A~C": 0.5, "B~C": 0}
	if len(c.Kappa) != 3 {
		t.Fatalf("%d kappa pairs, want 3", len(c.Kappa))
	}
	for _, k := range c.Kappa {
		w := wantKappa[k.A+"~"+k.B]
		if k.Kappa == nil || !approx(*k.Kappa, w) || k.N != 4 || !approx(*k.Expected, 0.5) {
			t.Errorf("kappa %s~%s = %+v, want %v", k.A, k.B, k, w)
		}
	}
	type want struct{ over, overN, under, underN, prec, precN, cov, covN, elim, elimN int }
	wants := map[string]want{
		"A": {1, 2, 0, 2, 2, 3, 2, 2, 3, 4},
		"B": {1, 2, 1, 2, 1, 2, 1, 2, 2, 4},
		// C's lines carry no gold; the predicate's gold comes from A and B.
		"C": {0, 2, 0, 2, 2, 2, 2, 2, 2, 4},
	}
	for _, m := range c.PerModel {
		w := wants[m.Name]
		wantRate(t, m.Name+" over_claim", m.OverClaim, w.over, w.overN)
		wantRate(t, m.Name+" under_claim", m.UnderClaim, w.under, w.underN)
		wantRate(t, m.Name+" precision", m.Precision, w.prec, w.precN)
		wantRate(t, m.Name+" coverage", m.Coverage, w.cov, w.covN)
		wantRate(t, m.Name+" elimination", m.Elimination, w.elim, w.elimN)
	}
	// A flips p1 under strict and keeps p2.
	wantRate(t, "A flip strict", c.PerModel[0].FlipRate["strict"], 1, 2)
	if len(c.PerModel[1].FlipRate) != 0 {
		t.Errorf("B has flip rates %v, want none", c.PerModel[1].FlipRate)
	}
	// Unanimous {p1}; majority {p1, p2, p3}.
	wantRate(t, "unanimous precision", c.Unanimous.Precision, 1, 1)
	wantRate(t, "unanimous coverage", c.Unanimous.Coverage, 1, 2)
	wantRate(t, "unanimous elimination", c.Unanimous.Elimination, 1, 4)
	wantRate(t, "majority precision", c.Majority.Precision, 2, 3)
	wantRate(t, "majority coverage", c.Majority.Coverage, 2, 2)
	wantRate(t, "majority elimination", c.Majority.Elimination, 3, 4)

	var buf bytes.Buffer
	s.WriteTable(&buf)
	for _, w := range []string{"contested rate: 50.0% (2/4, 15.0-85.0)", "A ~ B: 0.500", "unanimous", "A under strict: 50.0% (1/2, 9.5-90.5)"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, buf.String())
		}
	}
	buf.Reset()
	if err := s.WriteKappaSVG(&buf); err != nil || !strings.Contains(buf.String(), ">0.50</text>") || !strings.HasPrefix(buf.String(), "<svg") {
		t.Errorf("svg: %v\n%s", err, buf.String())
	}
}

// TestStudyEdgeCases: one model, perfect agreement with and without
// variety, rates over nothing, JSON without NaN.
func TestStudyEdgeCases(t *testing.T) {
	t.Parallel()
	jsonl := `{"predicate":"q1","corpus":"solo","model":"A","label":"DECIDABLE","gold":"DECIDABLE","variant":""}
{"predicate":"q2","corpus":"solo","model":"A","label":"JUDGMENT","gold":"","variant":""}
{"predicate":"r1","corpus":"same","model":"A","label":"DECIDABLE","gold":"","variant":""}
{"predicate":"r2","corpus":"same","model":"A","label":"DECIDABLE","gold":"","variant":""}
{"predicate":"r1","corpus":"same","model":"B","label":"DECIDABLE","gold":"","variant":""}
{"predicate":"r2","corpus":"same","model":"B","label":"DECIDABLE","gold":"","variant":""}
{"predicate":"v1","corpus":"varied","model":"A","label":"DECIDABLE","gold":"","variant":""}
{"predicate":"v2","corpus":"varied","model":"A","label":"JUDGMENT","gold":"","variant":""}
{"predicate":"v1","corpus":"varied","model":"B","label":"DECIDABLE","gold":"","variant":""}
{"predicate":"v2","corpus":"varied","model":"B","label":"JUDGMENT","gold":"","variant":""}
`
	ls, err := ParseLabels([]byte(jsonl))
	if err != nil {
		t.Fatal(err)
	}
	s := Measure(ls)
	by := map[string]CorpusStudy{}
	for _, c := range s.Corpora {
		by[c.Corpus] = c
	}
	solo := by["solo"]
	if len(solo.Kappa) != 0 || len(solo.Models) != 1 {
		t.Errorf("one model: kappa %v", solo.Kappa)
	}
	wantRate(t, "solo contested", solo.ContestedRate, 0, 2)
	wantRate(t, "solo over_claim", solo.PerModel[0].OverClaim, 0, 0)
	wantRate(t, "solo under_claim", solo.PerModel[0].UnderClaim, 0, 1)
	wantRate(t, "solo unanimous precision", solo.Unanimous.Precision, 1, 1)
	wantRate(t, "solo majority elimination", solo.Majority.Elimination, 1, 2)

	same := by["same"].Kappa[0]
	if same.Kappa != nil || same.Undefined == "" || same.Observed == nil || *same.Observed != 1 || *same.Expected != 1 {
		t.Errorf("all-DECIDABLE agreement: %+v, want kappa null (expected agreement 1), observed 1", same)
	}
	varied := by["varied"].Kappa[0]
	if varied.Kappa == nil || *varied.Kappa != 1 {
		t.Errorf("perfect agreement with both labels: %+v, want kappa 1", varied)
	}
	wantRate(t, "same unanimous precision (no gold)", by["same"].Unanimous.Precision, 0, 0)
	b, err := json.Marshal(s)
	if err != nil || strings.Contains(string(b), "NaN") {
		t.Errorf("json: %v %s", err, b)
	}
	if !strings.Contains(string(b), `"kappa":null`) {
		t.Errorf("json lacks the null kappa: %s", b)
	}
}

func TestParseLabelsRefuses(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"header":      "a,b,c,d,e,f\n",
		"label":       "predicate,corpus,model,label,gold,variant\np,c,m,MAYBE,,\n",
		"gold":        "predicate,corpus,model,label,gold,variant\np,c,m,JUDGMENT,YES,\n",
		"twice":       "predicate,corpus,model,label,gold,variant\np,c,m,JUDGMENT,,\np,c,m,DECIDABLE,,\n",
		"two golds":   "predicate,corpus,model,label,gold,variant\np,c,m,JUDGMENT,JUDGMENT,\np,c,n,JUDGMENT,DECIDABLE,\n",
		"fields":      "predicate,corpus,model,label,gold,variant\np,c,m,JUDGMENT\n",
		"json extra":  `{"predicate":"p","model":"m","label":"JUDGMENT","extra":1}`,
		"no model":    `{"predicate":"p","label":"JUDGMENT"}`,
		"json broken": `{"predicate":`,
	} {
		if _, err := ParseLabels([]byte(in)); err == nil {
			t.Errorf("%s: parsed, want an error", name)
		}
	}
}
