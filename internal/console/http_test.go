package console_test

import (
	"bytes"
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/cli"
	"github.com/harbormaster-dev/harbormaster/internal/console"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

// client is a browser-like HTTP client with a cookie jar that does not
// follow redirects.
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func do(t *testing.T, c *http.Client, method, u string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="(c|s|csrf)" value="([^"]*)">`)

// useLink opens a login link as a person does: the link, then its
// confirmation form. It returns the last answer and the cookies it set.
func useLink(t *testing.T, c *http.Client, link string) (int, string, []*http.Cookie) {
	t.Helper()
	code, body := do(t, c, "GET", link, nil)
	if code != http.StatusOK {
		return code, body, nil
	}
	form := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), "POST", u.Scheme+"://"+u.Host+console.Prefix+"login/link", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Cookies()
}

// TestLoginLinkCSRF: opening a login link (a GET any web page can make a
// browser send) logs no one in; it asks, naming the key's holder. The
// confirmation's POST needs the cookie that GET set in this browser, so a
// hostile page cannot log a visitor into its own session (login CSRF).
func TestLoginLinkCSRF(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := f.srv.URL + console.Prefix
	link := f.loginLink(t, f.keys.Grantor)
	victim := client(t)
	code, body := do(t, victim, "GET", link, nil)
	if code != http.StatusOK || !strings.Contains(body, "alice") || !strings.Contains(body, `action="/console/login/link"`) {
		t.Fatalf("opening the link: %d, want 200 and a confirmation naming alice", code)
	}
	if code, _ := do(t, victim, "GET", base+"queue", nil); code != http.StatusUnauthorized {
		t.Fatalf("after only opening the link, the queue: %d, want 401 (not logged in)", code)
	}
	form := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	// A cross-site POST: the SameSite=Strict cookie is not sent.
	if code, _ := do(t, client(t), "POST", base+"login/link", form); code != http.StatusForbidden {
		t.Errorf("the confirmation without this browser's cookie: %d, want 403", code)
	}
	wrong := url.Values{"c": form["c"], "s": form["s"], "csrf": {strings.Repeat("A", len(form.Get("csrf")))}}
	if code, _ := do(t, victim, "POST", base+"login/link", wrong); code != http.StatusForbidden {
		t.Errorf("the confirmation with a wrong token: %d, want 403", code)
	}
	if code, _ := do(t, victim, "GET", base+"queue", nil); code != http.StatusUnauthorized {
		t.Fatalf("after refused confirmations, the queue: %d, want 401", code)
	}
	// The person's own confirmation logs in, once.
	if code, _ := do(t, victim, "POST", base+"login/link", form); code != http.StatusOK {
		t.Fatalf("the confirmation: %d", code)
	}
	if code, body := do(t, victim, "GET", base+"queue", nil); code != http.StatusOK || !strings.Contains(body, "alice") {
		t.Errorf("after the confirmation, the queue: %d", code)
	}
}

