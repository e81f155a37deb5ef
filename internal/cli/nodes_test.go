package cli_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/note"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/faults"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// The nodes' intervals: the defaults, so the figures are what an operator
// gets.
const (
	nodesSwitchPoll  = time.Second // switch_poll
	nodesDelegations = time.Second // services.delegations
)

// Delegations of the multi-node deployment, all for agent:demo on shop.
// Each statement of the test is covered by exactly one of them: orders
// (no quota), the tally (increments, for the kill), customers' regions
// (a small signed quota) and customers' emails (revoked by the test).
const (
	nodesTally = `sentence: Count visits in the tally.
grantee: agent:demo
target: shop
expires: EXPIRES
allow:
  - op: select
    table: public.tally
    columns: [id, n, note]
    max_rows: 100
  - op: update
    table: public.tally
    columns: [n]
    fence: id <= 20
    max_rows: 1
`
	nodesQuota = `sentence: Read customers' regions, five times a minute.
grantee: agent:demo
target: shop
expires: EXPIRES
quota: 5/minute
allow:
  - op: select
    table: public.customers
    columns: [id, region]
    max_rows: 10
`
	nodesEmails = `sentence: Read customers' emails until told otherwise.
grantee: agent:demo
target: shop
expires: EXPIRES
allow:
  - op: select
    table: public.customers
    columns: [id, email]
    max_rows: 10
`
	nodesTallyTable = `CREATE TABLE public.tally (id int PRIMARY KEY, n int NOT NULL DEFAULT 0, note text NOT NULL DEFAULT '');
INSERT INTO public.tally (id) SELECT generate_series(1, 20);`
)

// nodesSystem is three serve processes on one PostgreSQL control store,
// one Pilot process holding the target's only credentials, and the target.
type nodesSystem struct {
	d        *servetest.Deployment
	store    string // the control store's URL
	dsn      string // the target's
	pilot    *servetest.Proc
	nodes    []*servetest.Proc
	client   *http.Client
	verifier note.Verifier
}

// TestNodes runs several control-plane nodes on one machine, as real
// processes sharing one PostgreSQL store and one remote Pilot, and checks
// what they share: switches, quotas, the queue, delegations (revocation)
// and one logbook chain, and that a node killed mid-traffic leaves every
// invariant holding (faults.Check).
func TestNodes(t *testing.T) {
	t.Parallel()
	began := time.Now()
	s := startNodes(t, 3)
	t.Logf("3 nodes and a Pilot started in %v", time.Since(began).Round(time.Millisecond))
	t.Run("SwitchPropagates", s.switchPropagates)
	t.Run("QuotaShared", s.quotaShared)
	t.Run("ReferralApprovedElsewhere", s.referralApprovedElsewhere)
	t.Run("RevocationEverywhere", s.revocationEverywhere)
	t.Run("OneLogbookChain", s.oneLogbookChain)
	t.Run("KillNode", s.killNode)
	t.Logf("TestNodes took %v", time.Since(began).Round(time.Millisecond))
}

