package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	entries "github.com/harbormaster-dev/harbormaster/internal/ledger/entry"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
)

// The dashboard draws, as small server-rendered SVG charts, the figures
// the operators watch; every chart comes with its numbers as a table, for
// a screen reader and for exact reading.

// chart is a bar chart: one group per label, one bar per series, stacked.
type chart struct {
	ID      string
	Title   string
	Series  []series
	Groups  []group
	Width   int
	Height  int
	Empty   string
	MaxText string
}

type series struct {
	Name  string
	Class string
}

type group struct {
	Label  string
	Values []float64
	Text   string
	// Bars are the drawn rectangles, one per non-zero value.
	Bars   []bar
	X      int
	LabelX int
}

type bar struct {
	X, Y, W, H int
	Class      string
	Title      string
}

// layout computes the rectangles: stacked columns over a 180-pixel plot.
func (c *chart) layout() {
	const plotH, top, colW, gap = 150, 10, 28, 14
	c.Height = top + plotH + 40
	var maxV float64
	for _, g := range c.Groups {
		var sum float64
		for _, v := range g.Values {
			sum += v
		}
		maxV = max(maxV, sum)
	}
	c.Width = max(240, 40+len(c.Groups)*(colW+gap))
	c.MaxText = trimFloat(maxV)
	if maxV == 0 {
		maxV = 1
	}
	for i := range c.Groups {
		g := &c.Groups[i]
		g.X = 40 + i*(colW+gap)
		g.LabelX = g.X + colW/2
		y := top + plotH
		for j, v := range g.Values {
			if v <= 0 {
				continue
			}
			h := max(1, int(v/maxV*plotH))
			y -= h
			name := g.Label
			if g.Text != "" {
				name = g.Text
			}
			g.Bars = append(g.Bars, bar{X: g.X, Y: y, W: colW, H: h, Class: c.Series[j].Class, Title: fmt.Sprintf("%s %s: %s", name, c.Series[j].Name, trimFloat(v))})
		}
	}
}

func trimFloat(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}

type figure struct {
	Label string
	Value string
	Alert bool
	Note  string
}

type dashboardPage struct {
	Charts  []*chart
	Figures []figure
	Window  string
}

// dashboardEntries is how many of the latest logbook entries the charts
// are drawn from.
const dashboardEntries = 5000

func (c *Console) getDashboard(w http.ResponseWriter, r *http.Request, s *Session) {
	ctx := r.Context()
	es, err := c.cfg.Logbook.Tail(ctx, dashboardEntries)
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "Dashboard", "The logbook could not be read.")
		return
	}
	var decisions, judgments, queued, audits []logbook.Entry
	for _, e := range es {
		if t, ok := e.Subjects["target"]; ok && !s.Sees(t) {
			continue
		}
		switch e.Kind {
		case logbook.KindDecision:
			decisions = append(decisions, e)
			queued = append(queued, e)
		case logbook.KindApproval, logbook.KindDenial, logbook.KindExpiry:
			queued = append(queued, e)
		case logbook.KindJudgment:
			if d := c.cfg.Gateway.Registry().Delegation(e.Subjects["delegation"]); d != nil && s.Sees(d.Target) {
				judgments = append(judgments, e)
			}
		case logbook.KindAuditSampled, logbook.KindAuditReview:
			if d := c.cfg.Gateway.Registry().Delegation(e.Subjects["delegation"]); d != nil && s.Sees(d.Target) {
				audits = append(audits, e)
			}
		}
	}
	p := dashboardPage{}
	if len(es) > 0 {
		p.Window = fmt.Sprintf("the latest %d logbook entries, since %s", len(es), es[0].Time.UTC().Format("2006-01-02 15:04 UTC"))
	}
	p.Charts = append(p.Charts, outcomesChart(decisions), fastPathChart(decisions), c.panelChart(judgments),
		queueChart(queued), auditChart(audits))

	depth, oldest, qerr := c.queueFigures(ctx, s)
	if qerr == nil {
		p.Figures = append(p.Figures, figure{Label: "Queue depth", Value: fmt.Sprint(depth)},
			figure{Label: "Oldest waiting referral", Value: roundDur(oldest)})
	}
	if c.cfg.Auditor != nil {
		if pending, age, rate, err := c.cfg.Auditor.Stats(ctx); err == nil {
			p.Figures = append(p.Figures,
				figure{Label: "Audit queue", Value: fmt.Sprintf("%d pending", pending)},
				figure{Label: "Audit-queue age", Value: roundDur(age), Alert: age > c.cfg.AuditAlert, Note: "alert past " + roundDur(c.cfg.AuditAlert)},
				figure{Label: "Audit failure rate", Value: fmt.Sprintf("%.1f%%", rate*100), Alert: rate > 0, Note: "share of reviews that found a wrong verdict"})
		}
	}
	c.render(w, r, http.StatusOK, "dashboard", s, page{Title: "Dashboard", Nav: "dashboard", Data: p})
}

