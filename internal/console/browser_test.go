package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/harbormaster-dev/harbormaster/internal/testtools"
	"image"
	"image/color/palette"
	"image/draw"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/console"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/leadsman"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// needTool finds a command the test needs: missing, it fails the test
// under CI (CI=true) and skips it elsewhere.
func needTool(t *testing.T, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("none of %v is installed (Debian: apt-get install chromium; scripts/ensure-tools.sh does it)", names)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

const axeDir = "testdata/axe"

// axeSource installs axe-core from the committed package-lock.json unless
// node_modules already holds the version package.json pins, and returns it.
func axeSource(t *testing.T) string {
	t.Helper()
	testtools.NPMCI(t, axeDir, "axe-core")
	src, err := os.ReadFile(filepath.Join(axeDir, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// browser is one headless Chromium for the whole test, on one tab.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	axe  string
	shot string
	// axeChecked is set once axe has been seen to report a planted
	// violation.
	axeChecked bool
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	path := needTool(t, "chromium", "chromium-browser", "google-chrome")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelT)
	b := &browser{t: t, ctx: ctx, base: base}
	// The page's CSP would also stop an injected script; bypass it, so the
	// escaping tests prove the escaping alone (and axe can be injected).
	if _, err := chromedp.Call(ctx, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: true}); err != nil {
		t.Fatal(err)
	}
	b.shot = os.Getenv("HARBORMASTER_SCREENSHOTS")
	if b.shot == "" {
		b.shot = t.TempDir()
	}
	if err := os.MkdirAll(b.shot, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots go to %s", b.shot)
	return b
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) open(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base + path))
}

// submit clicks a button that submits a form and waits for the next page.
func (b *browser) submit(sel string) int64 {
	b.t.Helper()
	resp, err := chromedp.RunResponse(b.ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("submitting with %s: %v", sel, err)
	}
	return resp.Status
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (b *browser) set(sel, value string) {
	b.t.Helper()
	b.do(chromedp.SetValue(chromedp.CSS(sel), value))
}

func (b *browser) eval(js string) any {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](js))
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	return v
}

func (b *browser) h1() string { return strings.TrimSpace(b.text("h1")) }

