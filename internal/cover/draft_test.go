package cover

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

const draftSchema = `
CREATE TABLE public.orders (id bigint NOT NULL, customer_id bigint NOT NULL, status text NOT NULL,
  total_cents bigint NOT NULL, created_at timestamp with time zone NOT NULL, updated_at timestamp with time zone NOT NULL);
CREATE TABLE public.refunds (id bigint NOT NULL, order_id bigint NOT NULL, amount_cents bigint NOT NULL,
  status text NOT NULL, customer_consent_logged boolean NOT NULL, reason text);`

const draftSentence = "Unstick orders pending for more than a day by marking them failed or retrying, at most 20 per statement, for the next 7 days, and refund them only with the customer's explicit consent."

// draftClauses are the scripted decomposition, each with the element the
// scripted synthesizer answers.
var draftClauses = []struct{ text, element string }{
	{"only orders pending for more than a day", `{"op":"update","table":"public.orders","columns":["status","updated_at"],"kind":"fence","expr":"status = 'pending' and created_at < now() - interval '1 day'","max_rows":0,"expires":"","slots":["status","created_at"]}`},
	{"mark them failed or retrying", `{"op":"update","table":"public.orders","columns":["status","updated_at"],"kind":"check","expr":"status in ('failed', 'retrying')","max_rows":0,"expires":"","slots":["status"]}`},
	{"at most 20 per statement", `{"op":"update","table":"public.orders","columns":["status","updated_at"],"kind":"max_rows","expr":"","max_rows":20,"expires":"","slots":[]}`},
	{"for the next 7 days", `{"op":"update","table":"public.orders","columns":["status"],"kind":"expires","expr":"","max_rows":0,"expires":"7d","slots":[]}`},
	{"refund only with the customer's explicit consent", `{"op":"update","table":"public.refunds","columns":["status","customer_consent_logged"],"kind":"check","expr":"customer_consent_logged = true","max_rows":0,"expires":"","slots":["customer_consent_logged"]}`},
}

// scripted answers as a CoVer model: the decomposition, a label per clause
// (labels[clause]; default DECIDABLE, the unanimously wrong panel) and the
// element per clause (elements overrides draftClauses).
func scripted(labels map[string]string, elements map[string]string) llmtest.Behaviour {
	return func(req llmtest.Request) llmtest.Response {
		switch {
		case strings.HasPrefix(req.System, "You split"):
			var cs []map[string]string
			for _, c := range draftClauses {
				cs = append(cs, map[string]string{"text": c.text})
			}
			b, _ := json.Marshal(map[string]any{"clauses": cs})
			return llmtest.Response{Text: string(b)}
		case strings.HasPrefix(req.System, "You decide"):
			for _, c := range draftClauses {
				if strings.Contains(req.User, "Clause:\n<<<\n"+c.text+"\n") {
					l := labels[c.text]
					if l == "" {
						l = Decidable
					}
					if l == "HTTP500" {
						return llmtest.Response{Status: 500}
					}
					return llmtest.Response{Text: `{"label":"` + l + `"}`}
				}
			}
		case strings.HasPrefix(req.System, "You write"):
			for _, c := range draftClauses {
				if strings.Contains(req.User, "Clause:\n<<<\n"+c.text+"\n") {
					if e, ok := elements[c.text]; ok {
						return llmtest.Response{Text: e}
					}
					return llmtest.Response{Text: c.element}
				}
			}
		}
		return llmtest.Response{Text: "I cannot help with that."}
	}
}

