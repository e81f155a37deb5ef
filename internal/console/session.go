package console

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// Roles a session may hold on a target, read from the signers file: the
// namespaces its key may sign in for that target.
const (
	RoleGrantor  = "grantor"  // harbormaster-delegation
	RoleApprover = "approver" // harbormaster-approval or harbormaster-denial
	RoleReviewer = "reviewer" // harbormaster-review
	RoleOperator = "operator" // harbormaster-switch
)

// roleNamespaces maps each role to the namespaces that grant it.
var roleNamespaces = []struct {
	role       string
	namespaces []string
}{
	{RoleGrantor, []string{signing.NamespaceDelegation}},
	{RoleApprover, []string{signing.NamespaceApproval, signing.NamespaceDenial}},
	{RoleReviewer, []string{signing.NamespaceReview}},
	{RoleOperator, []string{signing.NamespaceSwitch}},
}

// SessionKey derives the console's MAC key from the control-plane key, so
// every node of a deployment (which all hold that key) accepts the same
// sessions and challenges, and no other use of the key can collide.
func SessionKey(controlPlane ed25519.PrivateKey) []byte {
	m := hmac.New(sha256.New, controlPlane.Seed())
	m.Write([]byte("harbormaster console session key v1"))
	return m.Sum(nil)
}

const (
	cookieName      = "harbormaster_session"
	loginCookieName = "harbormaster_login"
	challengePrefix = "harbormaster console login"
)

// Session is a logged-in human, as the cookie says and the signers file
// allows now.
type Session struct {
	ID          string
	Name        string
	Fingerprint string
	Expires     time.Time
	// Targets are the targets the key may open a session on; Roles the
	// roles it holds on each.
	Targets []string
	Roles   map[string][]string
	CSRF    string

	key ssh.PublicKey
}

// Has reports whether the session holds role on target ("" for any target).
func (s *Session) Has(role, target string) bool {
	if s == nil {
		return false
	}
	for t, rs := range s.Roles {
		if (target == "" || t == target) && slices.Contains(rs, role) {
			return true
		}
	}
	return false
}

// HasAll reports whether the session holds role on every one of targets.
func (s *Session) HasAll(role string, targets []string) bool {
	for _, t := range targets {
		if !s.Has(role, t) {
			return false
		}
	}
	return len(targets) > 0
}

// RoleList is every role held on some target, in the fixed order.
func (s *Session) RoleList() []string {
	var out []string
	for _, r := range roleNamespaces {
		if s.Has(r.role, "") {
			out = append(out, r.role)
		}
	}
	return out
}

// Sees reports whether target is one of the session's targets.
func (s *Session) Sees(target string) bool { return s != nil && slices.Contains(s.Targets, target) }

type cookieBody struct {
	V   int    `json:"v"`
	SID string `json:"sid"`
	Key string `json:"key"` // the login key, SSH wire format, base64
	Exp int64  `json:"exp"`
}

func (c *Console) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, c.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

func randomID() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

func (c *Console) csrfToken(sid string) string { return b64.EncodeToString(c.mac("csrf", sid)[:24]) }

func (c *Console) secure(r *http.Request) bool { return c.cfg.Secure || r.TLS != nil }

// issueSession sets the session cookie for pub.
func (c *Console) issueSession(w http.ResponseWriter, r *http.Request, pub ssh.PublicKey) {
	exp := c.cfg.Clock().Add(c.cfg.SessionTTL)
	body, _ := json.Marshal(cookieBody{V: 1, SID: randomID(), Key: base64.StdEncoding.EncodeToString(pub.Marshal()), Exp: exp.Unix()})
	val := b64.EncodeToString(body)
	val += "." + b64.EncodeToString(c.mac("session", val))
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: val, Path: Prefix, Expires: exp, MaxAge: int(c.cfg.SessionTTL.Seconds()),
		HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
}

// SessionCookie makes a session cookie value for pub expiring at exp, as
// issueSession would; tests use it to present an expired session.
func (c *Console) SessionCookie(pub ssh.PublicKey, exp time.Time) string {
	body, _ := json.Marshal(cookieBody{V: 1, SID: randomID(), Key: base64.StdEncoding.EncodeToString(pub.Marshal()), Exp: exp.Unix()})
	val := b64.EncodeToString(body)
	return val + "." + b64.EncodeToString(c.mac("session", val))
}