// login opens the one-time link `harbormaster console login` prints.
func (b *browser) login(f *fixture, key *signing.PrivateKey) {
	b.t.Helper()
	b.do(chromedp.Navigate(f.loginLink(b.t, key)))
	// It asks whether to log in, naming the key's holder.
	if st := b.submit("#link-login"); st != 200 {
		b.t.Fatalf("the login confirmation: %d", st)
	}
	// The page it opens moves on to the console by itself.
	deadline := time.Now().Add(10 * time.Second)
	for {
		loc, err := chromedp.Run(b.ctx, chromedp.Location())
		if err == nil && strings.HasSuffix(loc, "/console/") {
			if h, err := chromedp.Run(b.ctx, chromedp.TextContent(chromedp.CSS("h1"))); err == nil && strings.TrimSpace(h) == "Delegations" {
				return
			}
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the login link did not lead to the console (at %s)", loc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// screenshot saves the viewport as name.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	shot, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shot, name+".png"), smallPNG(b.t, shot), 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// smallPNG re-encodes a screenshot with the web-safe palette, no
// dithering: a page of flat colours loses little and shrinks several-fold.
func smallPNG(t *testing.T, data []byte) []byte {
	t.Helper()
	src, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	dst := image.NewPaletted(src.Bounds(), palette.WebSafe)
	draw.Draw(dst, dst.Bounds(), src, src.Bounds().Min, draw.Src)
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, dst); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// audit runs axe-core on the page and fails on any serious or critical
// violation.
func (b *browser) audit(name string) {
	b.t.Helper()
	if b.axe == "" {
		b.axe = axeSource(b.t)
	}
	for _, s := range b.violations(name) {
		b.t.Errorf("axe on the %s page: %s", name, s)
	}
	if !b.axeChecked {
		// The audit can fail: an image without a text alternative is a
		// critical violation it must report.
		b.eval(`document.body.insertAdjacentHTML("beforeend", '<img src="data:," id="axe-control">'); true`)
		found := false
		for _, s := range b.violations(name + " with a planted violation") {
			found = found || strings.Contains(s, "image-alt")
		}
		if !found {
			b.t.Fatal("axe did not report an image without alt text: the audit cannot fail")
		}
		b.eval(`document.getElementById("axe-control").remove(); true`)
		b.axeChecked = true
	}
}

func (b *browser) violations(name string) []string {
	b.t.Helper()
	if ok := b.eval(`typeof axe !== "undefined"`); ok != true {
		b.eval(b.axe + "\ntrue")
	}
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`axe.run(document, {resultTypes: ["violations"]}).then(r =>
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
			.map(v => v.impact + " " + v.id + ": " + v.help + " at " + v.nodes.map(n => n.target.join(" ")).slice(0, 3).join(", ")))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("axe on %s: %v", name, err)
	}
	return v
}

// sshSign signs msg with the real ssh-keygen and the private key in pem.
func sshSign(t *testing.T, pem []byte, namespace string, msg []byte) []byte {
	t.Helper()
	keygen := needTool(t, "ssh-keygen")
	dir := t.TempDir()
	key, file := filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "act.json")
	if err := os.WriteFile(key, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, msg, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(keygen, "-Y", "sign", "-n", namespace, "-f", key, file).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	sig, err := os.ReadFile(file + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func queryRow(t *testing.T, dsn, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql, args...).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConsoleInBrowser drives the console in headless Chromium through the
// work of each role, on one system and one browser.
func TestConsoleInBrowser(t *testing.T) {
	f := newFixture(t)
	b := newBrowser(t, f.srv.URL)
	orders, _ := f.sys.SignedExample(t, gatewaytest.Orders)
	if _, _, err := f.sys.Gateway.AddDelegation(t.Context(), orders, gatewaytest.Sign(t, f.keys.Grantor, gatewaytest.Canonical(t, orders, f.sys.Pilot.Catalog())), "api"); err != nil {
		t.Fatal(err)
	}

	// Alice logs in on the login page itself: the challenge shown, signed,
	// the signature pasted.
	b.open("/console/login")
	b.audit("login")
	b.screenshot("login")
	ch := strings.TrimSpace(b.text("#challenge"))
	sig, err := f.keys.Grantor.Sign(signing.NamespaceSession, []byte(ch+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	b.set("#signature", string(sig))
	b.submit("main form button")
	if h := b.h1(); h != "Delegations" {
		t.Fatalf("after pasting the login signature: %q", h)
	}

	var tierB *gateway.Delegation
	t.Run("grantor signs a Tier B delegation through the ceremony", func(t *testing.T) {
		// A prepared logbook: what the agent sent before, all referred
		// under the Tier A delegation alone.
		for _, sql := range []string{"SELECT id, name FROM customers WHERE region = 'EU' AND id = 1",
			"UPDATE customers SET name = 'Pieter van Dijk' WHERE id = 16", "DELETE FROM customers WHERE id = 2"} {
			if resp := f.submit(t, sql); resp.Outcome != gateway.OutcomeReferred {
				t.Fatalf("%q: %s before the Tier B delegation", sql, resp.Outcome)
			}
		}
		y := gatewaytest.Example(t, gatewaytest.Customers)
		b.open("/console/sign")
		b.set("#yaml", string(y))
		b.submit("form[action='/console/sign/report'] button")
		d, _ := bound.Parse(y, "x.yaml")
		bd, _ := bound.Compile(d, f.sys.Pilot.Catalog(), bound.Options{})
		want := bound.FallbackAuthority(bd)
		if got := strings.TrimSpace(b.text("#fallback")); got != want {
			t.Fatalf("fallback sentence %q, want %q", got, want)
		}
		// It is the first thing after the page's heading, and large.
		if first := b.eval(`document.querySelector("main h1").nextElementSibling.querySelector("#fallback") !== null`); first != true {
			t.Errorf("the fallback sentence is not the first thing on the report")
		}
		if size := b.eval(`parseFloat(getComputedStyle(document.querySelector("#fallback")).fontSize) >= 1.5 * parseFloat(getComputedStyle(document.body).fontSize)`); size != true {
			t.Errorf("the fallback sentence is not large")
		}
		if tier := b.text("#tier"); tier != "Tier B surveyed" {
			t.Errorf("tier %q", tier)
		}
		if cmd := b.text("#command"); !strings.Contains(cmd, "ssh-keygen -Y sign -n harbormaster-delegation") {
			t.Errorf("command %q", cmd)
		}
		// The backtest over the prepared logbook: the read would now run,
		// the typo fix be surveyed, the delete still be referred.
		if got := b.text("#backtest-totals"); !strings.Contains(got, "3 statement(s)") {
			t.Errorf("backtest totals: %q", got)
		}
		if got := b.eval(`[...document.querySelectorAll("#backtest-totals tbody tr:nth-child(2) td")].map(td => td.textContent).join(",")`); got != "1,1,1,0,0" {
			t.Errorf("backtest with the delegation: %v, want 1 fast path, 1 surveyed, 1 referred", got)
		}
		if got := b.text("#backtest-changed"); !strings.HasPrefix(got, "2 would run with less human involvement") {
			t.Errorf("backtest: %q", got)
		}
		if got := b.text("#backtest-rows"); !strings.Contains(got, "Pieter van Dijk") {
			t.Errorf("backtest rows lack the statements: %q", got)
		}
		b.audit("signing report")
		b.screenshot("ceremony")
		canonical := b.text("#canonical")
		sig := gatewaytest.Sign(t, f.keys.Grantor, []byte(canonical))
		b.set("#signature", string(sig))
		b.submit("form[action='/console/sign/submit'] button")
		if tier := b.text(".tier-big"); tier != "Tier B surveyed" {
			t.Fatalf("the delegation page shows tier %q", tier)
		}
		if got := strings.TrimSpace(b.text(".fallback-text")); got != want {
			t.Errorf("the delegation page's fallback %q", got)
		}
		for _, d := range f.sys.Gateway.Registry().Delegations("") {
			if d.Bound.Tier() == "B" {
				tierB = d
			}
		}
		if tierB == nil || string(tierB.Canonical) != canonical {
			t.Fatal("the signed delegation is not the one shown")
		}
		// The logbook entry is the API's: same kind, source, fields.
		es, err := f.sys.Logbook.Find(t.Context(), logbook.Query{Kind: logbook.KindDelegation, SubjectKey: "delegation", SubjectValue: tierB.ID})
		if err != nil || len(es) != 1 {
			t.Fatalf("delegation entries %d %v", len(es), err)
		}
		var pl map[string]any
		_ = json.Unmarshal(es[0].Payload, &pl)
		if pl["source"] != "api" || pl["signer"] != "alice" || pl["signature"] != string(sig) || pl["canonical"] != canonical {
			t.Errorf("delegation entry %v", pl)
		}
	})
	if tierB == nil {
		t.FailNow()
	}

	t.Run("approver approves a referral with ssh-keygen and the row changes", func(t *testing.T) {
		resp := f.submit(t, "UPDATE orders SET total_cents = 4242 WHERE id = 1")
		if resp.Outcome != gateway.OutcomeReferred {
			t.Fatalf("the statement %s, want referred", resp.Outcome)
		}
		f.sys.Previewed(t, resp.RequestID)
		b.login(f, f.keys.Approver)
		b.open("/console/queue")
		b.audit("queue")
		b.screenshot("queue")
		b.open("/console/queue/" + resp.RequestID)
		if n := b.eval(`document.querySelectorAll(".advisory").length`); n != float64(0) {
			t.Errorf("an advisory slot is shown with no note")
		}
		if n := b.eval(`document.querySelectorAll("#diff td.changed").length`); n != float64(1) {
			t.Errorf("%v changed cells in the rehearsal diff, want 1 (total_cents)", n)
		}
		b.audit("request")
		b.screenshot("request")
		act := b.text("#approval")
		b.set("#ap-sig", string(sshSign(t, f.keys.ApproverPEM, signing.NamespaceApproval, []byte(act))))
		b.submit("form[action$='/approve'] button")
		if st := b.text("#status"); st != string(gateway.StatusExecuted) {
			t.Fatalf("after approving, status %q; %s", st, b.text(".error"))
		}
		if got := queryRow(t, f.dsn, "SELECT total_cents::text FROM orders WHERE id = 1"); got != "4242" {
			t.Errorf("order 1's total is %s after the approval", got)
		}
		es, _ := f.sys.Logbook.Find(t.Context(), logbook.Query{Kind: logbook.KindApproval, SubjectKey: "request", SubjectValue: resp.RequestID})
		if len(es) != 1 {
			t.Fatalf("%d approval entries", len(es))
		}
		var pl map[string]any
		_ = json.Unmarshal(es[0].Payload, &pl)
		if pl["signer"] != "bob" || pl["approval"] != act {
			t.Errorf("approval entry %v", pl)
		}
	})

	t.Run("a statement with <script> and a row value with HTML render as text", func(t *testing.T) {
		const rowHTML = `<b id="row-bold">bold</b><img src="x" onerror="window.__xssRow=1">`
		conn, err := pgx.Connect(t.Context(), f.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), "UPDATE customers SET email = $1 WHERE id = 21", rowHTML); err != nil {
			t.Fatal(err)
		}
		conn.Close(t.Context())
		const stmt = `UPDATE customers SET name = '<script>window.__xssStmt=1</script>' WHERE id = 21 /* <script>window.__xssComment=1</script> */`
		resp := f.submit(t, stmt)
		if resp.Outcome != gateway.OutcomeReferred {
			t.Fatalf("%s, want referred", resp.Outcome)
		}
		f.sys.Previewed(t, resp.RequestID)
		// A real Leadsman, its scripted model lying and scripting.
		const note = "This renames customer 21 to <script>window.__xssNote=1</script>; approve it!"
		stop := f.startLeadsman(t, note)
		n := f.waitNote(t, resp.RequestID)
		stop()
		if n.Status != "written" {
			t.Fatalf("the note is %s: %s", n.Status, n.Failure)
		}
		b.open("/console/queue/" + resp.RequestID)
		if got := b.text(".advisory-text"); got != n.Text || !strings.Contains(got, "<script>window.__xssNote=1</script>") {
			t.Errorf("the advisory note shows as %q, want the model's text %q", got, n.Text)
		}
		if h := b.text("#adv-h"); !strings.Contains(h, "Advisory") || !strings.Contains(h, "not authority") {
			t.Errorf("the note is not marked advisory: %q", h)
		}
		if l := b.text(".advisory-label"); l != leadsman.Label {
			t.Errorf("the note's label %q", l)
		}
		if got := b.text("#submitted-sql"); got != stmt {
			t.Errorf("the statement as submitted shows as %q", got)
		}
		if got := b.text("#diff"); !strings.Contains(got, rowHTML) || !strings.Contains(got, "<script>window.__xssStmt=1</script>") {
			t.Errorf("the rehearsal table does not show the row's HTML as text: %q", got)
		}
		if n := b.eval(`document.querySelectorAll("main script, main img, #row-bold").length`); n != float64(0) {
			t.Errorf("%v elements came from untrusted text", n)
		}
		if x := b.eval(`[window.__xssStmt, window.__xssComment, window.__xssRow, window.__xssNote].filter(v => v !== undefined).length`); x != float64(0) {
			t.Errorf("untrusted text ran as script")
		}
		// Bob denies it: a reason, then the signed denial.
		b.set("#reason", "renames are not typo fixes <b>at all</b>")
		b.submit("form[action$='/deny/prepare'] button")
		denial := b.text("#denial")
		b.set("#dn-sig", string(sshSign(t, f.keys.ApproverPEM, signing.NamespaceDenial, []byte(denial))))
		b.submit("form[action$='/deny'] button")
		if st := b.text("#status"); st != string(gateway.StatusDenied) {
			t.Errorf("after denying, status %q: %s", st, b.text(".error"))
		}
		// The queue, the logbook and the delegation page show it as text too.
		for _, p := range []string{"/console/queue", "/console/logbook", "/console/"} {
			b.open(p)
			if n := b.eval(`document.querySelectorAll("main script, main img, #row-bold").length`); n != float64(0) {
				t.Errorf("%s: %v elements came from untrusted text", p, n)
			}
		}
	})

	// signAct signs the act a delegation page prepared with the form
	// holding sel, and submits it.
	signAct := func(t *testing.T, key *signing.PrivateKey, ns, sel string) {
		t.Helper()
		b.submit(sel)
		act := b.text("#pending-act")
		sig, err := key.Sign(ns, []byte(act))
		if err != nil {
			t.Fatal(err)
		}
		b.set("#act-sig", string(sig))
		b.submit("form[action$='/act'] button")
		if n, e := b.eval(`(document.querySelector(".notice") || {}).textContent || ""`), b.eval(`(document.querySelector(".error") || {}).textContent || ""`); !strings.Contains(fmt.Sprint(n), "Recorded") {
			t.Fatalf("the act was not recorded: %v", e)
		}
	}

	t.Run("the humans open the surveyed path in the console", func(t *testing.T) {
		// Bob, a reviewer, marks the residual clause auditable.
		b.login(f, f.keys.Approver)
		b.open("/console/delegations/" + tierB.ID)
		b.set("#au-note-2", "the name before and after are in the evidence")
		signAct(t, f.keys.Approver, signing.NamespaceReview, "form:has(#au-note-2) button")
		// Alice enables the Surveyor for it and switches Tier B on.
		b.login(f, f.keys.Grantor)
		b.open("/console/delegations/" + tierB.ID)
		signAct(t, f.keys.Grantor, signing.NamespaceEnable, "#en-prepare-2")
		for _, row := range []string{"1", "2"} { // the deployment, then the target
			b.open("/console/switches")
			b.submit("tbody tr:nth-child(" + row + ") form button")
			b.submit("#confirm")
		}
		if resp := f.submit(t, "UPDATE customers SET name = 'John Smith' WHERE id = 3"); resp.Outcome != gateway.OutcomeExecuted || resp.Path != marque.PathSurveyed {
			t.Fatalf("the typo fix %s on %q, want executed on the surveyed path: %q", resp.Outcome, resp.Path, resp.Reasons)
		}
		for kind, want := range map[logbook.Kind]int{logbook.KindAuditable: 1, logbook.KindSurveyorEnable: 1, logbook.KindSwitch: 2} {
			if es, _ := f.sys.Logbook.Find(t.Context(), logbook.Query{Kind: kind}); len(es) != want {
				t.Errorf("%d %s entries, want %d", len(es), kind, want)
			}
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("operator turns Tier B off and the fast path refers within a poll", func(t *testing.T) {
		b.login(f, f.keys.Grantor)
		b.open("/console/switches")
		b.audit("switches")
		b.submit("tbody tr:nth-child(2) form button") // the target's row
		if h := b.text("#cf-h"); !strings.Contains(h, "switch Tier B off for target shop") {
			t.Fatalf("confirmation step: %q", h)
		}
		b.screenshot("switches")
		b.submit("#confirm")
		if n := b.text(".notice"); !strings.Contains(n, "switched off for target shop") {
			t.Fatalf("after confirming: %q", n)
		}
		if by := b.text("tbody tr:nth-child(2) td:nth-child(3)"); by != "alice" {
			t.Errorf("changed by %q", by)
		}
		if h := b.text("#switch-history tbody tr:first-child"); !strings.Contains(h, "target:shop") || !strings.Contains(h, "off") || !strings.Contains(h, "alice") {
			t.Errorf("the latest change in the history: %q", h)
		}
		// Every node sees it within one poll interval; this one polled at once.
		deadline := time.Now().Add(f.sys.Switches.Interval() + 200*time.Millisecond)
		for {
			resp := f.submit(t, "UPDATE customers SET name = 'Maria Garcia' WHERE id = 7")
			if resp.Outcome == gateway.OutcomeReferred && strings.Contains(strings.Join(resp.Reasons, " "), "switched off for target shop") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a poll after the switch the statement %s: %q", resp.Outcome, resp.Reasons)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got := queryRow(t, f.dsn, "SELECT name FROM customers WHERE id = 7"); got != "Mraia Garcia" {
			t.Errorf("row 7 changed with Tier B off: %q", got)
		}
		// And back on, the same way.
		b.submit("tbody tr:nth-child(2) form button")
		b.submit("#confirm")
		if n := b.text(".notice"); !strings.Contains(n, "switched on for target shop") {
			t.Fatalf("switching back on: %q", n)
		}
	})

	t.Run("reviewer marks a sampled judgment wrong and the delegation shows suspended", func(t *testing.T) {
		b.login(f, f.keys.Approver)
		b.open("/console/audit")
		b.audit("audit queue")
		b.screenshot("audit")
		if age := b.text("#audit-age"); !strings.Contains(age, "Audit-queue age") {
			t.Errorf("audit-queue age %q", age)
		}
		// Past its alert threshold the audit-queue age is red and says so:
		// the same system under a console whose threshold is a millisecond.
		strict, err := console.New(console.Config{Gateway: f.sys.Gateway, Signers: f.keys.Signers, Logbook: f.sys.Logbook,
			Key: console.SessionKey(f.keys.ControlPlane), Auditor: f.sys.Auditor, AuditAlert: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		strict.Register(mux)
		srv := httptest.NewServer(mux)
		defer srv.Close()
		req, _ := http.NewRequest("GET", srv.URL+"/console/audit", nil)
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: strict.SessionCookie(f.keys.Approver.PublicKey(), time.Now().Add(time.Minute))})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(page), `<p class="figure alert" id="audit-age">`) || !strings.Contains(string(page), "past the 1ms alert threshold") {
			t.Errorf("past the threshold the audit-queue age is not marked: %d", resp.StatusCode)
		}
		if strings.Contains(b.text("#audit-age"), "past the") {
			t.Errorf("under the 24h threshold the age is marked overdue")
		}
		b.submit("tbody tr:first-child a") // a link: RunResponse waits for it too
		if ev := b.text("main"); !strings.Contains(ev, "only obvious data-entry typos in the name") || !strings.Contains(ev, "John Smith") || !strings.Contains(ev, "certify") {
			t.Errorf("the evidence set lacks the residual clause, the statement or the framings")
		}
		b.audit("audit")
		b.do(chromedp.Click(chromedp.CSS("#v-wrong")))
		b.set("#note", "not a typo: a <i>rename</i>")
		b.submit("form[action$='/prepare'] button")
		act := b.text("#review-act")
		sig, err := f.keys.Approver.Sign(signing.NamespaceReview, []byte(act))
		if err != nil {
			t.Fatal(err)
		}
		b.set("#rv-sig", string(sig))
		b.submit("form[action$='/review'] button")
		if n := b.text(".notice"); !strings.Contains(n, "suspended") {
			t.Fatalf("after the review: %q / %q", n, b.text("main"))
		}
		b.open("/console/")
		if row := b.text("tbody tr:first-child"); !strings.Contains(row, "Tier B surveyed") || !strings.Contains(row, "fast path suspended") {
			t.Errorf("the delegations list row: %q", row)
		}
		b.audit("delegations")
		b.screenshot("delegations")
		b.open("/console/delegations/" + tierB.ID)
		if m := b.text("main"); !strings.Contains(m, "fast path suspended") {
			t.Errorf("the delegation page does not show the suspension")
		}
		b.audit("delegation")
		b.screenshot("delegation")
		if resp := f.submit(t, "UPDATE customers SET name = 'Anna Schmidt' WHERE id = 12"); resp.Outcome != gateway.OutcomeReferred {
			t.Errorf("a surveyed statement after the suspension %s", resp.Outcome)
		}
	})

	t.Run("acts on a delegation: reinstate, revoke", func(t *testing.T) {
		sign := func(key *signing.PrivateKey, ns, form string) { t.Helper(); signAct(t, key, ns, form+" button") }
		// Alice reinstates the suspended fast path; the typo fix runs again.
		b.login(f, f.keys.Grantor)
		b.open("/console/delegations/" + tierB.ID)
		b.set("#re-note", "the prompt bundle was fixed")
		sign(f.keys.Grantor, signing.NamespaceEnable, "form:has(#re-note)")
		if m := b.text("main"); strings.Contains(m, "fast path suspended") {
			t.Errorf("still shown suspended after the reinstatement")
		}
		if resp := f.submit(t, "UPDATE customers SET name = 'Anna Schmidt' WHERE id = 12"); resp.Outcome != gateway.OutcomeExecuted || resp.Path != marque.PathSurveyed {
			t.Errorf("after the reinstatement the typo fix %s on %q: %q", resp.Outcome, resp.Path, resp.Reasons)
		}
		// And revokes the Tier A delegation: at once, on every path.
		var tierA *gateway.Delegation
		for _, d := range f.sys.Gateway.Registry().Delegations("") {
			if d.Bound.Tier() == "A" {
				tierA = d
			}
		}
		b.open("/console/delegations/" + tierA.ID)
		b.set("#rv-reason", "the orders job is retired")
		sign(f.keys.Grantor, signing.NamespaceRevocation, "form:has(#rv-reason)")
		b.open("/console/")
		if row := b.text("tbody tr:nth-child(2)"); !strings.Contains(row, "Tier A compiled") || !strings.Contains(row, "revoked") {
			t.Errorf("the revoked delegation's row: %q", row)
		}
		if resp := f.submit(t, "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3"); resp.Outcome != gateway.OutcomeReferred {
			t.Errorf("a statement under the revoked delegation %s", resp.Outcome)
		}
	})

	t.Run("logbook and dashboard", func(t *testing.T) {
		b.open("/console/logbook")
		b.submit("form[action='/console/logbook/verify'] button")
		if v := b.text("#verify-result"); !strings.Contains(v, "Intact.") {
			t.Errorf("verification: %q", v)
		}
		b.audit("logbook")
		b.screenshot("logbook")
		b.open("/console/logbook?kind=approval")
		if n := b.eval(`document.querySelectorAll("table.logbook tbody tr").length`); n != float64(1) {
			t.Errorf("%v approval entries listed, want 1", n)
		}
		b.open("/console/dashboard")
		if n := b.eval(`document.querySelectorAll("main svg rect").length`); n == float64(0) {
			t.Errorf("the dashboard draws no bars")
		}
		b.audit("dashboard")
		b.screenshot("dashboard")
	})

	t.Run("no CSRF token, an expired session, no session: refused", func(t *testing.T) {
		b.login(f, f.keys.Grantor)
		b.open("/console/switches")
		if on := b.eval(`document.cookie.includes("` + console.CookieName + `")`); on != false {
			t.Errorf("the session cookie is readable from script")
		}
		b.eval(`document.querySelectorAll("input[name=csrf]").forEach(e => e.remove()); true`)
		if code := b.submit("tbody tr:nth-child(2) form button"); code != 403 || !strings.Contains(b.text(".error"), "CSRF") {
			t.Errorf("a form without its CSRF token: HTTP %d", code)
		}
		expired := f.console.SessionCookie(f.keys.Grantor.PublicKey(), time.Now().Add(-time.Second))
		if _, err := chromedp.Call(b.ctx, network.SetCookie, network.SetCookieParams{Name: console.CookieName, Value: expired, URL: f.srv.URL + console.Prefix, Path: console.Prefix}); err != nil {
			t.Fatal(err)
		}
		b.open("/console/queue")
		if h, e := b.h1(), b.text(".error"); h != "Log in" || !strings.Contains(e, "expired") {
			t.Errorf("an expired session: %q, %q", h, e)
		}
		// The expired cookie was cleared: now there is no session at all.
		b.open("/console/audit")
		if h, e := b.h1(), b.text(".error"); h != "Log in" || !strings.Contains(e, "Log in with your SSH key") {
			t.Errorf("no session: %q, %q", h, e)
		}
	})
	f.sys.Verify(t)
}
