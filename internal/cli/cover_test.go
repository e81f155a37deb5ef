package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/examples"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/cli"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
)

// coverTarget starts a throwaway server with the demo shop plus a refunds
// table (with a trigger and a cascading foreign key) and returns its DSN.
func coverTarget(t *testing.T) string {
	t.Helper()
	srv, err := pgtmp.Start(t.Context(), pgtmp.Config{StartTimeout: 3 * time.Minute})
	if errors.Is(err, pgtmp.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("pgtmp: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	dsn, err := srv.CreateDatabase(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, f := range []string{"shop.sql", "shop_data.sql"} {
		sql, err := examples.FS.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), string(sql)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := conn.Exec(t.Context(), `
CREATE TABLE public.refunds (
    id bigint PRIMARY KEY,
    order_id bigint NOT NULL REFERENCES public.orders(id) ON DELETE CASCADE,
    amount_cents bigint NOT NULL,
    status text NOT NULL,
    customer_consent_logged boolean NOT NULL DEFAULT false,
    reason text
);
CREATE FUNCTION public.touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER refunds_touch BEFORE UPDATE ON public.refunds FOR EACH ROW EXECUTE FUNCTION public.touch();
CREATE RULE refunds_notify AS ON DELETE TO public.refunds DO ALSO NOTIFY refunds;`); err != nil {
		t.Fatal(err)
	}
	return dsn
}

func compileJSON(t *testing.T, dir, file, dsn string, extra ...string) (*bound.Report, int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"delegation", "compile", filepath.Join(dir, file), "--target", dsn, "--json"}, extra...)
	code := cli.Do(args, strings.NewReader(""), &out, &errb)
	var rep bound.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%s: exit %d, not a JSON report: %v\n%s\n%s", file, code, err, out.String(), errb.String())
	}
	return &rep, code, out.String()
}