func asker(t *testing.T, kind, url, name string) llm.Asker {
	t.Helper()
	a, err := llm.NewAsker(llm.ProviderConfig{Name: name, Kind: kind, BaseURL: url, Model: name + "-model", Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func draftEnv(t *testing.T) *Env {
	t.Helper()
	cat, err := sqlcheck.ParseSchemaDDL(draftSchema, []string{"public"})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Catalog: cat, Now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
}

func clauseByText(t *testing.T, r *DraftReport, text string) ClauseReport {
	t.Helper()
	for _, c := range r.Clauses {
		if c.Text == text {
			return c
		}
	}
	t.Fatalf("no clause %q in the report", text)
	return ClauseReport{}
}

// TestDraftUnanimouslyWrongPanel: real SDK clients against scripted
// OpenAI and Anthropic servers. The panel calls every clause DECIDABLE,
// including the consent clause (the paper's agent-rule failure); the gates
// catch it: its check is an identity on a column the grantee writes (G0,
// G1), so it is residual, on a rule without a fence, and the draft is
// unsignable. The four honest clauses compile. Nothing is signed.
func TestDraftUnanimouslyWrongPanel(t *testing.T) {
	t.Parallel()
	oa := llmtest.NewOpenAI(t, scripted(nil, nil))
	an := llmtest.NewAnthropic(t, scripted(nil, nil))
	p := Panel{Decomposer: asker(t, llm.KindOpenAI, oa.URL, "oa"), Synthesizer: asker(t, llm.KindOpenAI, oa.URL, "oa"),
		Labelers: []llm.Asker{asker(t, llm.KindOpenAI, oa.URL, "oa"), asker(t, llm.KindAnthropic, an.URL, "an")}}
	r := Draft(context.Background(), DraftConfig{Sentence: draftSentence, Grantee: "agent:ops-bot", Target: "shop"}, p, draftEnv(t))
	if len(r.Clauses) != len(draftClauses) {
		t.Fatalf("%d clauses: %+v", len(r.Clauses), r)
	}
	for _, c := range draftClauses[:4] {
		cr := clauseByText(t, r, c.text)
		if !cr.Nominated || cr.Route != RouteCompiled || cr.Gates == nil || !cr.Gates.Admitted {
			t.Errorf("clause %q: route %s, %s", c.text, cr.Route, cr.Why)
		}
	}
	consent := clauseByText(t, r, draftClauses[4].text)
	if !consent.Nominated {
		t.Fatal("the scripted panel was meant to nominate the consent clause unanimously")
	}
	if consent.Route != RouteResidual || consent.Gates.G0.OK || consent.Gates.G1.OK || !strings.Contains(consent.Gates.G1.Why, "customer_consent_logged") {
		t.Errorf("the gates did not catch what unanimity admitted: %+v", consent)
	}
	if r.Signable || r.Compile == nil || r.Compile.Signable {
		t.Errorf("a draft whose residual rule has no fence is signable: %+v", r.Problems)
	}
	found := false
	for _, p := range r.Compile.Problems {
		found = found || strings.Contains(p.Message, "residual clause must have a fence")
	}
	if !found {
		t.Errorf("compile problems %+v, want the residual rule without a fence", r.Compile.Problems)
	}
	for _, w := range []string{"fence: status = 'pending' AND created_at < (now() - '1 day'::interval)", "check: status IN ('failed', 'retrying')", "max_rows: 20", "expires: 2026-12-08T12:00:00Z", "residual: refund only with the customer's explicit consent"} {
		if !strings.Contains(r.YAML, w) && !strings.Contains(r.YAML, strings.ReplaceAll(w, "'", "''")) {
			// the YAML may quote
			if !strings.Contains(r.YAML, strings.SplitN(w, ": ", 2)[1]) {
				t.Errorf("drafted YAML lacks %q:\n%s", w, r.YAML)
			}
		}
	}
	if r.Compile.DelegationID != "" || strings.Contains(r.YAML, "signature") {
		t.Error("a draft carries a delegation id or a signature")
	}
	// Labels went out at temperature 0 with the label schema.
	last := an.LastRequest()
	if temp, ok := last.Body["temperature"]; !ok || fmt.Sprint(temp) != "0" {
		t.Errorf("anthropic label request temperature = %v, want 0", last.Body["temperature"])
	}
	rt := map[string]Router{}
	for _, x := range r.Routers {
		rt[x.Name] = x
	}
	wantRate(t, "unanimous elimination", rt["unanimous"].Elimination, 5, 5)
	wantRate(t, "unanimous+gates elimination", rt["unanimous+gates"].Elimination, 4, 5)
}

// TestDraftFailsClosed: a provider failure is a JUDGMENT label (not a
// nomination, though the gates may still admit the clause); a malformed or
// incomplete element is residual; a failed decomposition leaves the whole
// sentence residual with no rule, unsignable.
func TestDraftFailsClosed(t *testing.T) {
	t.Parallel()
	labels := map[string]string{draftClauses[1].text: "HTTP500"}
	elements := map[string]string{
		draftClauses[2].text: `{"op":"update","table":"public.orders","columns":["status"],"kind":"max_rows","expr":"","max_rows":20,"expires":"","slots":[],"confidence":"high"}`,
		draftClauses[3].text: `{"op":"update","table":"public.orders","columns":["status"],"kind":"expires","expr":"","max_rows":0,"slots":[]}`,
		draftClauses[0].text: `{"op":"update","table":"public.orders","columns":["status"],"kind":"fence","expr":"state = 'pending'","max_rows":0,"expires":"","slots":["state"]}`,
	}
	oa := llmtest.NewOpenAI(t, scripted(labels, elements))
	an := llmtest.NewAnthropic(t, scripted(nil, elements))
	p := Panel{Decomposer: asker(t, llm.KindOpenAI, oa.URL, "oa"), Synthesizer: asker(t, llm.KindOpenAI, oa.URL, "oa"),
		Labelers: []llm.Asker{asker(t, llm.KindOpenAI, oa.URL, "oa"), asker(t, llm.KindAnthropic, an.URL, "an")}}
	r := Draft(context.Background(), DraftConfig{Sentence: draftSentence, Grantee: "agent:ops-bot", Target: "shop"}, p, draftEnv(t))
	check := clauseByText(t, r, draftClauses[1].text)
	if check.Nominated || check.Labels[0].Label != Judgment || !strings.Contains(check.Labels[0].Failure, "http error") {
		t.Errorf("a provider failure did not become JUDGMENT: %+v", check.Labels)
	}
	if check.Route != RouteCompiled || !strings.Contains(check.Why, "did not nominate") {
		t.Errorf("an unnominated clause whose check clears the gates: %s %s", check.Route, check.Why)
	}
	for _, c := range draftClauses[2:4] {
		cr := clauseByText(t, r, c.text)
		if cr.Route != RouteResidual || cr.SynthesisFailure == "" {
			t.Errorf("clause %q with a malformed element: %s %s", c.text, cr.Route, cr.Why)
		}
	}
	fence := clauseByText(t, r, draftClauses[0].text)
	if fence.Route != RouteResidual || !strings.Contains(fence.Why, "does not compile") {
		t.Errorf("a fence reading a missing field: %s %s", fence.Route, fence.Why)
	}
	if r.Signable {
		t.Error("signable")
	}

	broken := llmtest.NewOpenAI(t, func(req llmtest.Request) llmtest.Response {
		if strings.HasPrefix(req.System, "You split") {
			return llmtest.Response{Text: `{"clauses":[{"text":"x"}],"note":"extra"}`}
		}
		return scripted(nil, nil)(req)
	})
	p.Decomposer = asker(t, llm.KindOpenAI, broken.URL, "broken")
	r = Draft(context.Background(), DraftConfig{Sentence: draftSentence, Grantee: "agent:ops-bot", Target: "shop"}, p, draftEnv(t))
	if r.DecomposeFailure == "" || len(r.Clauses) != 1 || r.Clauses[0].Route != RouteResidual || r.Signable || len(r.Problems) == 0 {
		t.Errorf("a failed decomposition: %+v", r)
	}
}