// TestSessionsAndCSRF: without a session, with an expired or forged one,
// or without the CSRF token, the console refuses, and nothing changes; a
// login link works once; the cookie is HttpOnly, SameSite=Strict, with an
// expiry.
func TestSessionsAndCSRF(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := f.srv.URL + console.Prefix
	switchState := func() bool { // the target's own switch
		for _, st := range f.sys.Switches.Snapshot() {
			if st.Scope == switches.TargetScope(gatewaytest.Target) {
				return st.On
			}
		}
		return false
	}
	flip := url.Values{"target": {gatewaytest.Target}, "on": {"true"}, "confirm": {"yes"}}

	// No session: every page is the login page, every form refused.
	anon := client(t)
	for _, p := range []string{"", "queue", "audit", "switches", "logbook", "dashboard", "sign", "delegations/del_x"} {
		if code, body := do(t, anon, "GET", base+p, nil); code != http.StatusUnauthorized || !strings.Contains(body, "ssh-keygen -Y sign -n harbormaster-session") {
			t.Errorf("GET /console/%s without a session: %d, want 401 and the login page", p, code)
		}
	}
	if code, _ := do(t, anon, "POST", base+"switches", flip); code != http.StatusUnauthorized || switchState() {
		t.Errorf("POST switches without a session: %d, switch on %v", code, switchState())
	}

	// Log in with the one-time link: the cookie's attributes.
	alice := client(t)
	link := f.loginLink(t, f.keys.Grantor)
	code, _, cookies := useLink(t, alice, link)
	var ck *http.Cookie
	for _, c := range cookies {
		if c.Name == console.CookieName {
			ck = c
		}
	}
	if code != http.StatusOK || ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Expires.IsZero() || ck.MaxAge <= 0 || ck.Path != console.Prefix {
		t.Fatalf("login link: %d, cookie %+v", code, ck)
	}
	if ck.Secure {
		t.Errorf("over plain HTTP the cookie is Secure, so a browser would drop it on this loopback server")
	}
	// The link is single-use.
	if code, body, _ := useLink(t, client(t), link); code != http.StatusUnauthorized || !strings.Contains(body, "used already") {
		t.Errorf("the login link a second time: %d, want 401 (used already)", code)
	}

	code, body := do(t, alice, "GET", base+"switches", nil)
	m := csrfRE.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		t.Fatalf("switches page with a session: %d", code)
	}
	csrf := m[1]
	// Without the CSRF token, or with another's, refused and nothing changes.
	if code, _ := do(t, alice, "POST", base+"switches", flip); code != http.StatusForbidden || switchState() {
		t.Errorf("POST without the CSRF token: %d, switch on %v; want 403, off", code, switchState())
	}
	bad := url.Values{"target": {gatewaytest.Target}, "on": {"true"}, "confirm": {"yes"}, "csrf": {strings.Repeat("A", len(csrf))}}
	if code, _ := do(t, alice, "POST", base+"switches", bad); code != http.StatusForbidden || switchState() {
		t.Errorf("POST with a wrong CSRF token: %d", code)
	}
	// Without the confirmation step, refused too.
	noConfirm := url.Values{"target": {gatewaytest.Target}, "on": {"true"}, "csrf": {csrf}}
	if code, _ := do(t, alice, "POST", base+"switches", noConfirm); code != http.StatusBadRequest {
		t.Errorf("POST without confirmation: %d, want 400", code)
	}
	// With both, the switch flips, by alice.
	flip.Set("csrf", csrf)
	if code, _ := do(t, alice, "POST", base+"switches", flip); code != http.StatusOK {
		t.Fatalf("POST with the CSRF token: %d", code)
	}
	found := false
	for _, st := range f.sys.Switches.Snapshot() {
		if st.Scope == switches.TargetScope(gatewaytest.Target) && st.On && st.UpdatedBy == "alice" {
			found = true
		}
	}
	if !found {
		t.Errorf("the target switch is not on by alice: %+v", f.sys.Switches.Snapshot())
	}
	// Bob holds no harbormaster-switch: refused even with his own token.
	bob := client(t)
	if code, _, _ := useLink(t, bob, f.loginLink(t, f.keys.Approver)); code != http.StatusOK {
		t.Fatalf("bob's login: %d", code)
	}
	_, body = do(t, bob, "GET", base+"switches", nil)
	bm := csrfRE.FindStringSubmatch(body)
	if bm == nil {
		t.Fatal("no CSRF token on bob's page")
	}
	off := url.Values{"target": {gatewaytest.Target}, "on": {"false"}, "confirm": {"yes"}, "csrf": {bm[1]}}
	if code, _ := do(t, bob, "POST", base+"switches", off); code != http.StatusForbidden || !switchState() {
		t.Errorf("bob flipping a switch: %d, want 403", code)
	}
	// Alice's token is not bob's.
	off.Set("csrf", csrf)
	if code, _ := do(t, bob, "POST", base+"switches", off); code != http.StatusForbidden {
		t.Errorf("bob with alice's CSRF token: %d, want 403", code)
	}

	// An expired session, correctly MACed, is refused; so is a forged one.
	u, _ := url.Parse(base)
	for name, val := range map[string]string{
		"expired":            f.console.SessionCookie(f.keys.Grantor.PublicKey(), time.Now().Add(-time.Minute)),
		"forged":             strings.Replace(f.console.SessionCookie(f.keys.Grantor.PublicKey(), time.Now().Add(time.Hour)), ".", ".A", 1),
		"another deployment": mustConsole(t, f).SessionCookie(f.keys.Grantor.PublicKey(), time.Now().Add(time.Hour)),
		"a stranger's key":   f.console.SessionCookie(f.keys.Stranger.PublicKey(), time.Now().Add(time.Hour)),
	} {
		c := client(t)
		c.Jar.SetCookies(u, []*http.Cookie{{Name: console.CookieName, Value: val, Path: console.Prefix}})
		if code, _ := do(t, c, "GET", base+"queue", nil); code != http.StatusUnauthorized {
			t.Errorf("%s session: GET queue %d, want 401", name, code)
		}
		if code, _ := do(t, c, "POST", base+"switches", off); code != http.StatusUnauthorized || !switchState() {
			t.Errorf("%s session: POST switches %d, want 401", name, code)
		}
	}
	if code, body := do(t, alice, "GET", base+"queue", nil); code != http.StatusOK || strings.Contains(body, "expired") {
		t.Errorf("alice's live session: %d", code)
	}
}

