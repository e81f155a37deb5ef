package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	pg "github.com/pganalyze/pg_query_go/v6"
	"golang.org/x/mod/sumdb/note"

	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Check is what the invariants are checked over after a fault: the control
// store (requests and logbook) and the target's receipts. Every field but
// Verifier and Answered is required.
type Check struct {
	// Store is the control store, open (read-only use).
	Store *store.Store
	// Origin is the logbook's origin: the control plane's name + "/logbook".
	Origin string
	// Verifier verifies the logbook's checkpoints. Nil checks the chain
	// only (a test whose writer still runs may sign later).
	Verifier note.Verifier
	// CheckpointEvery is the logbook's; 0 is its default.
	CheckpointEvery int64
	// TargetDSN is the target holding harbormaster.receipts.
	TargetDSN string
	// Answered maps a request id to the outcome the agent was told
	// ("executed", "referred", ...). Requests an agent got an error for
	// are not in it.
	Answered map[string]string
}

// Report is what a Check found. Violations is empty when every invariant
// holds.
type Report struct {
	// Requests counts the store's requests; Executed those executed;
	// Waiting those referred and waiting for a human.
	Requests, Executed, Waiting int
	// Receipts and Voided count the target's receipts (a void one burns a
	// marque that never ran).
	Receipts, Voided int
	// Orphans are decision entries with no request row (a stop between the
	// two): nothing ran for them.
	Orphans int
	// ExecutedSQL maps each executed request to its canonical SQL, for a
	// scenario's own check of the target's rows.
	ExecutedSQL map[string]string
	// Violations say, one per line, what broke.
	Violations []string
}

func (r *Report) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

// Summary is one line for the test log.
func (r *Report) Summary() string {
	return fmt.Sprintf("requests=%d executed=%d waiting=%d receipts=%d voided=%d orphan_decisions=%d violations=%d",
		r.Requests, r.Executed, r.Waiting, r.Receipts, r.Voided, r.Orphans, len(r.Violations))
}

type reqRow struct {
	status, outcome, marque, path, canonical string
}

type receipt struct {
	marque, request string
	void            bool
	at              time.Time
}

