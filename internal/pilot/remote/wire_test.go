package remote

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestWireResultIsExact: a result's JSON after the trip is its JSON
// before, for every kind of value the Pilot puts in one, and nil and
// empty slices stay apart.
func TestWireResultIsExact(t *testing.T) {
	t.Parallel()
	ts := time.Date(2024, 2, 29, 12, 34, 56, 789000000, time.FixedZone("x", 3600))
	for i, r := range []*pilot.Result{
		{Outcome: pilot.Executed},
		{Outcome: pilot.Executed, Rows: [][]any{}, Columns: []pilot.Column{}, Reasons: []string{}, ExecutedArgs: []any{}},
		{Outcome: pilot.Refused, Code: pilot.RefusedFence, Reasons: []string{pilot.MessageFence}, Detail: `a "quoted" <b>detail</b> & more`},
		{Outcome: pilot.Executed, RowsAffected: 3, Columns: []pilot.Column{{Name: "a", Type: 20}, {Name: "b", Type: 25}}, Truncated: true, TxID: "12345", MarqueID: "mrq_x",
			ExecutedSQL: "SELECT $1", ExecutedArgs: []any{int64(9007199254740993), "s", nil, true, 0.1, json.RawMessage(`12.50`)},
			Rows: [][]any{
				{int64(-9223372036854775808), nil},
				{json.RawMessage(`123456789012345678901234567890.000000001`), "\u00e9<&>\u2028"},
				{ts, []byte{0, 1, 2, 0xff}},
				{map[string]any{"k": []any{1.5, "x", nil, map[string]any{}}}, []any{}},
				{float32(0.1), int16(-3)},
			}},
		// Columns that share a name, in an order that is not alphabetical:
		// each keeps its place, its name and its type (issue 23).
		{Outcome: pilot.Executed, RowsAffected: 2, Columns: []pilot.Column{{Name: "x", Type: 23}, {Name: "b", Type: 25}, {Name: "x", Type: 20}},
			Rows: [][]any{{int32(1), "one", int64(2)}, {nil, "", int64(-1)}}},
		{Outcome: pilot.Rehearsed, Rehearsal: &pilot.Rehearsal{Kind: "update", RowsReached: 1, Before: []map[string]any{{"id": 1.0, "name": "x"}},
			After: []map[string]any{}, ImagesTruncated: true, ExecutedSQL: "UPDATE t SET a = 1", BeforeDigest: "abc"}},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		wire, err := json.Marshal(reply{Result: encodeResult(r)})
		if err != nil {
			t.Fatal(err)
		}
		var got received
		if err := json.Unmarshal(wire, &got); err != nil {
			t.Fatal(err)
		}
		res, err := got.Result.result()
		if err != nil {
			t.Fatal(err)
		}
		back, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if string(back) != string(want) {
			t.Errorf("%d:\nafter  %s\nbefore %s", i, back, want)
		}
		if !reflect.DeepEqual(res.Columns, r.Columns) {
			t.Errorf("%d: columns %v, want %v", i, res.Columns, r.Columns)
		}
		if (res.Rows == nil) != (r.Rows == nil) || (res.Reasons == nil) != (r.Reasons == nil) || (res.ExecutedArgs == nil) != (r.ExecutedArgs == nil) {
			t.Errorf("%d: nil and empty slices were not kept apart", i)
		}
		for j, row := range r.Rows {
			for k, v := range row {
				if v == nil && res.Rows[j][k] != nil {
					t.Errorf("%d: a NULL came back as %#v", i, res.Rows[j][k])
				}
			}
		}
	}
}

