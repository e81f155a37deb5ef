package surveyor_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
)

// timed is a provider client that keeps the full-precision latency of its
// last call (the juror record has milliseconds only).
type timed struct {
	llm.Juror
	mu   sync.Mutex
	last time.Duration
}

func (t *timed) Judge(ctx context.Context, c llm.Call) llm.Answer {
	a := t.Juror.Judge(ctx, c)
	t.mu.Lock()
	t.last = a.Latency
	t.mu.Unlock()
	return a
}

func (t *timed) latency() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// BenchmarkPanelOverhead measures what the panel adds beyond its slowest
// juror: three jurors on scripted servers (OpenAI, Anthropic, OpenAI) that
// answer CONFORMS after 50, 50 and 60 ms. Two overheads are reported, as
// p50 and p99 over the iterations:
//
//   - overhead-*-ms: the judgment's wall time minus the slowest juror's own
//     call latency, as its client measured it (prompt building, fan-out,
//     strict parsing, aggregation);
//   - beyond60-*-ms: the wall time minus the slowest juror's scripted 60 ms
//     (the above plus the SDKs, HTTP and the servers' scheduling).
//
// Run: go test -run x -bench PanelOverhead -benchtime 100x ./internal/surveyor/
func BenchmarkPanelOverhead(b *testing.B) {
	latencies := []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 60 * time.Millisecond}
	var jurors []llm.Juror
	var clients []*timed
	for i, d := range latencies {
		p := newProvider(b, kindOf(i), fmt.Sprintf("bench-%d", i), llmtest.WithLatency(llmtest.AlwaysConforms(), d), 0)
		c := &timed{Juror: p.juror}
		clients = append(clients, c)
		jurors = append(jurors, c)
	}
	panel, err := surveyor.NewPanel(surveyor.Config{Jurors: 3}, jurors, nil)
	if err != nil {
		b.Fatal(err)
	}
	in := input(typoFix)
	ctx := context.Background()
	// Warm the connections, as a running node would have them.
	if j := panel.Judge(ctx, in); j.Outcome != surveyor.OutcomeConforms || j.Correlated {
		b.Fatalf("warm-up judgment: %s correlated=%v %v", j.Outcome, j.Correlated, j.Reasons)
	}
	overhead := make([]float64, 0, b.N)
	beyond := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		j := panel.Judge(ctx, in)
		wall := time.Since(start)
		if j.Outcome != surveyor.OutcomeConforms {
			b.Fatalf("judgment %d: %s %v", i, j.Outcome, j.Reasons)
		}
		var slowest time.Duration
		for _, c := range clients {
			slowest = max(slowest, c.latency())
		}
		overhead = append(overhead, ms(wall-slowest))
		beyond = append(beyond, ms(wall-latencies[2]))
	}
	b.StopTimer()
	b.ReportMetric(percentile(overhead, 0.50), "overhead-p50-ms")
	b.ReportMetric(percentile(overhead, 0.99), "overhead-p99-ms")
	b.ReportMetric(percentile(beyond, 0.50), "beyond60-p50-ms")
	b.ReportMetric(percentile(beyond, 0.99), "beyond60-p99-ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile is the nearest-rank percentile of xs.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