// timeline is a chart of entries counted per interval over the span of
// the entries, in up to 12 intervals; classify names each entry's series
// (its index in the chart's Series), or -1 to leave it out.
func timeline(ch *chart, es []logbook.Entry, classify func(logbook.Entry) int) *chart {
	if len(es) == 0 {
		return ch
	}
	start, end := es[0].Time, es[len(es)-1].Time
	span := end.Sub(start)
	n := 12
	step := max(span/time.Duration(n), time.Second)
	n = min(n, int(span/step)+1)
	format := "15:04"
	if span < 10*time.Minute {
		format = "15:04:05"
	}
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * step).UTC()
		g := group{Text: at.Format("2006-01-02 15:04:05 UTC"), Values: make([]float64, len(ch.Series))}
		if i == 0 || i == n-1 || i == n/2 { // three labels keep the axis readable
			g.Label = at.Format(format)
		}
		ch.Groups = append(ch.Groups, g)
	}
	counted := false
	for _, e := range es {
		if k := classify(e); k >= 0 {
			ch.Groups[min(n-1, int(e.Time.Sub(start)/step))].Values[k]++
			counted = true
		}
	}
	if !counted {
		ch.Groups = nil
		return ch
	}
	ch.layout()
	return ch
}

// outcomesChart: decisions by outcome over time.
func outcomesChart(es []logbook.Entry) *chart {
	ch := &chart{ID: "outcomes", Title: "Decisions by outcome over time", Empty: "No decisions yet.",
		Series: []series{{"run on the fast path", "s-run"}, {"referred", "s-referred"}, {"rejected or refused", "s-rejected"}}}
	return timeline(ch, es, func(e logbook.Entry) int {
		p, _ := entries.ReadDecision(e.Payload)
		switch p.Outcome {
		case "run":
			return 0
		case "referred":
			return 1
		}
		return 2
	})
}

// queueChart: the human queue's flow over time, referrals in and
// approvals, denials and expiries out; the difference of the two is the
// change of the queue's depth in each interval.
func queueChart(es []logbook.Entry) *chart {
	ch := &chart{ID: "queueflow", Title: "The queue over time: referrals queued and settled", Empty: "No referrals yet.",
		Series: []series{{"referred", "s-referred"}, {"approved", "s-run"}, {"denied or expired", "s-rejected"}}}
	return timeline(ch, es, func(e logbook.Entry) int {
		switch e.Kind {
		case logbook.KindDecision:
			p, _ := entries.ReadDecision(e.Payload)
			if p.Outcome == "referred" {
				return 0
			}
		case logbook.KindApproval:
			return 1
		case logbook.KindDenial, logbook.KindExpiry:
			return 2
		}
		return -1
	})
}

