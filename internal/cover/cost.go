package cover

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// CostInput is the deployment the dual-cost model (paper, Appendix F) is
// evaluated for.
type CostInput struct {
	// N is predicate evaluations per period (agents x steps x rules).
	N float64 `json:"n"`
	// JudgeCost is the cost of one judge call; a deterministic check is
	// taken as free.
	JudgeCost float64 `json:"judge_cost"`
	// Loss, when set, is the expected loss per missed determination.
	Loss float64 `json:"loss,omitempty"`
}

// RouteCost is one routing choice's cost per period.
type RouteCost struct {
	Router string `json:"router"`
	// Q is the share routed to a fixed check (elimination), F the
	// false-decidable rate among them (1 - precision), null when the input
	// has no gold labels.
	Q *float64 `json:"q"`
	F *float64 `json:"f"`
	// FLow and FHigh bound F by the Wilson interval of precision.
	FLow  *float64 `json:"f_low"`
	FHigh *float64 `json:"f_high"`
	// TokenCost is N (1 - q) c; Savings N q c against judging everything.
	TokenCost float64 `json:"token_cost"`
	Savings   float64 `json:"savings"`
	// Exposure is N q f, the expected missed violations per period, with
	// its range; SafetyCost is Exposure x Loss when a loss is given.
	Exposure     *float64 `json:"exposure"`
	ExposureLow  *float64 `json:"exposure_low"`
	ExposureHigh *float64 `json:"exposure_high"`
	SafetyCost   *float64 `json:"safety_cost,omitempty"`
}

// CostTable is the dual cost of every routing choice of one corpus.
type CostTable struct {
	Corpus string      `json:"corpus"`
	Input  CostInput   `json:"input"`
	Routes []RouteCost `json:"routes"`
}

// Costs evaluates the dual-cost model for routers, after a first "judge
// everything" row.
func Costs(corpus string, in CostInput, routers []Router) CostTable {
	t := CostTable{Corpus: corpus, Input: in}
	zero := 0.0
	all := RouteCost{Router: "judge everything", Q: &zero, F: &zero, FLow: &zero, FHigh: &zero,
		TokenCost: in.N * in.JudgeCost, Exposure: &zero, ExposureLow: &zero, ExposureHigh: &zero}
	if in.Loss > 0 {
		all.SafetyCost = &zero
	}
	t.Routes = append(t.Routes, all)
	for _, r := range routers {
		rc := RouteCost{Router: r.Name}
		if r.Elimination.Rate != nil {
			q := *r.Elimination.Rate
			rc.Q = &q
			rc.TokenCost = in.N * (1 - q) * in.JudgeCost
			rc.Savings = in.N * q * in.JudgeCost
		} else {
			rc.TokenCost = in.N * in.JudgeCost
		}
		if r.Precision.Rate != nil && rc.Q != nil {
			f, lo, hi := 1-*r.Precision.Rate, 1-*r.Precision.WilsonHigh, 1-*r.Precision.WilsonLow
			e, el, eh := in.N**rc.Q*f, in.N**rc.Q*lo, in.N**rc.Q*hi
			rc.F, rc.FLow, rc.FHigh = &f, &lo, &hi
			rc.Exposure, rc.ExposureLow, rc.ExposureHigh = &e, &el, &eh
			if in.Loss > 0 {
				s := e * in.Loss
				rc.SafetyCost = &s
			}
		} else if rc.Q != nil && *rc.Q == 0 {
			z := 0.0
			rc.F, rc.Exposure, rc.ExposureLow, rc.ExposureHigh = &z, &z, &z, &z
		}
		t.Routes = append(t.Routes, rc)
	}
	return t
}

// RoutersFromReport reads the routers of a report file: a study (cover
// study --json, one set per corpus), a gate corpus evaluation (cover gates
// --json) or a draft report (delegation draft --json, no gold).
func RoutersFromReport(data []byte) (map[string][]Router, []string, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, nil, fmt.Errorf("cover: cost: the report is not a JSON object: %w", err)
	}
	out := map[string][]Router{}
	var order []string
	dec := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(data))
		return d.Decode(v)
	}
	switch {
	case probe["corpora"] != nil:
		var s Study
		if err := dec(&s); err != nil {
			return nil, nil, fmt.Errorf("cover: cost: study: %w", err)
		}
		for _, c := range s.Corpora {
			out[c.Corpus] = c.Routers()
			order = append(order, c.Corpus)
		}
	case probe["routers"] != nil && probe["yaml"] != nil:
		var d DraftReport
		if err := dec(&d); err != nil {
			return nil, nil, fmt.Errorf("cover: cost: draft report: %w", err)
		}
		out["draft"] = d.Routers
		order = append(order, "draft")
	case probe["routers"] != nil:
		var g GateStudy
		if err := dec(&g); err != nil {
			return nil, nil, fmt.Errorf("cover: cost: gate corpus evaluation: %w", err)
		}
		out["gate corpus"] = g.Routers
		order = append(order, "gate corpus")
	default:
		return nil, nil, fmt.Errorf("cover: cost: not a study, gate corpus or draft report (no corpora or routers)")
	}
	return out, order, nil
}

func optF(v *float64, format string) string {
	if v == nil {
		return "unknown"
	}
	return fmt.Sprintf(format, *v)
}

// WriteTable prints the cost table.
func (t CostTable) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%s: N=%g evaluations per period, judge cost %g per call", t.Corpus, t.Input.N, t.Input.JudgeCost)
	if t.Input.Loss > 0 {
		fmt.Fprintf(w, ", loss %g per missed determination", t.Input.Loss)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	head := "router\tq (auto)\tf (false-dec.)\ttoken cost\tsavings\texposure N·q·f (range)"
	if t.Input.Loss > 0 {
		head += "\tsafety cost"
	}
	fmt.Fprintln(tw, head)
	for _, r := range t.Routes {
		exp := "unknown (no gold)"
		if r.Exposure != nil {
			exp = fmt.Sprintf("%.2f (%.2f-%.2f)", *r.Exposure, *r.ExposureLow, *r.ExposureHigh)
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%.2f\t%.2f\t%s", r.Router, optF(r.Q, "%.3f"), optF(r.F, "%.3f"), r.TokenCost, r.Savings, exp)
		if t.Input.Loss > 0 {
			line += "\t" + optF(r.SafetyCost, "%.2f")
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}