// TestCompileGates: delegation compile --target runs G0-G2 on every fence
// and check; the demo's fence over a column the grantee writes is grounded
// by the rule's own check; a Tier B fence the grantee can move rows into is
// unsignable; a check standing as evidence the grantee writes fails G1; a
// tautological fence fails G2; side effects are listed.
func TestCompileGates(t *testing.T) {
	t.Parallel()
	dsn := coverTarget(t)
	dir := t.TempDir()
	demo, _ := examples.FS.ReadFile("unstick-orders.yaml")
	files := map[string]string{
		"unstick.yaml": string(demo),
		"refunds.yaml": `sentence: Close refund requests, only where they are justified.
grantee: agent:demo
target: shop
expires: 2099-01-01T00:00:00Z
allow:
  - op: update
    table: public.refunds
    columns: [status, customer_consent_logged]
    fence: status = 'requested'
    check: customer_consent_logged = true
    max_rows: 1
    residual: only refunds that are justified
  - op: insert
    table: public.refunds
    columns: [id, order_id, amount_cents, status, reason]
    max_rows: 1
  - op: update
    table: public.orders
    columns: [updated_at]
    fence: id = id
    max_rows: 5
`,
		"other.yaml": `sentence: Mark orders as pending again.
grantee: agent:demo
target: shop
expires: 2099-01-01T00:00:00Z
allow:
  - op: update
    table: public.orders
    columns: [status]
    max_rows: 5
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	rep, code, raw := compileJSON(t, dir, "unstick.yaml", dsn)
	if code != 0 || !rep.Signable {
		t.Fatalf("the demo delegation is not signable against its target: %s", raw)
	}
	up := rep.Rules[1].Gates
	if up == nil || up.Fence == nil || up.Check == nil {
		t.Fatalf("no gates on the update rule: %s", raw)
	}
	if !up.Fence.G1.OK || !strings.Contains(up.Fence.G1.Why, "status IN ('failed', 'retrying')") || !strings.Contains(up.Fence.G1.Why, "keeps written rows out of the fence") {
		t.Errorf("demo fence G1 = %+v, want grounded by the rule's own check", up.Fence.G1)
	}
	if !up.Fence.G2.OK || !up.Check.G2.OK || !up.Check.G1.OK || !up.G0.OK {
		t.Errorf("demo gates: %+v", up)
	}
	if !strings.Contains(rep.GatesNote, "sample rows of public.orders") {
		t.Errorf("gates note %q", rep.GatesNote)
	}

	// Another active delegation lets the grantee set status freely: now a
	// write can move a row into the demo's fence.
	rep, _, raw = compileJSON(t, dir, "unstick.yaml", dsn, "--active", filepath.Join(dir, "other.yaml"))
	if g := rep.Rules[1].Gates.Fence.G1; g.OK || !strings.Contains(g.Why, "other.yaml") || !strings.Contains(g.Why, "status = 'pending'") {
		t.Errorf("with other.yaml active, fence G1 = %+v, want a move into the fence under other.yaml", g)
	}
	if !rep.Signable || !hasMessage(rep.Lints, "G1 fence") {
		t.Errorf("a Tier A fence failing G1 should be a lint, not a problem: %s", raw)
	}

	rep, code, raw = compileJSON(t, dir, "refunds.yaml", dsn)
	if code != 1 || rep.Signable {
		t.Fatalf("refunds.yaml is signable: %s", raw)
	}
	if !strings.Contains(rep.GatesNote, "public.refunds is empty: rows synthesized from its column types") {
		t.Errorf("gates note %q, want the empty refunds table's rows synthesized", rep.GatesNote)
	}
	rf := rep.Rules[0].Gates
	if rf.Fence.G1.OK || !strings.Contains(rf.Fence.G1.Why, "inserting a row with status = 'requested' puts it inside the fence") {
		t.Errorf("Tier B fence G1 = %+v", rf.Fence.G1)
	}
	if rf.Check.G0.OK || rf.Check.G1.OK || !strings.Contains(rf.Check.G1.Why, "evidence over customer_consent_logged") {
		t.Errorf("evidence check gates = %+v", rf.Check)
	}
	if !hasMessage(rep.Problems, "G1 fence") || !hasMessage(rep.Problems, "G1 check") {
		t.Errorf("problems %+v, want G1 fence and check", rep.Problems)
	}
	if g := rep.Rules[2].Gates.Fence.G2; g.OK || !strings.Contains(g.Why, "tautological") {
		t.Errorf("fence id = id G2 = %+v, want constant", g)
	}
	if rep.Rules[2].Gates.G2.OK {
		t.Error("the rule-level G2 passes with a failing fence")
	}
	kinds := map[string]bool{}
	for _, s := range rep.SideEffects {
		kinds[s.Kind+" "+s.Name] = true
	}
	if !kinds["trigger refunds_touch"] || !kinds["cascade refunds_order_id_fkey"] || !kinds["rule refunds_notify"] {
		t.Errorf("side effects %+v, want the trigger and the cascade", rep.SideEffects)
	}

	// sign against the target runs the gates too: what they make
	// unsignable is not signed.
	var kout, kerr bytes.Buffer
	if code := cli.Do([]string{"keygen", "--out", filepath.Join(dir, "alice"), "--name", "alice", "--targets", "shop"}, strings.NewReader(""), &kout, &kerr); code != 0 {
		t.Fatalf("keygen: %s", kerr.String())
	}
	kout.Reset()
	kerr.Reset()
	if code := cli.Do([]string{"delegation", "sign", filepath.Join(dir, "refunds.yaml"), "--target", dsn, "--key", filepath.Join(dir, "alice"), "--out", filepath.Join(dir, "refunds.yaml.sig")},
		strings.NewReader(""), &kout, &kerr); code == 0 || !strings.Contains(kerr.String(), "G1 fence") {
		t.Errorf("sign --target of a delegation the gates make unsignable: exit %d: %s", code, kerr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "refunds.yaml.sig")); err == nil {
		t.Error("a signature was written")
	}

	// The table output says the same.
	var out, errb bytes.Buffer
	if testing.Verbose() {
		cli.Do([]string{"delegation", "compile", filepath.Join(dir, "unstick.yaml"), "--target", dsn}, strings.NewReader(""), &out, &errb)
		t.Log(out.String())
		out.Reset()
	}
	cli.Do([]string{"delegation", "compile", filepath.Join(dir, "refunds.yaml"), "--target", dsn}, strings.NewReader(""), &out, &errb)
	for _, w := range []string{"G1 FAIL", "Side effects on tables in scope", "refunds_touch"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("table output lacks %q:\n%s", w, out.String())
		}
	}
}

func hasMessage(ps []bound.Problem, sub string) bool {
	for _, p := range ps {
		if strings.Contains(p.Message, sub) {
			return true
		}
	}
	return false
}

// TestDelegationDraft: delegation draft against a live target with two
// scripted providers (real SDK clients): the clauses that clear the gates
// compile, the consent clause the panel unanimously nominated is residual
// (its check is evidence the grantee writes), the draft is unsignable, and
// nothing is signed: the YAML is written, no signature file appears.
func TestDelegationDraft(t *testing.T) {
	t.Parallel()
	dsn := coverTarget(t)
	clauses := map[string]string{
		"only orders pending for more than a day": `{"op":"update","table":"public.orders","columns":["status","updated_at"],"kind":"fence","expr":"status = 'pending' and created_at < now() - interval '1 day'","max_rows":0,"expires":"","slots":["status","created_at"]}`,
		"mark them failed or retrying":            `{"op":"update","table":"public.orders","columns":["status","updated_at"],"kind":"check","expr":"status in ('failed', 'retrying')","max_rows":0,"expires":"","slots":["status"]}`,
		"at most 20 per statement":                `{"op":"update","table":"public.orders","columns":["status","updated_at"],"kind":"max_rows","expr":"","max_rows":20,"expires":"","slots":[]}`,
		"for the next 7 days":                     `{"op":"update","table":"public.orders","columns":["status"],"kind":"expires","expr":"","max_rows":0,"expires":"7d","slots":[]}`,
		"refund only with explicit consent":       `{"op":"update","table":"public.refunds","columns":["status","customer_consent_logged"],"kind":"check","expr":"customer_consent_logged","max_rows":0,"expires":"","slots":["customer_consent_logged"]}`,
	}
	order := []string{"only orders pending for more than a day", "mark them failed or retrying", "at most 20 per statement", "for the next 7 days", "refund only with explicit consent"}
	b := func(req llmtest.Request) llmtest.Response {
		switch {
		case strings.HasPrefix(req.System, "You split"):
			var cs []map[string]string
			for _, c := range order {
				cs = append(cs, map[string]string{"text": c})
			}
			out, _ := json.Marshal(map[string]any{"clauses": cs})
			return llmtest.Response{Text: string(out)}
		case strings.HasPrefix(req.System, "You decide"):
			return llmtest.Response{Text: `{"label":"DECIDABLE"}`}
		case strings.HasPrefix(req.System, "You write"):
			for c, el := range clauses {
				if strings.Contains(req.User, "Clause:\n<<<\n"+c+"\n") {
					return llmtest.Response{Text: el}
				}
			}
		}
		return llmtest.Response{Status: 400}
	}
	oa, an := llmtest.NewOpenAI(t, b), llmtest.NewAnthropic(t, b)
	dir := t.TempDir()
	cfg := "targets:\n  - name: shop\n    dsn: " + dsn + "\nsurveyor:\n  providers:\n" +
		"    - {name: oa, kind: openai, base_url: " + oa.URL + ", model: m1}\n" +
		"    - {name: an, kind: anthropic, base_url: " + an.URL + ", model: m2}\n"
	if err := os.WriteFile(filepath.Join(dir, "hm.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := cli.Do([]string{"delegation", "draft", strings.Join(order, ", "), "--target", "shop", "--grantee", "agent:demo",
		"--config", filepath.Join(dir, "hm.yaml"), "--out", filepath.Join(dir, "draft.yaml")}, strings.NewReader(""), &out, &errb)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (unsignable): %s\n%s", code, out.String(), errb.String())
	}
	if testing.Verbose() {
		t.Log(out.String())
	}
	for _, w := range []string{"[compiled] only orders pending", "[residual] refund only with explicit consent", "G1 FAIL", "oa/m1=DECIDABLE, an/m2=DECIDABLE; nominated", "a rule with a residual clause must have a fence", "Signable: no"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("draft output lacks %q:\n%s", w, out.String())
		}
	}
	yml, err := os.ReadFile(filepath.Join(dir, "draft.yaml"))
	if err != nil || !strings.Contains(string(yml), "residual: refund only with explicit consent") {
		t.Fatalf("draft.yaml: %v\n%s", err, yml)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".sig") {
			t.Errorf("a draft wrote a signature %s", e.Name())
		}
	}
	// The drafted file compiles as a hand-written delegation would.
	out.Reset()
	if code := cli.Do([]string{"delegation", "compile", filepath.Join(dir, "draft.yaml"), "--target", dsn}, strings.NewReader(""), &out, &errb); code != 1 {
		t.Errorf("compile of the draft exited %d:\n%s", code, out.String())
	}
}

// TestCoverLabelStudyCost: cover label runs two scripted providers (real
// SDK clients) over the gate corpus, with one provider failing on one
// clause (labelled JUDGMENT), draws a progress bar, and writes a label
// file that cover study reads; cover cost reads the study.
func TestCoverLabelStudyCost(t *testing.T) {
	t.Parallel()
	dec := func(req llmtest.Request) llmtest.Response {
		if strings.Contains(req.User, "Prioritise tickets fairly") {
			return llmtest.Response{Text: `{"label":"JUDGMENT"}`}
		}
		return llmtest.Response{Text: `{"label":"DECIDABLE"}`}
	}
	flaky := func(req llmtest.Request) llmtest.Response {
		if strings.Contains(req.User, "Be polite in resolutions") {
			return llmtest.Response{Text: `{"label":"JUDGMENT","why":"tone"}`}
		}
		return dec(req)
	}
	oa, an := llmtest.NewOpenAI(t, dec), llmtest.NewAnthropic(t, flaky)
	dir := t.TempDir()
	cfg := "surveyor:\n  providers:\n" +
		"    - {name: oa, kind: openai, base_url: " + oa.URL + ", model: m1}\n" +
		"    - {name: an, kind: anthropic, base_url: " + an.URL + ", model: m2}\n"
	if err := os.WriteFile(filepath.Join(dir, "hm.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	corpus, _ := filepath.Abs("../../testdata/cover/corpus.yaml")
	labels := filepath.Join(dir, "labels.csv")
	var out, errb bytes.Buffer
	if code := cli.Do([]string{"cover", "label", corpus, "--config", filepath.Join(dir, "hm.yaml"), "--out", labels}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("cover label exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "[##############################] 128/128 calls, 1 failed") || !strings.Contains(errb.String(), "1 of 128 calls failed") {
		t.Errorf("progress: %q", errb.String())
	}
	data, _ := os.ReadFile(labels)
	if !strings.HasPrefix(string(data), "predicate,corpus,model,label,gold,variant\nL01,corpus,oa/m1,DECIDABLE,DECIDABLE,\n") {
		t.Errorf("label file:\n%.300s", data)
	}
	out.Reset()
	if code := cli.Do([]string{"cover", "study", labels, "--json", "--svg", filepath.Join(dir, "k.svg")}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("cover study exit %d: %s", code, errb.String())
	}
	var s struct {
		Corpora []struct {
			N             int `json:"n"`
			ContestedRate struct {
				K int `json:"k"`
			} `json:"contested_rate"`
			Unanimous struct {
				Elimination struct {
					K int `json:"k"`
				} `json:"elimination"`
			} `json:"unanimous"`
		} `json:"corpora"`
	}
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || len(s.Corpora) != 1 {
		t.Fatalf("study json: %v\n%s", err, out.String())
	}
	// 64 clauses; both JUDGMENT on J11, only the failed one on J10: one contested, 62 unanimous.
	if c := s.Corpora[0]; c.N != 64 || c.ContestedRate.K != 1 || c.Unanimous.Elimination.K != 62 {
		t.Errorf("study: %+v", c)
	}
	study := filepath.Join(dir, "study.json")
	_ = os.WriteFile(study, out.Bytes(), 0o644)
	out.Reset()
	if code := cli.Do([]string{"cover", "cost", study, "--n", "1000", "--judge-cost", "0.01"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("cover cost exit %d: %s", code, errb.String())
	}
	for _, w := range []string{"judge everything", "unanimous", "oa/m1", "token cost", "exposure"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("cost output lacks %q:\n%s", w, out.String())
		}
	}
}
