package pgwire

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/shadow"
)

// recorder stands in for the statement path in the fuzz target: it
// records every text the front would have sent and refers it.
type recorder struct {
	mu    sync.Mutex
	texts []string
}

func (r *recorder) Submit(_ context.Context, _, _, sql string) (*gateway.Response, error) {
	r.mu.Lock()
	r.texts = append(r.texts, sql)
	r.mu.Unlock()
	return &gateway.Response{Outcome: gateway.OutcomeReferred, RequestID: "req_fuzz", Reasons: []string{"fuzz"}}, nil
}

// Describe describes nothing: a statement Describe is answered with an
// error, and its text (which holds placeholders) is not one the fuzz
// target checks.
func (r *recorder) Describe(context.Context, string, string, string) (*gateway.Description, error) {
	return nil, &gateway.NotDescribedError{Code: gateway.NotDescribedReferred, Reasons: []string{"fuzz"}}
}

func (r *recorder) WaitRequest(context.Context, string, string, time.Duration) (*gateway.RequestView, error) {
	return nil, gateway.ErrNotFound
}

func (r *recorder) SearchPath(string) []string { return []string{"public"} }

func (r *recorder) Scope(string, string, time.Time) *shadow.Spec { return nil }

func (r *recorder) BeginTx(string, string, pilot.TxOptions) (txPath, error) {
	return recorderTx{r}, nil
}

// recorderTx is a transaction on the recorder: its statements are
// recorded and referred; its savepoints and ends do nothing.
type recorderTx struct{ r *recorder }

func (t recorderTx) Submit(ctx context.Context, sql string) (*gateway.Response, error) {
	return t.r.Submit(ctx, "", "", sql)
}
func (recorderTx) SetIsolation(string) bool                 { return true }
func (recorderTx) Savepoint(context.Context, string) error  { return nil }
func (recorderTx) Release(context.Context, string) error    { return nil }
func (recorderTx) RollbackTo(context.Context, string) error { return nil }
func (recorderTx) Commit(context.Context) error             { return nil }
func (recorderTx) Rollback(context.Context) error           { return nil }

func encode(msgs ...pgproto3.FrontendMessage) []byte {
	var b []byte
	for _, m := range msgs {
		b, _ = m.Encode(b)
	}
	return b
}

// FuzzSession feeds arbitrary bytes to an authenticated session as its
// message stream. The session must never panic, and every text it hands
// the statement path must be one the client sent or, for a bound
// statement, a deparsed text with no parameter left in it.
func FuzzSession(f *testing.F) {
	f.Add(encode(&pgproto3.Query{String: "SELECT id FROM orders WHERE id = 1"}))
	f.Add(encode(&pgproto3.Query{String: "SET application_name = 'x'; SHOW timezone"}))
	f.Add(encode(&pgproto3.Parse{Query: "UPDATE orders SET status = $1 WHERE id = $2::int8", ParameterOIDs: []uint32{25}},
		&pgproto3.Bind{Parameters: [][]byte{[]byte("it's"), []byte("3")}}, &pgproto3.Describe{ObjectType: 'P'},
		&pgproto3.Execute{}, &pgproto3.Sync{}))
	f.Add(encode(&pgproto3.Parse{Name: "s", Query: "SELECT $1::int4[], $2::jsonb"}, &pgproto3.Describe{ObjectType: 'S', Name: "s"},
		&pgproto3.Bind{PreparedStatement: "s", ParameterFormatCodes: []int16{1, 0}, Parameters: [][]byte{{0, 0, 0, 1}, []byte(`{"a":1}`)}},
		&pgproto3.Execute{MaxRows: 1}, &pgproto3.Close{ObjectType: 'S', Name: "s"}, &pgproto3.Sync{}))
	f.Add(encode(&pgproto3.Query{String: "SELECT harbormaster_wait('req_x', 0.01)"}, &pgproto3.Query{String: "BEGIN"},
		&pgproto3.Query{String: "COPY orders FROM STDIN"}, &pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.Query{String: "SELECT * FROM pg_class"}))
	// Session queries and resets answered at the front.
	f.Add(encode(&pgproto3.Query{String: "SELECT pg_advisory_unlock_all();\nCLOSE ALL;\nUNLISTEN *;\nRESET ALL;"},
		&pgproto3.Query{String: "SELECT version(), current_schemas(true), 1.5e-3, '7'::int2, NULL::text::int8; SHOW search_path; SET statement_timeout = '1s'"},
		&pgproto3.Query{String: "SET TIME ZONE INTERVAL '+00:00' HOUR TO MINUTE; DISCARD ALL"},
		&pgproto3.Query{String: "DO $$ BEGIN PERFORM * FROM pg_listening_channels() LIMIT 1; IF FOUND THEN UNLISTEN *; END IF; END; $$"}))
	f.Add(encode(&pgproto3.Parse{Name: "v", Query: "SELECT * FROM current_schema() AS s"}, &pgproto3.Describe{ObjectType: 'S', Name: "v"},
		&pgproto3.Bind{PreparedStatement: "v", ResultFormatCodes: []int16{1}}, &pgproto3.Execute{}, &pgproto3.Parse{Query: "SELECT $1::int4, current_user"},
		&pgproto3.Bind{Parameters: [][]byte{[]byte("12")}}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{}))
	// Transactions: a referral fails one; ROLLBACK TO repairs it; COMMIT of
	// a failed one rolls back; SET LOCAL and SET TRANSACTION.
	f.Add(encode(&pgproto3.Query{String: "BEGIN ISOLATION LEVEL REPEATABLE READ"}, &pgproto3.Query{String: "SET LOCAL statement_timeout = '1s'"},
		&pgproto3.Query{String: "SAVEPOINT a"}, &pgproto3.Query{String: "UPDATE orders SET status = 'x' WHERE id = 1"},
		&pgproto3.Query{String: "SELECT 1"}, &pgproto3.Query{String: "ROLLBACK TO SAVEPOINT a"}, &pgproto3.Query{String: "RELEASE a"},
		&pgproto3.Query{String: "COMMIT"}, &pgproto3.Query{String: "START TRANSACTION READ ONLY; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"},
		&pgproto3.Parse{Query: "DELETE FROM orders WHERE id = $1"}, &pgproto3.Bind{Parameters: [][]byte{[]byte("1")}}, &pgproto3.Execute{},
		&pgproto3.Sync{}, &pgproto3.Query{String: "END"}, &pgproto3.Query{String: "ROLLBACK"}))
	f.Add([]byte{'Q', 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, stream []byte) {
		rec := &recorder{}
		srv, err := newServer(rec, []string{"shop"}, Config{MaxMessage: 1 << 16, DefaultWait: time.Millisecond,
			Timeouts: map[string]Timeouts{"shop": {Statement: 5 * time.Second, Lock: 2 * time.Second}}})
		if err != nil {
			t.Fatal(err)
		}
		be := pgproto3.NewBackend(bytes.NewReader(stream), io.Discard)
		sess := srv.newSession(nil, be, "agent:fuzz", "shop", map[string]string{})
		sess.types = pgtype.NewMap()
		be.SetMaxBodyLen(srv.cfg.MaxMessage)
		sess.run(context.Background())
		for _, text := range rec.texts {
			if !strings.Contains(string(stream), text) {
				tree, err := pg.Parse(text)
				if err != nil {
					t.Fatalf("the front sent a text it made that does not parse: %q: %v", text, err)
				}
				if params(tree).count > 0 {
					t.Fatalf("the front sent a bound statement with a parameter left: %q", text)
				}
			}
		}
	})
}
