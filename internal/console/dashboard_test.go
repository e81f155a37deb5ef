package console

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/logbook"
)

func entry(t0 time.Time, sec int, kind logbook.Kind, payload map[string]any) logbook.Entry {
	b, _ := json.Marshal(payload)
	return logbook.Entry{Time: t0.Add(time.Duration(sec) * time.Second), Kind: kind, Payload: b}
}

// sums adds each series over the chart's intervals.
func sums(ch *chart) []float64 {
	out := make([]float64, len(ch.Series))
	for _, g := range ch.Groups {
		for i, v := range g.Values {
			out[i] += v
		}
	}
	return out
}

// TestTimelines: the queue and audit charts count what the logbook says
// happened, in the interval it happened, and draw nothing without events.
func TestTimelines(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	es := []logbook.Entry{
		entry(t0, 0, logbook.KindDecision, map[string]any{"outcome": "referred"}),
		entry(t0, 1, logbook.KindDecision, map[string]any{"outcome": "run"}),
		entry(t0, 2, logbook.KindDecision, map[string]any{"outcome": "referred"}),
		entry(t0, 60, logbook.KindApproval, nil),
		entry(t0, 90, logbook.KindDenial, nil),
		entry(t0, 100, logbook.KindExpiry, nil),
		entry(t0, 110, logbook.KindDecision, map[string]any{"outcome": "referred"}),
		entry(t0, 119, logbook.KindAuditSampled, nil),
		entry(t0, 120, logbook.KindAuditReview, map[string]any{"verdict": "wrong"}),
	}
	q := queueChart(es)
	if got, want := sums(q), []float64{3, 1, 2}; !equal(got, want) {
		t.Errorf("queue flow = %v, want %v (referred, approved, denied or expired)", got, want)
	}
	if len(q.Groups) != 12 || q.Groups[0].Values[0] != 2 || q.Groups[11].Values[0] != 1 {
		t.Errorf("the referrals are not in the intervals they happened in: %+v", q.Groups)
	}
	a := auditChart(es)
	if got, want := sums(a), []float64{1, 0, 1}; !equal(got, want) {
		t.Errorf("audit flow = %v, want %v (sampled, right, wrong)", got, want)
	}
	if len(a.Groups[len(a.Groups)-1].Bars) == 0 {
		t.Errorf("the wrong review draws no bar")
	}
	var decisions []logbook.Entry
	for _, e := range es {
		if e.Kind == logbook.KindDecision {
			decisions = append(decisions, e)
		}
	}
	o := outcomesChart(decisions)
	if got, want := sums(o), []float64{1, 3, 0}; !equal(got, want) {
		t.Errorf("outcomes = %v, want %v", got, want)
	}
	none := auditChart(es[:3])
	if none.Groups != nil {
		t.Errorf("a chart without its events draws groups: %+v", none.Groups)
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
