package console_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// diffRows reads the rehearsal table of a request page: each row's label
// (its row header) and its cells' text, markup dropped.
func diffRows(t *testing.T, body string) [][]string {
	t.Helper()
	tbody := between(t, between(t, body, `id="diff"`, "</table>"), "<tbody>", "</tbody>")
	tag := regexp.MustCompile(`<[^>]*>`)
	var out [][]string
	for _, tr := range regexp.MustCompile(`(?s)<tr[^>]*>(.*?)</tr>`).FindAllStringSubmatch(tbody, -1) {
		var row []string
		for _, td := range regexp.MustCompile(`(?s)<t[hd][^>]*>(.*?)</t[hd]>`).FindAllStringSubmatch(tr[1], -1) {
			row = append(row, strings.TrimSpace(tag.ReplaceAllString(td[1], "")))
		}
		out = append(out, row)
	}
	return out
}

// TestRehearsalDiffShowsEveryImage: the approver's before/after table is
// the evidence an approval signs (its digest), so it must show every image
// and say which side each row is. An UPDATE that changes a row's id (here
// the referred "SET id = id + 1000") used to show four plain rows, none
// marked changed, as if nothing changed; and where two rows share an id
// (a table without a key), one after image was never shown at all, so an
// agent could hide a write behind a harmless one. Found in review 1.
func TestRehearsalDiffShowsEveryImage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	orders, _ := f.sys.SignedExample(t, gatewaytest.Orders)
	if _, _, err := f.sys.Gateway.AddDelegation(t.Context(), orders, gatewaytest.Sign(t, f.keys.Grantor, gatewaytest.Canonical(t, orders, f.sys.Pilot.Catalog())), "api"); err != nil {
		t.Fatal(err)
	}
	read := approverPage(t, f)
	rehearsed := func(sql string) [][]string {
		t.Helper()
		resp := f.submit(t, sql)
		if resp.Outcome != gateway.OutcomeReferred {
			t.Fatalf("%q: %s, want referred", sql, resp.Outcome)
		}
		if v := f.sys.Previewed(t, resp.RequestID); v.PreviewSHA256 == "" {
			t.Fatalf("%q was not rehearsed: %s", sql, v.Detail)
		}
		return diffRows(t, read("/console/queue/"+resp.RequestID))
	}

	rows := rehearsed("UPDATE orders SET id = id + 1000 WHERE id <= 2")
	labels := map[string]string{}
	for _, r := range rows {
		if len(r) < 2 {
			t.Fatalf("a diff row %q", r)
		}
		labels[r[1]] = r[0]
	}
	for id, want := range map[string]string{"1": "before only", "2": "before only", "1001": "after only", "1002": "after only"} {
		if labels[id] != want {
			t.Errorf("the row of id %s is labelled %q, want %q (rows %q)", id, labels[id], want, rows)
		}
	}

	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), `CREATE TABLE public.ledger (id bigint NOT NULL, amount bigint NOT NULL);
		INSERT INTO public.ledger VALUES (1, 7), (1, 5)`); err != nil {
		t.Fatal(err)
	}
	if err := f.sys.Pilot.RefreshCatalog(t.Context()); err != nil {
		t.Fatal(err)
	}
	rows = rehearsed("UPDATE ledger SET amount = CASE WHEN amount = 5 THEN 6 ELSE 99999 END WHERE id = 1")
	text := fmtRows(rows)
	if !strings.Contains(text, "99999") || !strings.Contains(text, "6") {
		t.Errorf("the rehearsal table of an update giving 99999 and 6 shows %q", rows)
	}
	if len(rows) != 4 {
		t.Errorf("%d rows for two before and two after images of one shared id, want each on its own: %q", len(rows), rows)
	}
}

func fmtRows(rows [][]string) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(strings.Join(r, "|") + "\n")
	}
	return b.String()
}

