package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

type loginData struct {
	Challenge string
	CSRF      string
	Command   string
}

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	ch, nonce := c.newChallenge()
	// The login form is bound to this browser: the nonce is in a cookie
	// only this site sends, and the form's token is MACed over it.
	http.SetCookie(w, &http.Cookie{Name: loginCookieName, Value: nonce, Path: Prefix + "login", MaxAge: int(c.cfg.ChallengeTTL.Seconds()),
		HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
	d := loginData{Challenge: ch, CSRF: b64.EncodeToString(c.mac("login", nonce)[:24]),
		Command: "echo '" + ch + "' | ssh-keygen -Y sign -n harbormaster-session -f ~/.ssh/id_ed25519"}
	p := page{Title: "Log in", Data: d}
	if status >= 400 {
		p.Error = msg
	} else {
		p.Notice = msg
	}
	c.render(w, r, status, "login", nil, p)
}

func (c *Console) getLogin(w http.ResponseWriter, r *http.Request) {
	if s, err := c.session(r); err == nil && s != nil {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	c.renderLogin(w, r, http.StatusOK, "")
}

func (c *Console) postLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.renderLogin(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	ch := r.PostFormValue("challenge")
	nonce, _, err := c.checkChallenge(ch)
	if err != nil {
		c.renderLogin(w, r, http.StatusUnauthorized, err.Error())
		return
	}
	ck, cerr := r.Cookie(loginCookieName)
	tok := r.PostFormValue("csrf")
	if cerr != nil || ck.Value != nonce || !constantEqual(tok, b64.EncodeToString(c.mac("login", nonce)[:24])) {
		c.renderLogin(w, r, http.StatusForbidden, "The login form has no valid CSRF token: reload the page and sign the new challenge.")
		return
	}
	pub, _, err := c.login(r, ch, []byte(normalizeSig(r.PostFormValue("signature"))))
	if err != nil {
		c.renderLogin(w, r, http.StatusUnauthorized, err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookieName, Value: "", Path: Prefix + "login", MaxAge: -1})
	c.issueSession(w, r, pub)
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// getChallenge serves a fresh challenge as text, for `harbormaster
// console login`.
func (c *Console) getChallenge(w http.ResponseWriter, r *http.Request) {
	ch, _ := c.newChallenge()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(ch + "\n"))
}

// LoginLink is the one-time login URL for a signed challenge: what
// `harbormaster console login` prints.
func LoginLink(server, challenge string, armoredSig []byte) string {
	q := url.Values{"c": {strings.TrimSpace(challenge)}, "s": {b64.EncodeToString(armoredSig)}}
	return strings.TrimRight(server, "/") + Prefix + "login/link?" + q.Encode()
}

// The login link is opened by a GET, which any web page can make a
// browser send: it only checks the link and asks, naming whose key signed
// it, whether to log in. The login itself is the form's POST, bound to
// this browser by a SameSite=Strict cookie the GET set, so a hostile page
// cannot log a visitor into a session of its choosing (login CSRF,
// session fixation) with a link signed by its own key.

type loginLinkData struct {
	Name        string
	Fingerprint string
	Challenge   string
	Signature   string // as the link carries it (base64url)
	CSRF        string
}

const loginLinkCookieName = "harbormaster_login_link"

func (c *Console) getLoginLink(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sig, err := b64.DecodeString(q.Get("s"))
	if err != nil {
		c.renderLogin(w, r, http.StatusBadRequest, "The login link is malformed.")
		return
	}
	pub, name, _, err := c.verifyLogin(q.Get("c"), sig)
	if err != nil {
		c.renderLogin(w, r, http.StatusUnauthorized, err.Error())
		return
	}
	nonce := randomID()
	http.SetCookie(w, &http.Cookie{Name: loginLinkCookieName, Value: nonce, Path: Prefix + "login/link", MaxAge: int(c.cfg.ChallengeTTL.Seconds()),
		HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
	c.render(w, r, http.StatusOK, "loginlink", nil, page{Title: "Log in", Data: loginLinkData{Name: name, Fingerprint: signing.Fingerprint(pub),
		Challenge: q.Get("c"), Signature: q.Get("s"), CSRF: c.loginLinkToken(nonce, q.Get("c"))}})
}

func (c *Console) loginLinkToken(nonce, challenge string) string {
	return b64.EncodeToString(c.mac("login-link", nonce, strings.TrimSpace(challenge))[:24])
}

func (c *Console) postLoginLink(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.renderLogin(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	ch := r.PostFormValue("c")
	ck, cerr := r.Cookie(loginLinkCookieName)
	if cerr != nil || !constantEqual(r.PostFormValue("csrf"), c.loginLinkToken(ck.Value, ch)) {
		c.renderLogin(w, r, http.StatusForbidden, "The login confirmation has no valid CSRF token: open the login link again.")
		return
	}
	sig, err := b64.DecodeString(r.PostFormValue("s"))
	if err != nil {
		c.renderLogin(w, r, http.StatusBadRequest, "The login link is malformed.")
		return
	}
	pub, _, err := c.login(r, ch, sig)
	if err != nil {
		c.renderLogin(w, r, http.StatusUnauthorized, err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginLinkCookieName, Value: "", Path: Prefix + "login/link", MaxAge: -1})
	c.issueSession(w, r, pub)
	// A page, not a redirect: the next request then starts on this site,
	// so the SameSite=Strict cookie goes with it.
	c.render(w, r, http.StatusOK, "loggedin", nil, page{Title: "Logged in"})
}

func (c *Console) postLogout(w http.ResponseWriter, r *http.Request, s *Session) {
	if err := c.logout(r, s.ID, s.Expires); err != nil {
		c.cfg.Logger.Error("console: logout", "err", err)
		c.fail(w, r, s, http.StatusServiceUnavailable, "Log out", "The logout could not be recorded, so the session is still open; try again.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
	c.renderLogin(w, r, http.StatusOK, "You are logged out.")
}

// normalizeSig turns pasted text into an armored signature: line endings
// a browser may have changed, and surrounding blanks.
func normalizeSig(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.TrimSpace(s) + "\n"
}

// formText is a form field as the bytes it was rendered from: a browser
// submits every newline in a field as CRLF, and no canonical act or
// delegation holds a CR.
func formText(r *http.Request, name string) string {
	return strings.ReplaceAll(r.PostFormValue(name), "\r\n", "\n")
}
