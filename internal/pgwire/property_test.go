package pgwire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
)

// template is a statement with one constant, written %s: over HTTP the
// constant is a literal in the text; over the wire it is a literal too
// (the simple protocol) or a bound parameter (the extended protocol).
type template struct {
	sql  string
	vals func(r *rand.Rand) any
}

func ints(lo, hi int) func(r *rand.Rand) any {
	return func(r *rand.Rand) any { return int64(lo + r.IntN(hi-lo+1)) }
}

func strs(s ...string) func(r *rand.Rand) any {
	return func(r *rand.Rand) any { return s[r.IntN(len(s))] }
}

var templates = []template{
	{"SELECT id, status FROM orders WHERE id = %s", ints(1, 60)},
	// Not updated_at: the UPDATEs below set it to now(), which differs by
	// the milliseconds between the two systems' runs.
	{"SELECT id, status, created_at FROM orders WHERE customer_id = %s ORDER BY id", ints(1, 60)},
	{"SELECT id, total_cents FROM orders WHERE id = %s", ints(1, 60)},
	{"SELECT id, status FROM orders WHERE status = %s ORDER BY id LIMIT 3", strs("pending", "failed", "retrying", "shipped")},
	{"SELECT count(*) FROM orders WHERE status = %s", strs("pending", "retrying")},
	{"UPDATE orders SET status = %s, updated_at = now() WHERE id = 7", strs("failed", "retrying", "shipped")},
	{"UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = %s", ints(1, 50)},
	{"UPDATE orders SET status = 'failed' WHERE customer_id = %s", ints(1, 60)},
	{"DELETE FROM orders WHERE id = %s", ints(1, 60)},
	{"SELECT id, name, region FROM customers WHERE id = %s", ints(1, 60)},
	{"SELECT id, email FROM customers WHERE id = %s", ints(1, 60)},
	{"SELECT code FROM secrets WHERE id = %s", ints(1, 5)},
	{"SELECT id FROM no_such_table WHERE id = %s", ints(1, 5)},
	{"UPDATE customers SET name = %s WHERE id = 3", strs("John Smith", "Jon Smith")},
	{"SELECT id, i4, txt, at, ints, doc FROM kinds WHERE id = %s", ints(1, 2)},
}