// CookieName is the session cookie's name.
const CookieName = cookieName

var errNoSession = errors.New("no session")

// session reads and checks the request's session: MAC, expiry, and the key
// still allowed to open a session on some target.
func (c *Console) session(r *http.Request) (*Session, error) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil, errNoSession
	}
	val, mac, ok := strings.Cut(ck.Value, ".")
	got, err2 := b64.DecodeString(mac)
	if !ok || err2 != nil || !hmac.Equal(got, c.mac("session", val)) {
		return nil, errors.New("the session cookie is not one this deployment issued")
	}
	raw, err := b64.DecodeString(val)
	if err != nil {
		return nil, errors.New("the session cookie is malformed")
	}
	var cb cookieBody
	if err := json.Unmarshal(raw, &cb); err != nil || cb.V != 1 {
		return nil, errors.New("the session cookie is malformed")
	}
	now := c.cfg.Clock()
	if now.Unix() >= cb.Exp {
		return nil, errors.New("the session has expired; log in again")
	}
	wire, err := base64.StdEncoding.DecodeString(cb.Key)
	if err != nil {
		return nil, errors.New("the session cookie is malformed")
	}
	pub, err := ssh.ParsePublicKey(wire)
	if err != nil {
		return nil, errors.New("the session cookie is malformed")
	}
	s := c.rolesOf(pub, now)
	if s == nil {
		return nil, errors.New("the key of this session may no longer open a session")
	}
	s.ID, s.Expires, s.CSRF = cb.SID, time.Unix(cb.Exp, 0), c.csrfToken(cb.SID)
	// A session logged out is over on every node; if that cannot be
	// read, the session is not trusted.
	out, err := c.loggedOut(r, cb.SID)
	if err != nil {
		c.cfg.Logger.Error("console: session revocations", "err", err)
		return nil, errors.New("the session could not be checked; log in again later")
	}
	if out {
		return nil, errors.New("this session was logged out; log in again")
	}
	return s, nil
}

func logoutDigest(sid string) string {
	sum := sha256.Sum256([]byte("console logout\n" + sid))
	return fmt.Sprintf("%x", sum)
}

// logout ends session sid on every node until its expiry.
// This node remembers it too, so it holds here even without a store.
func (c *Console) logout(r *http.Request, sid string, until time.Time) error {
	c.used.claim(logoutDigest(sid), until, c.cfg.Clock())
	if c.cfg.Claim != nil {
		_, err := c.cfg.Claim(r.Context(), logoutDigest(sid), until)
		return err
	}
	return nil
}

// loggedOut reports whether session sid was logged out.
func (c *Console) loggedOut(r *http.Request, sid string) (bool, error) {
	if c.used.seenNow(logoutDigest(sid), c.cfg.Clock()) {
		return true, nil
	}
	if c.cfg.Claimed != nil {
		return c.cfg.Claimed(r.Context(), logoutDigest(sid))
	}
	return false, nil
}

// rolesOf reads from the signers file what pub may see and do now; nil
// when it may open a session on no target.
func (c *Console) rolesOf(pub ssh.PublicKey, now time.Time) *Session {
	s := &Session{Fingerprint: signing.Fingerprint(pub), Roles: map[string][]string{}, key: pub}
	for _, t := range c.cfg.Gateway.Targets() {
		who, err := c.cfg.Signers.Authorize(pub, signing.NamespaceSession, t, now)
		if err != nil {
			continue
		}
		if s.Name != "" && who.Name != s.Name {
			return nil // one key, one human
		}
		s.Name = who.Name
		s.Targets = append(s.Targets, t)
		for _, rn := range roleNamespaces {
			for _, ns := range rn.namespaces {
				if sg, err := c.cfg.Signers.Authorize(pub, ns, t, now); err == nil && sg.Name == who.Name {
					s.Roles[t] = append(s.Roles[t], rn.role)
					break
				}
			}
		}
	}
	if len(s.Targets) == 0 {
		return nil
	}
	return s
}