func startNodes(t testing.TB, n int) *nodesSystem {
	t.Helper()
	// The store refuses a server without fsync; this one has it, with the
	// target in another database of the same server.
	srv := pgtmptest.StartWith(t, map[string]string{"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"})
	s := &nodesSystem{store: pgtmptest.NewDatabase(t, srv), dsn: pgtmptest.NewDatabase(t, srv), client: &http.Client{Timeout: 30 * time.Second}}
	gatewaytest.LoadShop(t, s.dsn)
	execSQL(t, s.dsn, nodesTallyTable)
	exp := time.Now().Add(7 * 24 * time.Hour).Truncate(time.Hour)
	orders := strings.Replace(string(gatewaytest.Example(t, gatewaytest.Orders)), "quota: 120/hour\n", "", 1)
	dels := map[string][]byte{"orders.yaml": []byte(orders)}
	for name, y := range map[string]string{"tally.yaml": nodesTally, "regions.yaml": nodesQuota, "emails.yaml": nodesEmails} {
		dels[name] = gatewaytest.WithExpiry([]byte(strings.Replace(y, "EXPIRES", "2000-01-01T00:00:00Z", 1)), exp)
	}
	s.d = servetest.NewDeployment(t, servetest.Options{Name: "nodes-test", TargetDSN: s.dsn, Store: s.store, RemotePilot: true, Delegations: dels})
	s.pilot = s.d.StartPilot(t, "pilot.log")
	for i := range n {
		s.nodes = append(s.nodes, s.d.Start(t, fmt.Sprintf("node-%d.log", i+1)))
	}
	v, err := logbook.NewCheckpointVerifier(s.d.Opts.Name, s.d.CPKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	s.verifier = v
	if cfg, err := os.ReadFile(s.d.Config); err != nil || strings.Contains(string(cfg), "dsn") {
		t.Fatalf("the serve config holds the target's DSN (%v):\n%s", err, cfg)
	}
	return s
}

// switchPropagates flips Tier B through node 1 and measures how long
// nodes 2 and 3 take to see it, on and off. Each must within three poll
// intervals (the three-interval rule's bound) plus the time one read
// takes on a busy machine; node 1 sees its own change at once.
func (s *nodesSystem) switchPropagates(t *testing.T) {
	bound := 3*nodesSwitchPoll + 2*time.Second
	for _, on := range []bool{true, false} {
		// The deployment switch and the target's: both on is on; the
		// deployment's off is off.
		scopes := []string{"", gatewaytest.Target}
		if !on {
			scopes = []string{""}
		}
		for _, target := range scopes {
			s.setSwitch(t, s.nodes[0].Addr, target, on)
		}
		set := time.Now()
		if got := s.tierB(t, s.nodes[0].Addr); got != on {
			t.Errorf("node 1 set Tier B %v but reads %v right after", on, got)
		}
		for i, p := range s.nodes[1:] {
			for s.tierB(t, p.Addr) != on {
				if time.Since(set) > bound {
					t.Fatalf("node %d still reads Tier B %v %v after node 1 set it %v (bound %v)", i+2, !on, time.Since(set), on, bound)
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("Tier B %v: node %d saw it after %v (switch_poll %v)", on, i+2, time.Since(set).Round(time.Millisecond), nodesSwitchPoll)
		}
	}
}

// quotaShared sends statements covered only by the delegation with a
// signed quota of 5/minute, round robin through the three nodes: at most
// five run in total (plus what refilled meanwhile), not five per node.
func (s *nodesSystem) quotaShared(t *testing.T) {
	const sent = 18
	began := time.Now()
	executed := make([]int, len(s.nodes))
	total := 0
	var reasons []string
	for i := range sent {
		a := s.post(t, i%len(s.nodes), "SELECT id, region FROM customers WHERE id = 1")
		switch a.Outcome {
		case gateway.OutcomeExecuted:
			executed[i%len(s.nodes)]++
			total++
		case gateway.OutcomeReferred:
			reasons = append(reasons, a.Reasons...)
		default:
			t.Fatalf("statement %d: %+v", i, a)
		}
	}
	// A 5/minute bucket refills one token every 12s.
	allowed := 5 + int(time.Since(began)/(12*time.Second))
	t.Logf("quota 5/minute: %d of %d statements through %d nodes executed (per node %v) in %v", total, sent, len(s.nodes), executed, time.Since(began).Round(time.Millisecond))
	if total > allowed {
		t.Errorf("%d statements ran under a 5/minute quota across %d nodes, at most %d may: the nodes do not share the delegation's bucket", total, len(s.nodes), allowed)
	}
	if total == 0 {
		t.Error("nothing ran: the quota delegation is not in force")
	}
	if !strings.Contains(strings.Join(reasons, " "), "quota") {
		t.Errorf("no referral says it was the quota: %q", reasons)
	}
}

// referralApprovedElsewhere refers a statement on node 1, approves it (a
// signature by bob over the proposed approval) through node 2, and
// checks that it ran exactly once: a second approval through node 3 is
// refused, the row changed once, and one receipt stands for the request.
func (s *nodesSystem) referralApprovedElsewhere(t *testing.T) {
	ctx := t.Context()
	a := s.post(t, 0, "UPDATE tally SET n = n + 1, note = 'approved' WHERE id = 20")
	if a.Outcome != gateway.OutcomeReferred {
		t.Fatalf("the write of note was not referred: %+v", a)
	}
	// The rehearsal runs on node 1 after the answer; node 2 refuses an
	// approval until it is there.
	var v *gateway.RequestView
	servetest.WaitUntil(t, "an approval through node 2", func() bool {
		var err error
		v, err = s.d.Approve(ctx, s.client, s.nodes[1].Addr, a.RequestID)
		var he *servetest.HTTPError
		if errors.As(err, &he) && he.Status == http.StatusConflict {
			return false
		}
		if err != nil {
			t.Fatalf("approving through node 2: %v\n%s", err, s.nodes[1].LogText())
		}
		return true
	})
	if v.Status != gateway.StatusExecuted {
		t.Fatalf("approved through node 2, the request is %s: %q", v.Status, v.Reasons)
	}
	_, err := s.d.Approve(ctx, s.client, s.nodes[2].Addr, a.RequestID)
	var he *servetest.HTTPError
	// Refused either way: 409 (the request no longer waits), or 401 when it
	// was signed in the same second as the first, which makes it the same
	// signed request, already used through another node.
	replayed := errors.As(err, &he) && he.Status == http.StatusUnauthorized && strings.Contains(he.Message, "already used")
	if !errors.As(err, &he) || he.Status != http.StatusConflict && !replayed {
		t.Errorf("a second approval through node 3: %v, want HTTP 409 (or 401, already used)", err)
	}
	var n int
	var note string
	queryRow(t, s.dsn, "SELECT n, note FROM tally WHERE id = 20", nil, &n, &note)
	if n != 1 || note != "approved" {
		t.Errorf("tally row 20 is (%d, %q), want (1, \"approved\"): the approved statement ran %d times", n, note, n)
	}
	var receipts int
	queryRow(t, s.dsn, "SELECT count(*) FROM harbormaster.receipts WHERE request_id = $1 AND NOT void", []any{a.RequestID}, &receipts)
	if receipts != 1 {
		t.Errorf("%d receipts for request %s, want 1", receipts, a.RequestID)
	}
	// Node 1, which decided it, reads the outcome from the store.
	if st := s.requestStatus(t, 0, a.RequestID); st != string(gateway.StatusExecuted) {
		t.Errorf("node 1 shows the approved request as %q", st)
	}
}

// revocationEverywhere revokes a delegation through node 1 and measures
// how long its statement still runs on nodes 2 and 3: each must refer it
// within services.delegations (plus a read on a busy machine), node 1 at
// once.
func (s *nodesSystem) revocationEverywhere(t *testing.T) {
	const sql = "SELECT id, email FROM customers WHERE id = 2"
	for i := range s.nodes {
		if a := s.post(t, i, sql); a.Outcome != gateway.OutcomeExecuted {
			t.Fatalf("before the revocation node %d: %+v", i+1, a)
		}
	}
	id := s.delegationID(t, "emails")
	act, sig := gatewaytest.Act(t, s.d.Keys.Grantor, signing.NamespaceRevocation, acts.Revocation{Version: 1, Kind: acts.KindRevocation,
		DelegationID: id, Target: gatewaytest.Target, Reason: "the emails are out of scope now", Time: acts.Stamp(time.Now())})
	body, _ := json.Marshal(map[string]string{"act": string(act), "signature": string(sig)})
	resp, err := s.client.Post("http://"+s.nodes[0].Addr+"/v1/delegations/"+id+"/revoke", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke through node 1: HTTP %d %s", resp.StatusCode, b)
	}
	revoked := time.Now()
	if a := s.post(t, 0, sql); a.Outcome != gateway.OutcomeReferred {
		t.Errorf("node 1 ran a statement of the delegation it revoked: %+v", a)
	}
	bound := nodesDelegations + 2*time.Second
	for i := 1; i < len(s.nodes); i++ {
		for {
			a := s.post(t, i, sql)
			if a.Outcome == gateway.OutcomeReferred {
				break
			}
			if time.Since(revoked) > bound {
				t.Fatalf("node %d still runs the revoked delegation's statements %v after the revocation (bound %v)", i+1, time.Since(revoked), bound)
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("revocation: node %d refers after %v (services.delegations %v)", i+1, time.Since(revoked).Round(time.Millisecond), nodesDelegations)
	}
}

// oneLogbookChain verifies the one chain the three nodes wrote, with
// "harbormaster logbook verify" on the store as an auditor runs it, and
// checks that every node's requests are in it.
func (s *nodesSystem) oneLogbookChain(t *testing.T) {
	if err := s.d.VerifyLogbook(t); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), s.store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := faults.Check{Store: st, Origin: s.d.Opts.Name + "/logbook", Verifier: s.verifier, CheckpointEvery: int64(s.d.Opts.CheckpointEvery), TargetDSN: s.dsn}.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after traffic through every node: %s", rep.Summary())
	for _, v := range rep.Violations {
		t.Error(v)
	}
	if rep.Requests < 20 {
		t.Errorf("only %d requests in the store", rep.Requests)
	}
}

// killNode sends a load through all three nodes, kills node 2 with
// SIGKILL mid-traffic, restarts it on the same store, and checks the
// invariants (faults.Check: the chain verifies, every request final,
// nothing ran twice, nothing ran without its decision, no false
// "executed") and that each tally counter equals its executed
// increments.
func (s *nodesSystem) killNode(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	answered := map[string]string{}
	var perNode [3]atomic.Int64
	lctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	addrs := make([]atomic.Pointer[string], len(s.nodes))
	for i, p := range s.nodes {
		addrs[i].Store(&p.Addr)
	}
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			node := w % len(s.nodes)
			for lctx.Err() == nil {
				id := 1 + rng.IntN(19) // row 20 is the approval's
				sql := fmt.Sprintf("UPDATE tally SET n = n + 1 WHERE id = %d", id)
				if rng.IntN(3) == 0 {
					sql = fmt.Sprintf("SELECT id, n FROM tally WHERE id = %d", id)
				}
				a, err := servetest.Post(lctx, s.client, *addrs[node].Load(), gatewaytest.AgentToken, gatewaytest.Target, sql)
				if err != nil {
					time.Sleep(20 * time.Millisecond) // the node is down, or an error answer
					continue
				}
				mu.Lock()
				answered[a.RequestID] = a.Outcome
				mu.Unlock()
				perNode[node].Add(1)
			}
		}()
	}
	servetest.WaitUntil(t, "traffic through every node", func() bool {
		return perNode[0].Load() >= 10 && perNode[1].Load() >= 10 && perNode[2].Load() >= 10
	})
	time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
	s.nodes[1].Kill(t)
	killed := perNode[1].Load()
	t.Logf("killed node 2 (SIGKILL) after %d answers from it", killed)
	// The others keep serving meanwhile.
	before := perNode[0].Load() + perNode[2].Load()
	servetest.WaitUntil(t, "traffic through nodes 1 and 3 while node 2 is down", func() bool {
		return perNode[0].Load()+perNode[2].Load() >= before+20
	})
	restartAt := time.Now()
	s.nodes[1] = s.d.Start(t, "node-2-restarted.log")
	t.Logf("node 2 restarted in %v", time.Since(restartAt).Round(time.Millisecond))
	addrs[1].Store(&s.nodes[1].Addr)
	servetest.WaitUntil(t, "traffic through the restarted node 2", func() bool { return perNode[1].Load() >= killed+10 })
	stop()
	wg.Wait()

	st, err := store.Open(ctx, s.store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Requests the kill left running are settled by reconciliation (the
	// restarted node's, or any node's within a minute or so).
	servetest.WaitUntil(t, "no request left running", func() bool {
		var n int
		if err := st.ReadDB().QueryRowContext(ctx, "SELECT count(*) FROM requests WHERE status IN ('running', 'deciding')").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	mu.Lock()
	told := maps.Clone(answered)
	mu.Unlock()
	rep, err := faults.Check{Store: st, Origin: s.d.Opts.Name + "/logbook", Verifier: s.verifier, CheckpointEvery: int64(s.d.Opts.CheckpointEvery),
		TargetDSN: s.dsn, Answered: told}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the kill: %s; answers per node %d/%d/%d", rep.Summary(), perNode[0].Load(), perNode[1].Load(), perNode[2].Load())
	for _, v := range rep.Violations {
		t.Error(v)
	}
	// Each counter equals the increments of it the store says executed:
	// one that ran twice, or ran without its execution, shows.
	want := map[int]int{20: 1} // the approval's
	for _, sql := range rep.ExecutedSQL {
		var id int
		if _, err := fmt.Sscanf(sql, "UPDATE tally SET n = n + 1 WHERE id = %d", &id); err == nil {
			want[id]++
		}
	}
	for id := 1; id <= 20; id++ {
		var n int
		queryRow(t, s.dsn, "SELECT n FROM tally WHERE id = $1", []any{id}, &n)
		if n != want[id] {
			t.Errorf("tally row %d is %d, but %d increments of it executed", id, n, want[id])
		}
	}
	if rep.Executed < 30 {
		t.Errorf("the load did too little to test anything: %s", rep.Summary())
	}
	if err := s.d.VerifyLogbook(t); err != nil {
		t.Error(err)
	}
}

// setSwitch flips tier_b (target "" is the deployment's) through addr,
// signed by alice.
func (s *nodesSystem) setSwitch(t testing.TB, addr, target string, on bool) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"name": "tier_b", "target": target, "on": on})
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/switches", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := s.d.Keys.Grantor.SignRequest(signing.NamespaceSwitch, http.MethodPost, "/v1/switches", time.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("switch tier_b %q %v: HTTP %d %s", target, on, resp.StatusCode, b)
	}
}

// tierB is whether the node at addr has Tier B on for shop.
func (s *nodesSystem) tierB(t testing.TB, addr string) bool {
	t.Helper()
	var v struct {
		TierB map[string]bool `json:"tier_b"`
	}
	s.get(t, "http://"+addr+"/v1/switches", "", &v)
	return v.TierB[gatewaytest.Target]
}

// delegationID is the id of the agent's delegation whose sentence
// contains word.
func (s *nodesSystem) delegationID(t *testing.T, word string) string {
	t.Helper()
	var v struct {
		Delegations []struct {
			ID, Sentence string
		} `json:"delegations"`
	}
	s.get(t, "http://"+s.nodes[0].Addr+"/v1/delegations", gatewaytest.AgentToken, &v)
	i := slices.IndexFunc(v.Delegations, func(d struct{ ID, Sentence string }) bool { return strings.Contains(d.Sentence, word) })
	if i < 0 {
		t.Fatalf("no delegation about %s: %+v", word, v.Delegations)
	}
	return v.Delegations[i].ID
}

func (s *nodesSystem) requestStatus(t *testing.T, node int, id string) string {
	t.Helper()
	var v gateway.RequestView
	s.get(t, "http://"+s.nodes[node].Addr+"/v1/requests/"+id, gatewaytest.AgentToken, &v)
	return string(v.Status)
}

func (s *nodesSystem) get(t testing.TB, url, token string, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// post sends sql as the agent through node i and fails t on anything but
// an answer.
func (s *nodesSystem) post(t *testing.T, i int, sql string) *servetest.Answer {
	t.Helper()
	a, err := servetest.Post(t.Context(), s.client, s.nodes[i].Addr, gatewaytest.AgentToken, gatewaytest.Target, sql)
	if err != nil {
		t.Fatalf("node %d: %q: %v\n%s", i+1, sql, err, s.nodes[i].LogText())
	}
	return a
}

func execSQL(t testing.TB, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatal(err)
	}
}

// queryRow scans the one row of sql (with args) into dest.
func queryRow(t testing.TB, dsn, sql string, args []any, dest ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(t.Context(), sql, args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
