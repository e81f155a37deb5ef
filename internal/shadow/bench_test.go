package shadow_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/shadow"
)

// BenchmarkStart measures a shadow server's start on a Manager whose
// template exists (every start but its first): the template's copy,
// postgres, the database and its tables, to the first answer.
func BenchmarkStart(b *testing.B) {
	m, err := shadow.New(shadow.Config{StartTimeout: 3 * time.Minute, MaxServers: b.N + 1})
	if err != nil {
		b.Skip(err)
	}
	defer m.Close()
	spec := benchSpec()
	const sql = "SELECT 1 FROM pg_catalog.pg_class LIMIT 1"
	if _, err := m.Query(b.Context(), spec, sql); err != nil { // the template
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		s := *spec
		s.Role = fmt.Sprintf("agent:bench%d", i) // another Spec: another server
		if _, err := m.Query(b.Context(), &s, sql); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if got := m.Servers(); got != b.N+1 {
		b.Fatalf("%d servers, want %d", got, b.N+1)
	}
}

// BenchmarkStartCold measures a Manager's first start: initdb and the
// template, then as BenchmarkStart.
func BenchmarkStartCold(b *testing.B) {
	spec := benchSpec()
	for b.Loop() {
		m, err := shadow.New(shadow.Config{StartTimeout: 3 * time.Minute})
		if err != nil {
			b.Skip(err)
		}
		if _, err := m.Query(b.Context(), spec, "SELECT 1 FROM pg_catalog.pg_class LIMIT 1"); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		m.Close()
		b.StartTimer()
	}
}

// BenchmarkQuery measures one catalog query (psql's \dt) on a running
// shadow server.
func BenchmarkQuery(b *testing.B) {
	spec := benchSpec()
	m, err := shadow.New(shadow.Config{StartTimeout: 3 * time.Minute})
	if err != nil {
		b.Skip(err)
	}
	defer m.Close()
	const dt = `SELECT n.nspname, c.relname, pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r','p','') AND n.nspname <> 'pg_catalog' AND n.nspname !~ '^pg_toast' AND n.nspname <> 'information_schema' AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1,2`
	if _, err := m.Query(b.Context(), spec, dt); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := m.Query(b.Context(), spec, dt); err != nil {
			b.Fatal(err)
		}
	}
}

func benchSpec() *shadow.Spec {
	return &shadow.Spec{Target: "shop", Role: "agent:bench", SearchPath: []string{"public"}, Tables: []shadow.Table{
		{Schema: "public", Name: "customers", Columns: []shadow.Column{{Name: "id", Type: "bigint", NotNull: true, Select: true}, {Name: "name", Type: "text", Select: true, Update: true}},
			Keys: []shadow.Key{{Kind: shadow.KindPrimaryKey, Name: "customers_pkey", Columns: []string{"id"}}}},
		{Schema: "public", Name: "orders", Columns: []shadow.Column{{Name: "id", Type: "bigint", NotNull: true, Select: true},
			{Name: "status", Type: "text", NotNull: true, Select: true, Update: true}, {Name: "created_at", Type: "timestamp with time zone", Select: true}},
			Keys: []shadow.Key{{Kind: shadow.KindPrimaryKey, Name: "orders_pkey", Columns: []string{"id"}}}},
	}}
}
