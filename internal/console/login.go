package console

import (
	"net/http"
	"net/url"
	"strings"
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

func (c *Console) getLoginLink(w http.ResponseWriter, r *http.Request) {
	sig, err := b64.DecodeString(r.URL.Query().Get("s"))
	if err != nil {
		c.renderLogin(w, r, http.StatusBadRequest, "The login link is malformed.")
		return
	}
	pub, _, err := c.login(r, r.URL.Query().Get("c"), sig)
	if err != nil {
		c.renderLogin(w, r, http.StatusUnauthorized, err.Error())
		return
	}
	c.issueSession(w, r, pub)
	// A page, not a redirect: the next request then starts on this site,
	// so the SameSite=Strict cookie goes with it.
	c.render(w, r, http.StatusOK, "loggedin", nil, page{Title: "Logged in"})
}

func (c *Console) postLogout(w http.ResponseWriter, r *http.Request, s *Session) {
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