func literal(v any) string {
	if s, ok := v.(string); ok {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return fmt.Sprint(v)
}

// observation is what an agent sees of one statement: over HTTP, the
// JSON answer; over the wire, the rows or the referral error.
type observation struct {
	Outcome string
	Reasons string
	Rows    []map[string]any
	Tag     string
}

// normalize makes JSON values comparable across the two: times as
// instants, numbers as numbers.
func normalize(v any) any {
	switch x := v.(type) {
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t.UTC().Format(time.RFC3339Nano)
		}
		return x
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}

func jsonRound(v any) any {
	b, _ := json.Marshal(v)
	var out any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	_ = d.Decode(&out)
	return normalize(out)
}

// sameTimes copies the times the shop data was loaded with (relative to
// now()) from one target to the other, so the two are identical.
func sameTimes(t *testing.T, from, to string) {
	t.Helper()
	ctx := t.Context()
	src, err := pgx.Connect(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(ctx)
	dst, err := pgx.Connect(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close(ctx)
	for _, q := range []struct{ read, write string }{
		{"SELECT id, created_at, updated_at FROM orders", "UPDATE orders SET created_at = $2, updated_at = $3 WHERE id = $1"},
		{"SELECT id, updated_at, updated_at FROM customers", "UPDATE customers SET updated_at = $2 WHERE id = $1 AND $3::timestamptz IS NOT NULL"},
	} {
		rows, err := src.Query(ctx, q.read)
		if err != nil {
			t.Fatal(err)
		}
		b := &pgx.Batch{}
		for rows.Next() {
			var id int64
			var a, u time.Time
			if err := rows.Scan(&id, &a, &u); err != nil {
				t.Fatal(err)
			}
			b.Queue(q.write, id, a, u)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if err := dst.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWireMatchesHTTP sends the same random statements to two identical
// systems, one over HTTP and one over the wire: each gets the same
// decision, the same reasons and the same rows.
func TestWireMatchesHTTP(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 14))
	viaHTTP, viaWire := newFixture(t), newFixture(t)
	sameTimes(t, viaHTTP.dsn, viaWire.dsn)
	srv := httptest.NewServer(viaHTTP.sys.API.Handler())
	defer srv.Close()
	c := viaWire.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	ctx := t.Context()

	post := func(sql string) observation {
		body, _ := json.Marshal(map[string]string{"target": gatewaytest.Target, "sql": sql})
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/statements", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+gatewaytest.AgentToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Outcome      string           `json:"outcome"`
			Reasons      []string         `json:"reasons"`
			Rows         []map[string]any `json:"rows"`
			RowsAffected int64            `json:"rows_affected"`
		}
		d := json.NewDecoder(resp.Body)
		d.UseNumber()
		if err := d.Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("HTTP %d: %v", resp.StatusCode, err)
		}
		o := observation{Outcome: out.Outcome, Reasons: strings.Join(out.Reasons, "; ")}
		if o.Outcome == "executed" {
			o.Rows = []map[string]any{}
			for _, row := range out.Rows {
				o.Rows = append(o.Rows, normalize(row).(map[string]any))
			}
			o.Tag = fmt.Sprint(out.RowsAffected)
		}
		return o
	}
	wire := func(sql string, args []any, mode pgx.QueryExecMode) observation {
		rows, err := c.Query(ctx, sql, append([]any{mode}, args...)...)
		if err == nil {
			o := observation{Outcome: "executed", Rows: []map[string]any{}}
			for rows.Next() {
				vals, _ := rows.Values()
				m := map[string]any{}
				for i, fd := range rows.FieldDescriptions() {
					m[fd.Name] = jsonRound(vals[i])
				}
				o.Rows = append(o.Rows, m)
			}
			rows.Close()
			if err = rows.Err(); err == nil {
				o.Tag = fmt.Sprint(rows.CommandTag().RowsAffected())
				return o
			}
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == pgwire.StateNotDescribed {
			// A Describe of the prepared statement (pgx's cached mode)
			// is refused for a read no delegation covers.
			return observation{Outcome: "undescribed"}
		}
		if !errors.As(err, &pe) || pe.Code != "HM001" {
			t.Fatalf("%s: %v", sql, err)
		}
		return observation{Outcome: "referred", Reasons: strings.TrimPrefix(pe.Detail, "request "+pe.Where+": ")}
	}
	modes := []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec}
	counts := map[string]int{}
	for i := 0; i < 40; i++ {
		tp := templates[r.IntN(len(templates))]
		v := tp.vals(r)
		text := fmt.Sprintf(tp.sql, literal(v))
		mode := modes[r.IntN(len(modes))]
		var got observation
		if mode == pgx.QueryExecModeSimpleProtocol {
			got = wire(text, nil, mode)
		} else {
			got = wire(fmt.Sprintf(tp.sql, "$1"), []any{v}, mode)
		}
		want := post(text)
		if got.Outcome == "undescribed" {
			if mode != pgx.QueryExecModeCacheStatement || want.Outcome != "referred" || !strings.HasPrefix(text, "SELECT") {
				t.Fatalf("statement %d, %s (wire mode %v): not described; HTTP %+v", i, text, mode, want)
			}
			counts["undescribed"]++
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("statement %d, %s (wire mode %v):\n wire %+v\n HTTP %+v", i, text, mode, got, want)
		}
		counts[want.Outcome]++
	}
	t.Logf("outcomes: %v", counts)
	if counts["executed"] == 0 || counts["referred"] == 0 {
		t.Fatalf("outcomes %v: the run did not see both", counts)
	}
}