// newChallenge makes a login challenge: a nonce and an expiry, MACed, so
// any node can check it without state.
func (c *Console) newChallenge() (challenge, nonce string) {
	nonce = randomID()
	exp := strconv.FormatInt(c.cfg.Clock().Add(c.cfg.ChallengeTTL).Unix(), 10)
	mac := b64.EncodeToString(c.mac("challenge", nonce, exp)[:24])
	return challengePrefix + " " + nonce + " " + exp + " " + mac, nonce
}

// checkChallenge returns the nonce and expiry of a challenge this
// deployment made and that has not expired.
func (c *Console) checkChallenge(ch string) (string, time.Time, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(ch), challengePrefix+" ")
	f := strings.Fields(rest)
	if !ok || len(f) != 3 {
		return "", time.Time{}, errors.New("that is not a login challenge of this console")
	}
	got, err := b64.DecodeString(f[2])
	if err != nil || !hmac.Equal(got, c.mac("challenge", f[0], f[1])[:24]) {
		return "", time.Time{}, errors.New("that is not a login challenge of this console")
	}
	exp, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return "", time.Time{}, errors.New("that is not a login challenge of this console")
	}
	if c.cfg.Clock().Unix() >= exp {
		return "", time.Time{}, errors.New("the challenge has expired; take a new one")
	}
	return f[0], time.Unix(exp, 0), nil
}

// ChallengeMessage is the exact bytes a login signature covers: the
// challenge and a newline, as `echo CHALLENGE | ssh-keygen -Y sign` signs.
func ChallengeMessage(challenge string) []byte { return []byte(strings.TrimSpace(challenge) + "\n") }

// login verifies a signed challenge and returns the key that signed it.
// The challenge is used up, on every node sharing the store.
func (c *Console) login(r *http.Request, challenge string, sig []byte) (ssh.PublicKey, string, error) {
	pub, name, nonce, err := c.verifyLogin(challenge, sig)
	if err != nil {
		return nil, "", err
	}
	_, exp, _ := c.checkChallenge(challenge)
	first, err := c.claim(r, "console-login\x00"+nonce, exp)
	if err != nil {
		c.cfg.Logger.Error("console login claim", "err", err)
		return nil, "", errors.New("the login could not be checked against replays; try again")
	}
	if !first {
		return nil, "", errors.New("this challenge was used already; take a new one")
	}
	return pub, name, nil
}

// verifyLogin checks a signed challenge without using it up: the
// challenge is this deployment's and live, and an allowed key signed it.
// It returns the key, its holder's name and the challenge's nonce.
func (c *Console) verifyLogin(challenge string, sig []byte) (ssh.PublicKey, string, string, error) {
	nonce, _, err := c.checkChallenge(challenge)
	if err != nil {
		return nil, "", "", err
	}
	msg := ChallengeMessage(challenge)
	now := c.cfg.Clock()
	var who signing.Signer
	var lastErr error
	for _, t := range c.cfg.Gateway.Targets() {
		s, err := c.cfg.Signers.Verify(msg, sig, signing.NamespaceSession, t, now)
		if err != nil {
			lastErr = err
			continue
		}
		who = s
		break
	}
	if who.Name == "" {
		if lastErr == nil {
			lastErr = errors.New("no target is configured")
		}
		return nil, "", "", fmt.Errorf("the signature is not a login by an allowed key: %w", lastErr)
	}
	pub, err := signing.SignerKey(sig)
	if err != nil {
		return nil, "", "", err
	}
	return pub, who.Name, nonce, nil
}

func (c *Console) claim(r *http.Request, what string, until time.Time) (bool, error) {
	sum := sha256.Sum256([]byte(what))
	digest := fmt.Sprintf("%x", sum)
	if c.cfg.Claim != nil {
		return c.cfg.Claim(r.Context(), digest, until)
	}
	return c.used.claim(digest, until, c.cfg.Clock()), nil
}

// usedChallenges is a node's own memory of used challenges, when no store
// claim is configured.
type usedChallenges struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// seenNow reports whether digest is claimed and its claim not expired.
func (u *usedChallenges) seenNow(digest string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.seen[digest]
	return ok && !now.After(t)
}

func (u *usedChallenges) claim(digest string, until, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen == nil {
		u.seen = map[string]time.Time{}
	}
	for d, t := range u.seen {
		if now.After(t) {
			delete(u.seen, d)
		}
	}
	if _, ok := u.seen[digest]; ok {
		return false
	}
	u.seen[digest] = until
	return true
}
