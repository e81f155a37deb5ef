package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const transcriptGolden = "testdata/golden/path_transcript.golden"

// TestPathTranscript pins what the statement path does, end to end, for a
// fixed set of statements on every path: compiled (reads and writes, a
// read through a fence and one past its row cap), surveyed (the panel
// conforms, the panel refers, the rehearsal refers), referred by the
// static check, refused by the Pilot's guards after the gateway decided
// to run it (fence, check, max_rows), rejected at once (several
// statements, DDL, a placeholder, no parse, nothing), referred for an
// empty quota, refused for a referral flood, approved and denied by a
// human. For each it records the agent's answer (the Response, or the
// error), the request as the agent then reads it, and every logbook entry
// about the request in chain order, with ids, times, hashes, signatures,
// transaction ids and durations replaced by placeholders that keep which
// values are the same. Run with -update to rewrite the golden file, and
// review its diff: every change in it is a change of behaviour.
func TestPathTranscript(t *testing.T) {
	t.Parallel()
	var tr transcript

	// The main system: both example delegations for agent:demo, the
	// surveyed path open for the residual rule, a panel that conforms
	// except to a rename to Maria Garcia, and every surveyed conforms
	// sampled for audit (the rate is 1, so the sample is not left to the
	// keyed hash of a random id).
	panel := llmtest.Scripted(func(r llmtest.Request) llm.Verdict {
		if strings.Contains(r.User, "Maria Garcia") {
			return llm.Refer
		}
		return llm.Conforms
	})
	f := newTierB(t, panel, tierBOptions{tune: func(o *gatewaytest.Options) { o.Audit.Rate = 1 }})
	y, sig := f.sys.SignedExample(t, gatewaytest.Orders)
	if _, _, err := f.sys.Gateway.AddDelegation(t.Context(), y, sig, gatewaytest.Orders); err != nil {
		t.Fatal(err)
	}
	sys := f.sys
	// want is the request's status, and its path if it has one, as
	// the agent then reads it: a check of each step's path that does not
	// depend on the golden file.
	steps := []struct {
		name, principal, sql, want string
	}{
		{"compiled read", gatewaytest.Agent, "SELECT id, customer_id, status FROM orders WHERE id < 4 ORDER BY id", "executed compiled"},
		{"compiled read through a fence (customer 21 is in the US)", gatewaytest.Agent, "SELECT id, name, region FROM customers WHERE id IN (1, 21) ORDER BY id", "executed compiled"},
		{"compiled write", gatewaytest.Agent, "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3", "executed compiled"},
		{"compiled write with RETURNING", gatewaytest.Agent, "UPDATE orders SET status = 'failed' WHERE id IN (4, 5) RETURNING id, status", "executed compiled"},
		{"compiled write reaching no row", gatewaytest.Agent, "UPDATE orders SET status = 'failed' WHERE id = 100000", "executed compiled"},
		{"surveyed, the panel conforms", gatewaytest.Agent, "UPDATE customers SET name = 'John Smith' WHERE id = 3", "executed surveyed"},
		{"surveyed, the panel refers", gatewaytest.Agent, "UPDATE customers SET name = 'Maria Garcia' WHERE id = 7", "waiting"},
		{"surveyed, the rehearsal reaches more than max_rows", gatewaytest.Agent, "UPDATE customers SET name = 'X' WHERE id IN (4, 5)", "waiting"},
		{"referred, a column no rule lists", gatewaytest.Agent, "SELECT id, total_cents FROM orders", "waiting"},
		{"referred, an operation no rule allows", gatewaytest.Agent, "DELETE FROM orders WHERE id = 7", "waiting"},
		{"referred, a column outside the write rule", gatewaytest.Agent, "UPDATE customers SET email = 'x' WHERE id = 3", "waiting"},
		{"referred, a principal with no delegation", gatewaytest.Other, "SELECT id FROM orders", "waiting"},
		{"Pilot-referred, the write fence (order 45 is too recent)", gatewaytest.Agent, "UPDATE orders SET status = 'failed' WHERE id = 45", "waiting compiled"},
		{"Pilot-referred, the check", gatewaytest.Agent, "UPDATE orders SET status = 'shipped' WHERE id = 6", "waiting compiled"},
		{"Pilot-referred, past max_rows", gatewaytest.Agent, "UPDATE orders SET status = 'retrying' WHERE id BETWEEN 11 AND 40", "waiting compiled"},
		{"rejected, several statements", gatewaytest.Agent, "UPDATE orders SET status = 'failed' WHERE id = 8; DROP TABLE orders", "rejected"},
		{"rejected, DDL", gatewaytest.Agent, "DROP TABLE orders", "rejected"},
		{"rejected, a placeholder", gatewaytest.Agent, "SELECT id FROM orders WHERE id = $1", "rejected"},
		{"rejected, does not parse", gatewaytest.Agent, "SELEC id FROM orders", "rejected"},
		{"rejected, empty", gatewaytest.Agent, "  -- nothing\n", "rejected"},
	}
	for _, s := range steps {
		tr.submit(t, sys, s.name, s.principal, s.sql, s.want)
	}

	// A human approves a referred statement, and denies another.
	ctx := t.Context()
	id := tr.submit(t, sys, "referred, then previewed and approved by bob", gatewaytest.Agent, "UPDATE orders SET total_cents = 4200 WHERE id = 2", "waiting")
	act, err := sys.Gateway.ProposeApproval(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sys.Gateway.Approve(ctx, id, act, signAct(t, sys.Opts.Keys.Approver, signing.NamespaceApproval, act))
	if err != nil {
		t.Fatal(err)
	}
	tr.human(t, sys, id, "bob approves", act, v, "executed approved")
	id = tr.submit(t, sys, "referred, then denied by bob", gatewaytest.Agent, "DELETE FROM orders WHERE id = 9", "waiting")
	dv, err := sys.Gateway.Request(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	denial, err := acts.Canonical(acts.Denial{Version: 1, Kind: acts.KindDenial, RequestID: id, Target: dv.Target,
		StatementSHA256: marque.StatementHash(dv.CanonicalSQL), Reason: "orders are not deleted"})
	if err != nil {
		t.Fatal(err)
	}
	v, err = sys.Gateway.Deny(ctx, id, denial, signAct(t, sys.Opts.Keys.Approver, signing.NamespaceDenial, denial))
	if err != nil {
		t.Fatal(err)
	}
	tr.human(t, sys, id, "bob denies", denial, v, "denied")

	// A second system for the limits on one principal: the Tier A
	// delegation with a quota of one statement an hour and a read cap of
	// three rows, and a referral rate of one an hour.
	g := newEmptyFixture(t, func(o *gatewaytest.Options) {
		o.Gateway.ReferralRate = quota.Rate{Count: 1, Per: time.Hour}
	})
	limited := rewrite(t, gatewaytest.Example(t, gatewaytest.Orders), "quota: 120/hour", "quota: 1/hour")
	g.addDelegation(t, rewrite(t, limited, "max_rows: 500", "max_rows: 3"))
	tr.note = "A second system: a quota of 1/hour and a read cap of 3 rows on the orders delegation, a referral rate of 1/hour."
	for _, s := range []struct{ name, sql, want string }{
		{"compiled read past the read cap (truncated)", "SELECT id, status FROM orders ORDER BY id", "executed compiled"},
		{"referred, the delegation's quota is used up", "SELECT id, status FROM orders ORDER BY id", "waiting"},
		{"refused, past the referral rate", "DELETE FROM orders WHERE id = 7", "refused"},
	} {
		tr.submit(t, g.sys, s.name, gatewaytest.Agent, s.sql, s.want)
	}

	got := tr.render(t)
	if *update {
		if err := os.MkdirAll(filepath.Dir(transcriptGolden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(transcriptGolden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(transcriptGolden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the path transcript differs from %s (run go test -update after review):\n%s", transcriptGolden, lineDiff(string(want), string(got)))
	}
}

// transcript is the blocks recorded so far.
type transcript struct {
	blocks []block
	// note is the next block's note.
	note string
}

type block struct {
	// Note, when set, is written as a comment before the block.
	Note      string         `yaml:"-"`
	Step      string         `yaml:"step"`
	Principal string         `yaml:"principal,omitempty"`
	SQL       string         `yaml:"sql,omitempty"`
	Act       string         `yaml:"act,omitempty"`
	Answer    any            `yaml:"answer,omitempty"`
	Error     map[string]any `yaml:"error,omitempty"`
	Human     any            `yaml:"human_view,omitempty"`
	View      any            `yaml:"agent_view"`
	Logbook   []any          `yaml:"logbook"`
}

// submit sends one statement and records its block; it returns the
// request's id.
func (tr *transcript) submit(t *testing.T, sys *gatewaytest.System, step, principal, sql, want string) string {
	t.Helper()
	resp, err := sys.Gateway.Submit(t.Context(), principal, gatewaytest.Target, sql)
	b := block{Step: step, Principal: principal, SQL: sql}
	var id string
	var sqlErr *gateway.SQLError
	var flood *gateway.FloodError
	switch {
	case errors.As(err, &sqlErr):
		id = sqlErr.RequestID
		b.Error = map[string]any{"type": "SQLError", "request_id": id, "code": sqlErr.Code, "message": sqlErr.Message, "unapprovable": sqlErr.Unapprovable()}
	case errors.As(err, &flood):
		id = flood.RequestID
		b.Error = map[string]any{"type": "FloodError", "request_id": id, "code": flood.Code, "message": flood.Message}
	case err != nil:
		t.Fatalf("%s: %q: %v", step, sql, err)
	default:
		id = resp.RequestID
		b.Answer = answerOf(t, resp)
	}
	tr.finish(t, sys, &b, id, principal, want)
	return id
}

// human records a human's act on a request: what the human was shown
// after it, then the request as its agent reads it and its entries.
func (tr *transcript) human(t *testing.T, sys *gatewaytest.System, id, what string, act []byte, v *gateway.RequestView, want string) {
	t.Helper()
	b := block{Step: what + " " + id, Act: string(act), Human: generic(t, v)}
	tr.finish(t, sys, &b, id, v.Principal, want)
}

func (tr *transcript) finish(t *testing.T, sys *gatewaytest.System, b *block, id, principal, want string) {
	t.Helper()
	// Request waits for an execution entry being written after the
	// answer, so the entries read next are all there are.
	v, err := sys.Gateway.Request(t.Context(), id, principal)
	if err != nil {
		t.Fatalf("%s: %v", b.Step, err)
	}
	if got := strings.TrimSpace(string(v.Status) + " " + v.Path); got != want {
		t.Errorf("%s: the request is %q, want %q", b.Step, got, want)
	}
	b.View = generic(t, v)
	b.Note, tr.note = tr.note, ""
	for _, e := range entries(t, sys.Logbook, id) {
		var p any
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		b.Logbook = append(b.Logbook, map[string]any{"kind": string(e.Kind), "subjects": e.Subjects, "payload": p})
	}
	tr.blocks = append(tr.blocks, *b)
}

// answerOf is a Response as the agent reads it, its rows in the order of
// its columns.
func answerOf(t *testing.T, r *gateway.Response) any {
	t.Helper()
	rows := make([][]any, 0, len(r.Rows))
	var names []string
	var types []uint32
	for _, c := range r.Columns {
		names, types = append(names, c.Name), append(types, c.Type)
	}
	for _, row := range r.Rows {
		var out []any
		out = append(out, row...)
		rows = append(rows, out)
	}
	return generic(t, map[string]any{
		"outcome": r.Outcome, "path": r.Path, "request_id": r.RequestID, "delegation_id": r.DelegationID,
		"reasons": r.Reasons, "columns": names, "column_types": types, "rows": rows,
		"rows_affected": r.RowsAffected, "truncated": r.Truncated,
	})
}

// generic is v as JSON values.
func generic(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (tr *transcript) render(t *testing.T) []byte {
	t.Helper()
	n := newNormalizer()
	docs := make([]*yaml.Node, len(tr.blocks))
	for i, b := range tr.blocks {
		docs[i] = &yaml.Node{}
		if err := docs[i].Encode(b); err != nil {
			t.Fatal(err)
		}
		n.collect(docs[i], "")
	}
	var buf bytes.Buffer
	buf.WriteString("# The statement path's transcript (TestPathTranscript): one block per\n" +
		"# statement or human act. A <placeholder> stands for a value that changes\n" +
		"# from run to run (an id, a hash, a signature, a time, a duration); the\n" +
		"# same numbered placeholder is the same value throughout.\n")
	for i, d := range docs {
		n.rewrite(d, "")
		var out bytes.Buffer
		enc := yaml.NewEncoder(&out)
		enc.SetIndent(2)
		if err := enc.Encode(d); err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		if note := tr.blocks[i].Note; note != "" {
			buf.WriteString("# " + note + "\n")
		}
		buf.Write(out.Bytes())
	}
	return buf.Bytes()
}

// normalizer replaces what changes from run to run by placeholders,
// numbered per class in the order they first appear, so equal values stay
// equal and different ones different.
type normalizer struct {
	seen   map[string]string // value -> placeholder
	counts map[string]int    // class -> placeholders given
	marque map[string]bool   // the marque ids met under their keys
	re     *regexp.Regexp
}

// Patterns of values that change from run to run. Marque ids have no
// prefix: they are known by the keys that hold them (collect).
var (
	prefixedIDRE   = regexp.MustCompile(`^(req|jdg|aud)_[a-z2-7]{24}$|^dlg_[0-9a-f]{24}$`)
	sha256RE       = regexp.MustCompile(`^[0-9a-f]{64}$`)
	timeRE         = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`)
	signatureRE    = regexp.MustCompile(`^-----BEGIN SSH SIGNATURE-----[\s\S]*-----END SSH SIGNATURE-----\n?$`)
	fingerprintRE  = regexp.MustCompile(`^SHA256:[A-Za-z0-9+/]{43}$`)
	volatileTokens = `\b(?:req|jdg|aud)_[a-z2-7]{24}\b|\bdlg_[0-9a-f]{24}\b|\b[0-9a-f]{64}\b|` +
		`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})|` +
		`-----BEGIN SSH SIGNATURE-----[\s\S]*?-----END SSH SIGNATURE-----\n?|SHA256:[A-Za-z0-9+/]{43}`
)

func newNormalizer() *normalizer {
	return &normalizer{seen: map[string]string{}, counts: map[string]int{}, marque: map[string]bool{}}
}

// collect notes the marque ids of a document: the values of marque_id
// keys and of the marque subject.
func (n *normalizer) collect(node *yaml.Node, key string) {
	switch node.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range node.Content {
			n.collect(c, key)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			n.collect(node.Content[i+1], node.Content[i].Value)
		}
	case yaml.ScalarNode:
		if (key == "marque_id" || key == "marque") && node.Value != "" {
			n.marque[node.Value] = true
		}
	}
	n.re = nil
}

// rewrite replaces the volatile values of a document, in document order.
func (n *normalizer) rewrite(node *yaml.Node, key string) {
	switch node.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range node.Content {
			n.rewrite(c, key)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			n.rewrite(node.Content[i+1], node.Content[i].Value)
		}
	case yaml.ScalarNode:
		v := node.Value
		switch {
		case strings.HasSuffix(key, "_ms") && node.Tag == "!!int":
			v = "<ms>"
		case key == "txid" && v != "":
			v = n.placeholder("txid", v)
		default:
			v = n.replace(v)
		}
		if v != node.Value {
			node.Value, node.Tag, node.Style = v, "!!str", 0
		}
	}
}

// replace replaces every volatile token within s.
func (n *normalizer) replace(s string) string {
	if n.re == nil {
		pat := volatileTokens
		ids := make([]string, 0, len(n.marque))
		for id := range n.marque {
			ids = append(ids, regexp.QuoteMeta(id))
		}
		slices.Sort(ids)
		if len(ids) > 0 {
			pat += `|\b(?:` + strings.Join(ids, "|") + `)\b`
		}
		n.re = regexp.MustCompile(pat)
	}
	return n.re.ReplaceAllStringFunc(s, func(tok string) string {
		switch {
		case prefixedIDRE.MatchString(tok):
			return n.placeholder(tok[:3], tok)
		case sha256RE.MatchString(tok):
			return n.placeholder("sha256", tok)
		case timeRE.MatchString(tok):
			return "<time>"
		case signatureRE.MatchString(tok):
			return n.placeholder("signature", tok)
		case fingerprintRE.MatchString(tok):
			return n.placeholder("fingerprint", tok)
		case n.marque[tok]:
			return n.placeholder("marque", tok)
		}
		return tok
	})
}

func (n *normalizer) placeholder(class, v string) string {
	if p, ok := n.seen[v]; ok {
		return p
	}
	n.counts[class]++
	p := fmt.Sprintf("<%s-%d>", class, n.counts[class])
	n.seen[v] = p
	return p
}

// lineDiff shows where want and got first differ: the step of the block
// and the lines around it.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	step := "(the header)"
	for j := i; j >= 0; j-- {
		if j < len(w) && strings.HasPrefix(w[j], "step: ") {
			step = strings.TrimPrefix(w[j], "step: ")
			break
		}
	}
	from := max(0, i-3)
	return fmt.Sprintf("first difference at line %d, in the block of step %s:\n--- want\n%s\n+++ got\n%s", i+1, step,
		strings.Join(w[from:min(len(w), i+8)], "\n"), strings.Join(g[from:min(len(g), i+8)], "\n"))
}