// TestLongValuesStayInView: a value without a break opportunity (here a
// 4,000-character status the agent writes) used to widen the rehearsal
// table and the queue past the window, so the changed cells and the rows'
// labels it pushed aside were out of view unless the approver scrolled
// sideways. In a real browser at 1280 pixels, neither page is wider than
// the window and every changed cell is inside it. Found in review 1.
func TestLongValuesStayInView(t *testing.T) {
	f := newFixture(t)
	b := newBrowser(t, f.srv.URL)
	orders, _ := f.sys.SignedExample(t, gatewaytest.Orders)
	if _, _, err := f.sys.Gateway.AddDelegation(t.Context(), orders, gatewaytest.Sign(t, f.keys.Grantor, gatewaytest.Canonical(t, orders, f.sys.Pilot.Catalog())), "api"); err != nil {
		t.Fatal(err)
	}
	resp := f.submit(t, "UPDATE orders SET status = '"+strings.Repeat("x", 4000)+"', total_cents = 1 WHERE id = 1")
	if resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%s, want referred", resp.Outcome)
	}
	f.sys.Previewed(t, resp.RequestID)
	b.login(f, f.keys.Approver)
	for _, path := range []string{"/console/queue/" + resp.RequestID, "/console/queue"} {
		b.open(path)
		b.screenshot("long-values" + strings.ReplaceAll(strings.TrimPrefix(path, "/console/queue"), "/", "-"))
		if wide := b.eval(`document.documentElement.scrollWidth > window.innerWidth`); wide != false {
			t.Errorf("%s is wider than the window (%v px of %v)", path, b.eval(`document.documentElement.scrollWidth`), b.eval(`window.innerWidth`))
		}
	}
	b.open("/console/queue/" + resp.RequestID)
	if out := b.eval(`[...document.querySelectorAll("#diff td.changed")].filter(td => td.getBoundingClientRect().right > window.innerWidth).length`); out != float64(0) {
		t.Errorf("%v changed cells of the rehearsal lie outside the window", out)
	}
}

// TestRehearsalNumbersExact: the rehearsal report holds an integer beyond
// 2^53 exactly (9007199254740993), but the approver's table read it as a
// float and showed 9007199254740992: a value other than the one the
// approval's rehearsal digest covers. It is shown as the report has it.
// Found in review 1.
func TestRehearsalNumbersExact(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp := f.submit(t, "UPDATE orders SET total_cents = 9007199254740993 WHERE id = 1")
	if resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%s, want referred", resp.Outcome)
	}
	if v := f.sys.Previewed(t, resp.RequestID); !strings.Contains(string(v.Preview), `"total_cents":9007199254740993`) {
		t.Fatalf("the rehearsal report does not hold the exact value: %s", v.Preview)
	}
	diff := between(t, approverPage(t, f)("/console/queue/"+resp.RequestID), `id="diff"`, "</table>")
	if !strings.Contains(diff, "</span>9007199254740993</ins>") {
		t.Errorf("the rehearsal table does not show the exact value written: %s", diff)
	}
}

// TestRehearsalNullIsNotText: SQL NULL and the text 'NULL' were both shown
// as NULL, so an update from NULL to the string 'NULL' (which passes an IS
// NOT NULL check) showed as an unchanged cell. NULL is marked apart, and
// the change is marked. Found in review 1.
func TestRehearsalNullIsNotText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "UPDATE customers SET email = NULL WHERE id = 3"); err != nil {
		t.Fatal(err)
	}
	conn.Close(t.Context())
	resp := f.submit(t, "UPDATE customers SET email = 'NULL' WHERE id = 3")
	if resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%s, want referred", resp.Outcome)
	}
	f.sys.Previewed(t, resp.RequestID)
	diff := between(t, approverPage(t, f)("/console/queue/"+resp.RequestID), `id="diff"`, "</table>")
	if !strings.Contains(diff, `<del><span class="sr">before: </span><span class="null">NULL</span></del> <ins><span class="sr">after: </span>NULL</ins>`) {
		t.Errorf("the change from NULL to the text NULL is not shown as one: %s", diff)
	}
}
