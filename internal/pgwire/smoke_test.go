package pgwire_test

import (
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

func TestSmoke(t *testing.T) {
	f := newFixture(t)
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	rows, err := c.Query(t.Context(), "SELECT id, status FROM orders WHERE id = $1", 3)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		v, _ := rows.Values()
		t.Logf("%v", v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Log(rows.CommandTag())
}
