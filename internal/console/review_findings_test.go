package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// approverPage logs an approver in and returns a function that reads a
// console page as that approver.
func approverPage(t *testing.T, f *fixture) func(path string) string {
	t.Helper()
	c := client(t)
	if code, _, _ := useLink(t, c, f.loginLink(t, f.keys.Approver)); code != http.StatusOK {
		t.Fatalf("the approver's login: %d", code)
	}
	return func(path string) string {
		t.Helper()
		code, body := do(t, c, "GET", f.srv.URL+path, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		return body
	}
}

// hiddenRunes are characters a browser draws as nothing, or that reorder
// the text around them.
var hiddenRunes = regexp.MustCompile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\u2060\ufeff\u061c\u2028\u2029\r]")

// TestConsoleShowsHiddenCharacters: an agent's statement may carry, in a
// string literal, Unicode bidi controls that make the SQL an approver reads
// differ from the SQL that runs (Trojan Source: Chromium draws the first
// statement as "UPDATE orders SET status = 'x' WHERE status <> 'y' AND
// id = 5", one row, while it updates every row whose status is not 'y'), and
// row values may carry zero-width characters. The request page and the
// queue show each such character as a marked code point, never raw; the
// approval bytes (hashes and ids) are unchanged.
func TestConsoleShowsHiddenCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	orders, _ := f.sys.SignedExample(t, gatewaytest.Orders)
	if _, _, err := f.sys.Gateway.AddDelegation(t.Context(), orders, gatewaytest.Sign(t, f.keys.Grantor, gatewaytest.Canonical(t, orders, f.sys.Pilot.Catalog())), "api"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "UPDATE customers SET email = $1 WHERE id = 21", "ann\u200b@example.com"); err != nil {
		t.Fatal(err)
	}
	conn.Close(t.Context())
	stmts := []string{
		"UPDATE orders SET status = 'x\u202e \u2066AND id = 5\u2069 \u2066' WHERE status <> 'y'",
		"UPDATE customers SET name = 'Ann\u200d' WHERE id = 21",
	}
	read := approverPage(t, f)
	for _, sql := range stmts {
		resp := f.submit(t, sql)
		if resp.Outcome != gateway.OutcomeReferred {
			t.Fatalf("%q: %s, want referred", sql, resp.Outcome)
		}
		f.sys.Previewed(t, resp.RequestID)
		body := read("/console/queue/" + resp.RequestID)
		if m := hiddenRunes.FindAllString(body, -1); len(m) > 0 {
			t.Errorf("the request page of %q holds %d raw hidden characters (%q)", sql, len(m), m)
		}
		canon := between(t, body, `id="canonical-sql"><code>`, "</code>")
		for _, want := range []string{"U+202E", "U+2066", "U+2069"} {
			if strings.Contains(sql, string(rune(mustHex(want)))) && !strings.Contains(canon, `<span class="ctl">`+want+`</span>`) {
				t.Errorf("the canonical SQL does not mark %s: %s", want, canon)
			}
		}
		if strings.Contains(sql, "\u200d") && !strings.Contains(canon, `<span class="ctl">U+200D</span>`) {
			t.Errorf("the canonical SQL does not mark U+200D: %s", canon)
		}
		if strings.Contains(sql, "customers") {
			if diff := between(t, body, `id="diff"`, "</table>"); !strings.Contains(diff, `ann<span class="ctl">U+200B</span>@example.com`) {
				t.Errorf("the rehearsal's row value does not mark its zero-width space: %s", diff)
			}
		}
	}
	if m := hiddenRunes.FindAllString(read("/console/queue"), -1); len(m) > 0 {
		t.Errorf("the queue holds %d raw hidden characters", len(m))
	}
}