// TestWireResultShapeChecked: a result whose rows do not hold one value
// per column, or in the shape of before issue 23 (rows as objects, column
// names beside their types), is no result: the client reads an error,
// never rows in the wrong places.
func TestWireResultShapeChecked(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"result": {"outcome": "executed", "columns": [{"name": "a", "type": 23}], "rows": [[1, 2]]}}`,
		`{"result": {"outcome": "executed", "columns": [{"name": "a", "type": 23}, {"name": "b", "type": 23}], "rows": [[1]]}}`,
		`{"result": {"outcome": "executed", "columns": ["a", "b"], "column_types": [23, 23], "rows": [{"a": 1, "b": 2}]}}`,
		`{"result": {"outcome": "executed", "columns": [{"name": "a", "type": 23}], "rows": [{"a": 1}]}}`,
	} {
		var got received
		if err := json.Unmarshal([]byte(body), &got); err == nil {
			if res, err := got.Result.result(); err == nil {
				t.Errorf("%s: read as %+v", body, res)
			}
		}
	}
}

// misbehaving is a server with the Pilot's certificates whose catalog is
// genuine and whose answers to everything else are broken as answer says.
func misbehaving(t *testing.T, files CertFiles, answer func(w http.ResponseWriter, r *http.Request)) (string, *atomic.Int32) {
	t.Helper()
	stls, err := ServerTLS(files.PilotCert, files.PilotKey, files.CA)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := sqlcheck.NewCatalog([]sqlcheck.Table{{Name: sqlcheck.TableName{Schema: "public", Name: "t"}, Columns: []sqlcheck.Column{{Name: "id", Type: "bigint"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := &atomic.Int32{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/targets/shop/catalog", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(reply{Catalog: encodeCatalog(cat)})
	})
	mux.HandleFunc("POST /v1/targets/shop/", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		answer(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, TLSConfig: stls, TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	go func() { _ = srv.Serve(tls.NewListener(ln, stls)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), calls
}

// TestUnknownOutcomeWhenNoAnswer: once a request to Execute or
// ExecuteApproved may have reached the Pilot, anything but a well-formed
// answer wraps pilot.ErrCommitUnknown: never a plain error, never a
// refusal. Only a failure before any connection is a plain error.
func TestUnknownOutcomeWhenNoAnswer(t *testing.T) {
	t.Parallel()
	files, err := WriteCerts(t.TempDir(), []string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	cases := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
	}{
		{"HTTP 500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) }},
		{"HTTP 502", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) }},
		{"HTTP 400", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad", http.StatusBadRequest) }},
		{"garbage", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>not json</html>")) }},
		{"a truncated answer", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"result":{"outcome":"executed","rows_aff`))
		}},
		{"an empty envelope", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{}`)) }},
		{"a rehearsal where an execution was asked", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"result":{"outcome":"rehearsed"}}`))
		}},
		{"an unknown error kind", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"error":{"kind":"mystery","message":"?"}}`))
		}},
		{"an unknown field", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"result":{"outcome":"refused"},"extra":1}`))
		}},
		{"two values", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"result":{"outcome":"refused"}} {}`))
		}},
		{"the connection closed before an answer", func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}},
		{"a reset mid-answer", func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{\"result\":")
			_ = buf.Flush()
			if tc, ok := conn.(*tls.Conn).NetConn().(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			conn.Close()
		}},
		{"no answer within the timeout", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr, calls := misbehaving(t, files, tc.answer)
			c := connectTo(t, files, addr, 2*time.Second)
			_, err := c.Execute(t.Context(), pilot.Request{Marque: "m", SQL: "UPDATE t SET id = 1", Bound: []byte("{}")})
			if !errors.Is(err, pilot.ErrCommitUnknown) {
				t.Errorf("Execute: %v; want ErrCommitUnknown", err)
			}
			_, err = c.ExecuteApproved(t.Context(), pilot.ApprovedRequest{Marque: "m", SQL: "UPDATE t SET id = 1", Approval: []byte("{}")})
			if !errors.Is(err, pilot.ErrCommitUnknown) {
				t.Errorf("ExecuteApproved: %v; want ErrCommitUnknown", err)
			}
			if n := calls.Load(); n != 2 {
				t.Errorf("the server saw %d calls, want 2: a statement is sent once", n)
			}
			// The other calls are plain errors: nothing they do commits a
			// statement.
			if _, _, err := c.Receipt(t.Context(), "m"); err == nil || errors.Is(err, pilot.ErrCommitUnknown) {
				t.Errorf("Receipt: %v; want a plain error", err)
			}
		})
	}

	t.Run("an error the Pilot reported is its own", func(t *testing.T) {
		t.Parallel()
		for kind, want := range map[string]error{kindCommitUnknown: pilot.ErrCommitUnknown, kindNotPreviewable: pilot.ErrNotPreviewable, kindError: nil} {
			addr, _ := misbehaving(t, files, func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(`{"error":{"kind":"` + kind + `","message":"pilot: begin: it failed"}}`))
			})
			c := connectTo(t, files, addr, 2*time.Second)
			_, err := c.Execute(t.Context(), pilot.Request{Marque: "m"})
			var perr *Error
			if !errors.As(err, &perr) || perr.Kind != kind || !strings.Contains(err.Error(), "pilot: begin: it failed") {
				t.Errorf("%s: %v", kind, err)
			}
			if want != nil && !errors.Is(err, want) || want == nil && (errors.Is(err, pilot.ErrCommitUnknown) || errors.Is(err, pilot.ErrNotPreviewable)) {
				t.Errorf("%s: %v; want it to match %v", kind, err, want)
			}
		}
	})

	t.Run("nothing sent is a plain error", func(t *testing.T) {
		t.Parallel()
		addr, calls := misbehaving(t, files, func(w http.ResponseWriter, r *http.Request) {})
		c := connectTo(t, files, addr, 2*time.Second)
		// Point the client at a port nobody listens on: the dial fails
		// before anything is written.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := ln.Addr().String()
		ln.Close()
		c.base = strings.Replace(c.base, addr, dead, 1)
		_, err = c.Execute(t.Context(), pilot.Request{Marque: "m"})
		if err == nil || errors.Is(err, pilot.ErrCommitUnknown) {
			t.Errorf("Execute with nothing listening: %v; want a plain error", err)
		}
		if calls.Load() != 0 {
			t.Errorf("the server saw a call")
		}
	})
}

func connectTo(t *testing.T, files CertFiles, addr string, timeout time.Duration) *Client {
	t.Helper()
	ctls, err := ClientTLS(files.CA, files.ClientCert, files.ClientKey, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Connect(context.Background(), ClientConfig{Target: "shop", URL: "https://" + addr, TLS: ctls, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