// mustConsole is a console of another deployment (another control-plane
// key) over the same system.
func mustConsole(t *testing.T, f *fixture) *console.Console {
	t.Helper()
	other := gatewaytest.NewKeys(t)
	c, err := console.New(console.Config{Gateway: f.sys.Gateway, Signers: f.keys.Signers, Logbook: f.sys.Logbook, Key: console.SessionKey(other.ControlPlane)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUnsignableNeverPastTheReport: a Tier B rule without a fence cannot
// be signed: the report shows why and offers no signature form, and a
// signed submission straight to the submit endpoint is refused.
func TestUnsignableNeverPastTheReport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := f.srv.URL + console.Prefix
	alice := client(t)
	if code, _, _ := useLink(t, alice, f.loginLink(t, f.keys.Grantor)); code != http.StatusOK {
		t.Fatal("login")
	}
	_, body := do(t, alice, "GET", base+"sign", nil)
	csrf := csrfRE.FindStringSubmatch(body)[1]
	y := strings.Replace(string(gatewaytest.Example(t, gatewaytest.Customers)), "    fence: region = 'EU'\n    max_rows: 1\n", "    max_rows: 1\n", 1)
	code, body := do(t, alice, "POST", base+"sign/report", url.Values{"csrf": {csrf}, "yaml": {y}})
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "cannot be signed") || strings.Contains(body, `action="/console/sign/submit"`) {
		t.Fatalf("report of an unsignable delegation: %d; has the signature form: %v", code, strings.Contains(body, "sign/submit"))
	}
	// Even a signature over what the grantor thinks the bytes are gets
	// nowhere: the submission recompiles and refuses.
	sig, _ := f.keys.Grantor.Sign("harbormaster-delegation", []byte(y))
	code, _ = do(t, alice, "POST", base+"sign/submit", url.Values{"csrf": {csrf}, "yaml": {y}, "signature": {string(sig)}})
	if code != http.StatusUnprocessableEntity || len(f.sys.Gateway.Registry().Delegations("")) != 0 {
		t.Errorf("submitting an unsignable delegation: %d, %d delegations", code, len(f.sys.Gateway.Registry().Delegations("")))
	}
}

// TestConsoleLoginCommand: `harbormaster console login` prints, on its
// last line, a link that logs the key's holder in, once.
func TestConsoleLoginCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := filepath.Join(t.TempDir(), "bob")
	if err := os.WriteFile(key, f.keys.ApproverPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := cli.Do([]string{"console", "login", "--server", f.srv.URL, "--key", key}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("console login: exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	link := lines[len(lines)-1]
	if !strings.HasPrefix(link, f.srv.URL+console.Prefix+"login/link?") {
		t.Fatalf("the last line is not a login link: %q", link)
	}
	bob := client(t)
	if code, _, _ := useLink(t, bob, link); code != http.StatusOK {
		t.Fatalf("the link: %d", code)
	}
	if code, body := do(t, bob, "GET", f.srv.URL+console.Prefix+"queue", nil); code != http.StatusOK || !strings.Contains(body, "bob") || !strings.Contains(body, "approver, reviewer") {
		t.Errorf("after the link, the queue: %d (roles shown: %v)", code, strings.Contains(body, "approver, reviewer"))
	}
	if code, _, _ := useLink(t, client(t), link); code != http.StatusUnauthorized {
		t.Errorf("the link a second time: %d, want 401", code)
	}
	// A key the signers file does not list gets no link that works.
	spriv, _, err := signing.GenerateEd25519("mallory@test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, spriv, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := cli.Do([]string{"console", "login", "--server", f.srv.URL, "--key", key}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("console login with a stranger's key: exit %d", code)
	}
	lines = strings.Split(strings.TrimSpace(out.String()), "\n")
	if code, body := do(t, client(t), "GET", lines[len(lines)-1], nil); code != http.StatusUnauthorized || !strings.Contains(body, "not a login by an allowed key") {
		t.Errorf("a stranger's link: %d", code)
	}
}

// TestSessionsAcrossNodes: a session one node issued is good on another
// node of the deployment (same control-plane key, no shared session
// table), and a login link used on one is used up on the other.
func TestSessionsAcrossNodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other, err := console.New(console.Config{Gateway: f.sys.OtherNode(t), Signers: f.keys.Signers, Logbook: f.sys.Logbook,
		Key: console.SessionKey(f.keys.ControlPlane), Claim: func(ctx context.Context, digest string, until time.Time) (bool, error) {
			return f.sys.Store.ClaimRequest(ctx, digest, time.Now().UnixNano(), until.UnixNano())
		}, Claimed: func(ctx context.Context, digest string) (bool, error) {
			return f.sys.Store.Claimed(ctx, digest, time.Now().UnixNano())
		}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	other.Register(mux)
	srv2 := httptest.NewServer(mux)
	defer srv2.Close()

	link := f.loginLink(t, f.keys.Grantor)
	alice := client(t)
	if code, _, _ := useLink(t, alice, link); code != http.StatusOK {
		t.Fatalf("login on node 1: %d", code)
	}
	// The same link on node 2: used up.
	if code, body, _ := useLink(t, client(t), strings.Replace(link, f.srv.URL, srv2.URL, 1)); code != http.StatusUnauthorized || !strings.Contains(body, "used already") {
		t.Errorf("the used link on node 2: %d", code)
	}
	// Alice's cookie, presented to node 2.
	u1, _ := url.Parse(f.srv.URL + console.Prefix)
	u2, _ := url.Parse(srv2.URL + console.Prefix)
	alice.Jar.SetCookies(u2, alice.Jar.Cookies(u1))
	code, body := do(t, alice, "GET", srv2.URL+console.Prefix+"switches", nil)
	if code != http.StatusOK || !strings.Contains(body, "alice") {
		t.Fatalf("node 1's session on node 2: %d", code)
	}
	// Logged out on node 1, the session is over on both nodes, even for
	// whoever kept a copy of its cookie.
	old := alice.Jar.Cookies(u1)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on the page")
	}
	if code, _ := do(t, alice, "POST", f.srv.URL+console.Prefix+"logout", url.Values{"csrf": {m[1]}}); code != http.StatusOK {
		t.Fatalf("logout: %d", code)
	}
	for _, u := range []*url.URL{u1, u2} {
		thief := client(t)
		thief.Jar.SetCookies(u, old)
		if code, body := do(t, thief, "GET", u.String()+"switches", nil); code != http.StatusUnauthorized || !strings.Contains(body, "logged out") {
			t.Errorf("a logged-out session's cookie on %s: %d, want 401 (logged out)", u.Host, code)
		}
	}
}

// TestCorrelatedPanelMark: a Tier B delegation one of whose judgments had
// a correlated panel is marked so in the list, and only then.
func TestCorrelatedPanelMark(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ds := f.sys.AddExamples(t)
	d := ds[gatewaytest.Customers]
	alice := client(t)
	if code, _, _ := useLink(t, alice, f.loginLink(t, f.keys.Grantor)); code != http.StatusOK {
		t.Fatal("login")
	}
	const mark = "correlated panel"
	if _, body := do(t, alice, "GET", f.srv.URL+console.Prefix, nil); !strings.Contains(body, d.ID) || strings.Contains(body, mark) {
		t.Fatalf("the list does not show the delegation, or marks it correlated without a judgment:\n%s", body)
	}
	judge := func(correlated bool) {
		if _, err := f.sys.Logbook.Append(t.Context(), logbook.Record{Kind: logbook.KindJudgment,
			Subjects: map[string]string{"judgment": "jdg_test", "delegation": d.ID},
			Payload:  map[string]any{"correlated": correlated, "jurors": []any{}}}); err != nil {
			t.Fatal(err)
		}
	}
	judge(false)
	if _, body := do(t, alice, "GET", f.srv.URL+console.Prefix, nil); strings.Contains(body, mark) {
		t.Fatal("a delegation whose panels were diverse is marked correlated")
	}
	judge(true)
	_, body := do(t, alice, "GET", f.srv.URL+console.Prefix, nil)
	if strings.Count(body, mark) != 1 {
		t.Fatalf("the Tier B delegation with a correlated judgment is not marked once (%d marks)", strings.Count(body, mark))
	}
	if _, page := do(t, alice, "GET", f.srv.URL+console.Prefix+"delegations/"+d.ID, nil); !strings.Contains(page, mark) {
		t.Error("the delegation's page does not show the correlated panel")
	}
}