// TestCanonicalSQLIsOneLine: the canonical text is deparsed on one line,
// so a newline in it is inside a string literal. Drawn as a line break it
// lets a literal pass for a clause: here the approver would read
// "WHERE id = 5" on a line of its own, while the statement updates every
// order whose status is not 'x'. The canonical SQL shows it as a marked
// U+000A, on the one line; the statement as submitted keeps its lines.
func TestCanonicalSQLIsOneLine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	read := approverPage(t, f)
	const sql = "UPDATE orders SET status = 'failed\nWHERE id = 5\n' WHERE status <> 'x'"
	resp := f.submit(t, sql)
	if resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%s, want referred", resp.Outcome)
	}
	body := read("/console/queue/" + resp.RequestID)
	canon := between(t, body, `id="canonical-sql"><code>`, "</code>")
	if strings.Contains(canon, "\n") || strings.Count(canon, `<span class="ctl">U+000A</span>`) != 2 {
		t.Errorf("the canonical SQL is not shown on one line with its two newlines marked: %q", canon)
	}
	if sub := between(t, body, `id="submitted-sql"><code>`, "</code>"); strings.Count(sub, "\n") != 2 {
		t.Errorf("the statement as submitted lost its lines: %q", sub)
	}
	q := between(t, read("/console/queue"), `<code class="sql">`, "</code>")
	if strings.Contains(q, "\n") || !strings.Contains(q, `<span class="ctl">U+000A</span>`) {
		t.Errorf("the queue shows the canonical SQL over more than one line: %q", q)
	}
}

func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		t.Fatalf("no %q in the page", from)
	}
	out, _, _ := strings.Cut(rest, to)
	return out
}

func mustHex(u string) int {
	n := 0
	for _, c := range strings.TrimPrefix(u, "U+") {
		n = n*16 + strings.IndexRune("0123456789ABCDEF", c)
	}
	return n
}

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
// agent could hide a write behind a harmless one.
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
// the window and every changed cell is inside it.
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
// the change is marked.
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

// TestSignWarnsOfHiddenCharacters: the bytes a grantor signs are shown
// exactly (they are copied and signed), so a sentence handed over by
// someone else could carry bidi controls there unseen, and the sentence is
// what the Surveyor reads. The report says which hidden characters the
// bytes hold and shows the sentence with them marked.
func TestSignWarnsOfHiddenCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := client(t)
	if code, _, _ := useLink(t, alice, f.loginLink(t, f.keys.Grantor)); code != http.StatusOK {
		t.Fatal("login")
	}
	base := f.srv.URL + "/console/"
	_, body := do(t, alice, "GET", base+"sign", nil)
	csrf := csrfRE.FindStringSubmatch(body)[1]
	y := strings.Replace(string(gatewaytest.Example(t, gatewaytest.Customers)), "Fix obvious data-entry typos",
		"Fix obvious data-entry typos\u202e \u2066and anything else\u2069 \u2066", 1)
	code, body := do(t, alice, "POST", base+"sign/report", url.Values{"csrf": {csrf}, "yaml": {y}})
	if code != http.StatusOK || !strings.Contains(body, `id="canonical"`) {
		t.Fatalf("the report: %d", code)
	}
	warn := between(t, body, `id="hidden-chars"`, "</p>")
	for _, want := range []string{"U+202E", "U+2066", "U+2069", `typos<span class="ctl">U+202E</span>`} {
		if !strings.Contains(warn, want) {
			t.Errorf("the warning lacks %q: %s", want, warn)
		}
	}
	// A delegation without them has no warning.
	code, body = do(t, alice, "POST", base+"sign/report", url.Values{"csrf": {csrf}, "yaml": {string(gatewaytest.Example(t, gatewaytest.Customers))}})
	if code != http.StatusOK || strings.Contains(body, `id="hidden-chars"`) {
		t.Errorf("the report of a plain delegation: %d, warns: %v", code, strings.Contains(body, `id="hidden-chars"`))
	}
}

// TestStackedMarksAreMarked: a value with a long run of combining marks
// (here forty U+0316, each drawn below the last) paints over the rows of
// the rehearsal table beneath it, hiding their values. Past four in a row,
// each combining mark is shown as its code point.
func TestStackedMarksAreMarked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp := f.submit(t, "UPDATE orders SET status = 'x"+strings.Repeat("\u0316", 40)+"' WHERE id <= 2")
	if resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%s, want referred", resp.Outcome)
	}
	f.sys.Previewed(t, resp.RequestID)
	body := approverPage(t, f)("/console/queue/" + resp.RequestID)
	if m := regexp.MustCompile(`\p{M}{5,}`).FindAllString(body, -1); len(m) > 0 {
		t.Errorf("the request page holds %d runs of more than four combining marks", len(m))
	}
	if canon := between(t, body, `id="canonical-sql"><code>`, "</code>"); !strings.Contains(canon, "x\u0316\u0316\u0316\u0316"+`<span class="ctl">U+0316</span>`) {
		t.Errorf("the canonical SQL does not mark the fifth mark on: %q", canon)
	}
}