// Run checks, after reconciliation has run:
//
//   - the logbook verifies (chain, and checkpoints with Verifier);
//   - every request has exactly one final outcome: exactly one decision
//     entry, and none is left running or deciding;
//   - nothing ran twice: at most one receipt per request, and the receipt
//     of an executed request is under its marque;
//   - nothing ran without its decision: every receipt's request has a
//     decision entry (and, approved, an approval entry) written before
//     the receipt's transaction began, and is executed in the store;
//   - what the logbook says ran, ran: a request is executed in the store
//     exactly when an execution entry says so;
//   - no false "executed": every request an agent was told executed is
//     executed, with its receipt, or, a read run in the node's process,
//     with an execution entry that says it has none, committed with its
//     decision right before it;
//   - a decision with no request row (orphan) has nothing after it and no
//     receipt.
//
// An error is returned only when the state cannot be read.
func (c Check) Run(ctx context.Context) (*Report, error) {
	rep := &Report{ExecutedSQL: map[string]string{}}
	lb, err := logbook.New(c.Store, nil, nil, nil, logbook.Config{Origin: c.Origin, CheckpointEvery: c.CheckpointEvery})
	if err != nil {
		return nil, fmt.Errorf("faults: check: %w", err)
	}
	if c.Verifier != nil {
		v, err := lb.Verify(ctx, c.Verifier)
		if err != nil {
			return nil, fmt.Errorf("faults: check: %w", err)
		}
		if !v.OK || v.TailTooLong {
			rep.violate("the logbook does not verify: %s", v)
		}
	}

	reqs := map[string]reqRow{}
	rows, err := c.Store.ReadDB().QueryContext(ctx, "SELECT id, status, outcome, marque_id, path, canonical FROM requests")
	if err != nil {
		return nil, fmt.Errorf("faults: check: requests: %w", err)
	}
	for rows.Next() {
		var id string
		var r reqRow
		if err := rows.Scan(&id, &r.status, &r.outcome, &r.marque, &r.path, &r.canonical); err != nil {
			rows.Close()
			return nil, fmt.Errorf("faults: check: requests: %w", err)
		}
		reqs[id] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("faults: check: requests: %w", err)
	}

	// Every entry about a request, in order.
	type mark struct {
		seq  int64
		kind string
		at   time.Time
		out  string // an execution entry's outcome
		// receiptless: an execution entry that says no receipt proves it
		// (a read run in the node's process, recorded with its decision:
		// ledger.DecideExecuted).
		receiptless bool
	}
	entries := map[string][]mark{}
	err = lb.Iterate(ctx, logbook.Query{}, func(e logbook.Entry) error {
		id := e.Subjects["request"]
		if id == "" {
			return nil
		}
		m := mark{seq: e.Seq, kind: string(e.Kind), at: e.Time}
		if e.Kind == "execution" {
			var p struct {
				Outcome string `json:"outcome"`
				Receipt *bool  `json:"receipt"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return fmt.Errorf("entry %d: %w", e.Seq, err)
			}
			m.out = p.Outcome
			m.receiptless = p.Receipt != nil && !*p.Receipt
		}
		entries[id] = append(entries[id], m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("faults: check: logbook: %w", err)
	}
	first := func(id, kind string) (mark, bool) {
		for _, m := range entries[id] {
			if m.kind == kind {
				return m, true
			}
		}
		return mark{}, false
	}
	count := func(id, kind string) int {
		n := 0
		for _, m := range entries[id] {
			if m.kind == kind {
				n++
			}
		}
		return n
	}

	conn, err := pgx.Connect(ctx, c.TargetDSN)
	if err != nil {
		return nil, fmt.Errorf("faults: check: target: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var receipts []receipt
	rrows, err := conn.Query(ctx, "SELECT marque_id, request_id, void, executed_at FROM harbormaster.receipts ORDER BY executed_at")
	if err != nil {
		return nil, fmt.Errorf("faults: check: receipts: %w", err)
	}
	for rrows.Next() {
		var r receipt
		if err := rrows.Scan(&r.marque, &r.request, &r.void, &r.at); err != nil {
			rrows.Close()
			return nil, fmt.Errorf("faults: check: receipts: %w", err)
		}
		receipts = append(receipts, r)
	}
	rrows.Close()
	if err := rrows.Err(); err != nil {
		return nil, fmt.Errorf("faults: check: receipts: %w", err)
	}

	ids := make([]string, 0, len(reqs))
	for id := range reqs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	rep.Requests = len(reqs)
	for _, id := range ids {
		r := reqs[id]
		switch r.status {
		case "running", "deciding":
			rep.violate("request %s is still %s after reconciliation", id, r.status)
		case "executed":
			rep.Executed++
			rep.ExecutedSQL[id] = r.canonical
		case "waiting":
			rep.Waiting++
		}
		if n := count(id, "decision"); n != 1 {
			rep.violate("request %s has %d decision entries, want 1", id, n)
		}
		ranPerLog := false
		for _, m := range entries[id] {
			if m.kind == "execution" && m.out == "executed" {
				ranPerLog = true
			}
		}
		if ranPerLog != (r.status == "executed") {
			rep.violate("request %s is %s in the store, but the logbook says executed=%v", id, r.status, ranPerLog)
		}
		if o, ok := c.Answered[id]; ok && o == "executed" && r.status != "executed" {
			rep.violate("request %s was answered executed but is %s", id, r.status)
		}
	}
	for id := range entries {
		if _, ok := reqs[id]; ok {
			continue
		}
		if _, ok := first(id, "decision"); !ok {
			rep.violate("logbook entries about request %s, which has no decision and no row", id)
			continue
		}
		rep.Orphans++
		if n := len(entries[id]); n != 1 {
			rep.violate("request %s has no row but %d logbook entries", id, n)
		}
	}

	perRequest := map[string]int{}
	byMarque := map[string]receipt{}
	for _, rc := range receipts {
		byMarque[rc.marque] = rc
		r, known := reqs[rc.request]
		if rc.void {
			rep.Voided++
			if known && r.status == "executed" && r.marque == rc.marque {
				rep.violate("void receipt %s is the marque request %s executed under", rc.marque, rc.request)
			}
			continue
		}
		rep.Receipts++
		perRequest[rc.request]++
		if !known || r.status != "executed" || r.marque != rc.marque {
			rep.violate("receipt %s: a statement ran for request %s, which is not executed under it (known=%v status=%q marque=%q)",
				rc.marque, rc.request, known, r.status, r.marque)
		}
		d, ok := first(rc.request, "decision")
		// executed_at has microseconds; the entry's time nanoseconds.
		switch {
		case !ok:
			rep.violate("receipt %s: request %s ran with no decision entry", rc.marque, rc.request)
		case d.at.Truncate(time.Microsecond).After(rc.at):
			rep.violate("receipt %s: request %s ran at %s, before its decision entry (%s)", rc.marque, rc.request, rc.at, d.at)
		}
		if r.path == marque.PathApproved {
			a, ok := first(rc.request, "approval")
			switch {
			case !ok:
				rep.violate("receipt %s: approved request %s ran with no approval entry", rc.marque, rc.request)
			case a.at.Truncate(time.Microsecond).After(rc.at):
				rep.violate("receipt %s: request %s ran at %s, before its approval entry (%s)", rc.marque, rc.request, rc.at, a.at)
			}
		}
	}
	for id, n := range perRequest {
		if n > 1 {
			rep.violate("request %s ran %d times (receipts)", id, n)
		}
	}
	// receiptless reports a request executed as a read with no receipt:
	// its execution entry says so and is the entry right after its
	// decision (they committed together, before any row left).
	receiptless := func(id string) bool {
		es := entries[id]
		for i, m := range es {
			if m.kind == "execution" && m.receiptless {
				if i != 1 || es[0].kind != "decision" || es[0].seq != m.seq-1 {
					rep.violate("request %s: its receiptless execution entry %d is not the one right after its decision", id, m.seq)
				}
				if !isRead(reqs[id].canonical) {
					rep.violate("request %s ran without a receipt but is not a read: %q", id, reqs[id].canonical)
				}
				return true
			}
		}
		return false
	}
	for _, id := range ids {
		r := reqs[id]
		if r.status != "executed" {
			continue
		}
		rc, ok := byMarque[r.marque]
		switch {
		case receiptless(id):
			if ok {
				rep.violate("request %s is executed without a receipt, per its execution entry, but the target has one under its marque %q", id, r.marque)
			}
		case !ok || rc.void || rc.request != id:
			rep.violate("request %s is executed under marque %q but the target has no receipt for it", id, r.marque)
		}
	}
	return rep, nil
}

// isRead reports whether canonical is one SELECT (a receiptless execution
// must be a read; the walker refuses a data-modifying WITH, and the Pilot
// runs a read read-only).
func isRead(canonical string) bool {
	tree, err := pg.Parse(canonical)
	return err == nil && len(tree.Stmts) == 1 && tree.Stmts[0].Stmt.GetSelectStmt() != nil
}