// auditChart: the sampled audit over time, judgments sampled and reviews
// found right or wrong (the failure rate is wrong over reviewed).
func auditChart(es []logbook.Entry) *chart {
	ch := &chart{ID: "auditflow", Title: "The sampled audit over time: sampled, reviewed right, reviewed wrong", Empty: "No judgment sampled for audit yet.",
		Series: []series{{"sampled", "s-surveyed"}, {"reviewed right", "s-run"}, {"reviewed wrong", "s-rejected"}}}
	return timeline(ch, es, func(e logbook.Entry) int {
		switch e.Kind {
		case logbook.KindAuditSampled:
			return 0
		case logbook.KindAuditReview:
			var p struct {
				Verdict string `json:"verdict"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			if p.Verdict == "wrong" {
				return 2
			}
			return 1
		}
		return -1
	})
}

// fastPathChart: statements run without a human, per delegation.
func fastPathChart(es []logbook.Entry) *chart {
	ch := &chart{ID: "fastpath", Title: "Fast-path volume per delegation", Empty: "Nothing has run on the fast path yet.",
		Series: []series{{"compiled path", "s-run"}, {"surveyed path", "s-surveyed"}}}
	by := map[string][]float64{}
	for _, e := range es {
		p, _ := entries.ReadDecision(e.Payload)
		if p.Outcome != "run" || p.DelegationID == "" {
			continue
		}
		if by[p.DelegationID] == nil {
			by[p.DelegationID] = make([]float64, 2)
		}
		if p.Path == "surveyed" {
			by[p.DelegationID][1]++
		} else {
			by[p.DelegationID][0]++
		}
	}
	var ids []string
	for id := range by {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		label := id
		if len(label) > 10 {
			label = label[:10]
		}
		ch.Groups = append(ch.Groups, group{Label: label, Values: by[id], Text: id})
	}
	if len(ch.Groups) > 0 {
		ch.layout()
	}
	return ch
}

// panelChart: per framing, the share of jurors who dissented (did not
// answer conforms), and overall the share of judgments without unanimity.
func (c *Console) panelChart(es []logbook.Entry) *chart {
	ch := &chart{ID: "panel", Title: "Panel disagreement and dissent per framing (%)", Empty: "No Surveyor judgments yet.",
		Series: []series{{"percent", "s-referred"}}}
	if len(es) == 0 {
		return ch
	}
	type tally struct{ n, dissent float64 }
	by := map[string]*tally{}
	var disagreements float64
	for _, e := range es {
		var p struct {
			Jurors []juror `json:"jurors"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		verdicts := map[string]bool{}
		for _, j := range p.Jurors {
			t := by[j.Framing]
			if t == nil {
				t = &tally{}
				by[j.Framing] = t
			}
			t.n++
			v := j.Verdict
			if j.Outcome != "answered" {
				v = "failed"
			}
			if v != "CONFORMS" {
				t.dissent++
			}
			verdicts[v] = true
		}
		if len(verdicts) > 1 {
			disagreements++
		}
	}
	ch.Groups = append(ch.Groups, group{Label: "disagree", Values: []float64{100 * disagreements / float64(len(es))}, Text: "judgments without unanimity"})
	var names []string
	for f := range by {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		t := by[f]
		ch.Groups = append(ch.Groups, group{Label: f, Values: []float64{100 * t.dissent / t.n}, Text: "dissent of the " + f + " framing"})
	}
	ch.layout()
	return ch
}

// queueFigures are the depth of the queue and the age of its oldest
// referral, over the targets the session sees only: a human of one target
// learns nothing of another's queue from the dashboard.
func (c *Console) queueFigures(ctx context.Context, s *Session) (int, time.Duration, error) {
	if c.cfg.Gateway == nil {
		return c.cfg.QueueStats(ctx)
	}
	if s == nil || len(s.Targets) == 0 {
		return 0, 0, nil // Queue(nil) would be every target's
	}
	q, err := c.cfg.Gateway.Queue(ctx, s.Targets)
	if err != nil {
		return 0, 0, err
	}
	var oldest time.Duration
	now := time.Now()
	for _, v := range q {
		oldest = max(oldest, now.Sub(v.Created))
	}
	return len(q), oldest, nil
}
