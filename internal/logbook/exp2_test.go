package logbook

import (
	"context"
	"fmt"
	"testing"
)

func BenchmarkExpWriter500(b *testing.B) {
	f := newFixture(b, Config{})
	f.stop()
	ctx := context.Background()
	w, err := f.lb.newWriter(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer w.close()
	var reqs []*request
	for i := range 500 {
		p, _ := prepare(Record{Kind: "decision", Subjects: map[string]string{"request": fmt.Sprint("r-", i), "delegation": "d-abcdef", "principal": "agent:ops-bot"},
			Payload: map[string]any{"outcome": "conforms", "rule": 2, "tier": "A", "canonical_sql": "UPDATE public.orders SET status = 'failed' WHERE id = 42"}}, 1<<20)
		reqs = append(reqs, &request{rec: p})
	}
	b.ResetTimer()
	for range b.N {
		if _, err := w.write(ctx, reqs, cpDue); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*500)/b.Elapsed().Seconds(), "entries/s")
}

func BenchmarkExpPrepare(b *testing.B) {
	for range b.N {
		prepare(Record{Kind: "decision", Subjects: map[string]string{"request": "r-1", "delegation": "d-abcdef", "principal": "agent:ops-bot"},
			Payload: map[string]any{"outcome": "conforms", "rule": 2, "tier": "A", "canonical_sql": "UPDATE public.orders SET status = 'failed' WHERE id = 42"}}, 1<<20)
	}
}
