package sqlcheck_test

import (
	"fmt"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// BenchmarkRememberedShape compares what a statement with new literals
// costs the gateway when its shape was seen before (a normalize, a read of
// its constants, the canonical text rebuilt from the template) with a
// fresh parse, walk and deparse, side by side; each iteration a new text.
//
//	go test -run '^$' -bench RememberedShape -benchtime 2s ./internal/sqlcheck/
func BenchmarkRememberedShape(b *testing.B) {
	cat := loadCorpus(b).Checker.Catalog
	form := "UPDATE orders SET updated_at = now() WHERE id = %d AND total_cents <> %d"
	first := fmt.Sprintf(form, 17, 1000)
	s, _ := sqlcheck.ShapeOf(first, sqlcheck.Limits{})
	tpl, err := sqlcheck.NewTemplate(sqlcheck.Analyze(first, cat, sqlcheck.Limits{}), s)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("remembered", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s, ok := sqlcheck.ShapeOf(fmt.Sprintf(form, i%40, 1_000_000+i), sqlcheck.Limits{})
			if !ok {
				b.Fatal("no shape")
			}
			_ = tpl.Canonical(s)
		}
	})
	b.Run("fresh", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sqlcheck.Analyze(fmt.Sprintf(form, i%40, 1_000_000+i), cat, sqlcheck.Limits{})
		}
	})
}
