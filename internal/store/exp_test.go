package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

func TestExpCommitLatency(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "e.db"), WithMigrations([]Migration{{1, "t", "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, rows := range []int{1, 100} {
		n := 300
		start := time.Now()
		for range n {
			s.Tx(ctx, func(tx *sql.Tx) error {
				for range rows {
					tx.ExecContext(ctx, "INSERT INTO t (v) VALUES ('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')")
				}
				return nil
			})
		}
		t.Logf("rows/tx %d: %v per tx", rows, time.Since(start)/time.Duration(n))
	}
}
