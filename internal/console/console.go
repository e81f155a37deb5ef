package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"

	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/leadsman"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/lookalike"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

// Prefix is where the console is mounted.
const Prefix = "/console/"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Note is an advisory note on a referred request (the Leadsman's): shown
// apart, marked advisory, escaped; nothing the console does reads it.
type Note struct {
	// Label marks the note as advice (leadsman.Label); shown with it.
	Label  string
	Author string
	Model  string
	// Status is "writing", "written" or "failed"; Failure says why a
	// failed note has no text.
	Status  string
	Failure string
	// Text is model output: untrusted.
	Text    string
	Created time.Time
}

// LeadsmanNotes reads the Leadsman's notes for Config.Notes.
func LeadsmanNotes(r *leadsman.Reader) func(ctx context.Context, requestID string) (*Note, error) {
	return func(ctx context.Context, id string) (*Note, error) {
		n, err := r.Note(ctx, id)
		if errors.Is(err, leadsman.ErrNoNote) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &Note{Label: n.Advisory, Author: n.Leadsman, Model: strings.TrimSpace(n.Provider + " " + n.Model), Status: n.Status,
			Failure: n.Failure, Text: n.Text, Created: n.Written}, nil
	}
}

// Config configures the console.
type Config struct {
	// Gateway, Signers, Logbook and Key are required.
	Gateway *gateway.Gateway
	Signers *signing.AllowedSigners
	Logbook *logbook.Logbook
	// Key MACs sessions and challenges (SessionKey of the control-plane
	// key); at least 32 bytes.
	Key []byte
	// CheckpointVerifier verifies the logbook's checkpoints, for the
	// logbook page's verification run. Optional: without it the run is
	// not offered.
	CheckpointVerifier note.Verifier
	// Switches is the node's switch poller. Optional.
	Switches *switches.Poller
	// Auditor is the sampled audit. Optional: without it the audit pages
	// say there is no audit.
	Auditor *audit.Auditor
	// Surveyor is the node's Tier B panel, whose identity and bundle an
	// enablement names. Optional: without it enablement is not offered.
	Surveyor *surveyor.Panel
	// QueueStats reports the queue's depth and oldest age (the gateway's
	// QueueStats). Defaults to the gateway's.
	QueueStats func(ctx context.Context) (int, time.Duration, error)
	// Claim uses up a login challenge on every node (store.ClaimRequest).
	// Without it, each node remembers its own.
	Claim func(ctx context.Context, digest string, until time.Time) (bool, error)
	// Claimed reports whether a digest was claimed and its claim has not
	// expired (store.Claimed): how every node learns that a session was
	// logged out. Without it (and Claim), each node knows its own logouts.
	Claimed func(ctx context.Context, digest string) (bool, error)
	// Notes returns the advisory note on a request, or nil. Optional.
	Notes func(ctx context.Context, requestID string) (*Note, error)
	// SessionTTL defaults to 8 hours; ChallengeTTL to 5 minutes.
	SessionTTL   time.Duration
	ChallengeTTL time.Duration
	// AuditAlert is the audit-queue age past which it shows red. Defaults
	// to 24 hours, as the shipped alert rule (HarbormasterAuditQueueOld).
	AuditAlert time.Duration
	// Secure marks cookies Secure even on plain HTTP: set it when a proxy
	// terminates TLS in front of the node. Over TLS they always are.
	Secure bool
	// Clock defaults to time.Now; Logger to a discard logger.
	Clock  func() time.Time
	Logger *slog.Logger
}

// WithDefaults fills the unset fields.
func (c Config) WithDefaults() Config {
	if c.SessionTTL == 0 {
		c.SessionTTL = 8 * time.Hour
	}
	if c.ChallengeTTL == 0 {
		c.ChallengeTTL = 5 * time.Minute
	}
	if c.AuditAlert == 0 {
		c.AuditAlert = 24 * time.Hour
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.QueueStats == nil && c.Gateway != nil {
		c.QueueStats = c.Gateway.QueueStats
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Gateway == nil:
		return errors.New("console: Gateway is required")
	case c.Signers == nil:
		return errors.New("console: Signers is required (no signers file, no human can log in)")
	case c.Logbook == nil:
		return errors.New("console: Logbook is required")
	case len(c.Key) < 32:
		return errors.New("console: Key must be at least 32 bytes (SessionKey of the control-plane key)")
	}
	return nil
}

// Console serves the web console.
type Console struct {
	cfg   Config
	key   []byte
	pages map[string]*template.Template
	used  usedChallenges
	mux   *http.ServeMux
}

// New builds the console.
func New(cfg Config) (*Console, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, key: cfg.Key, pages: map[string]*template.Template{}, mux: http.NewServeMux()}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n, err)
		}
		c.pages[base] = t
	}
	c.routes()
	return c, nil
}

// Register mounts the console on mux under Prefix.
func (c *Console) Register(mux *http.ServeMux) {
	mux.Handle(Prefix, c)
	mux.Handle("GET /console", http.RedirectHandler(Prefix, http.StatusSeeOther))
}

// ServeHTTP serves the console with its security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() {
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /console/login", c.getLogin)
	c.mux.HandleFunc("POST /console/login", c.postLogin)
	c.mux.HandleFunc("GET /console/login/challenge", c.getChallenge)
	c.mux.HandleFunc("GET /console/login/link", c.getLoginLink)
	c.mux.HandleFunc("POST /console/login/link", c.postLoginLink)
	c.mux.HandleFunc("POST /console/logout", c.authed(c.postLogout))

	c.mux.HandleFunc("GET /console/{$}", c.authed(c.getDelegations))
	c.mux.HandleFunc("GET /console/delegations/{id}", c.authed(c.getDelegation))
	c.mux.HandleFunc("POST /console/delegations/{id}/prepare", c.authed(c.postDelegationPrepare))
	c.mux.HandleFunc("POST /console/delegations/{id}/act", c.authed(c.postDelegationAct))
	c.mux.HandleFunc("GET /console/sign", c.authed(c.getSign))
	c.mux.HandleFunc("POST /console/sign/report", c.authed(c.postSignReport))
	c.mux.HandleFunc("POST /console/sign/submit", c.authed(c.postSignSubmit))
	c.mux.HandleFunc("GET /console/queue", c.authed(c.getQueue))
	c.mux.HandleFunc("GET /console/queue/{id}", c.authed(c.getRequest))
	c.mux.HandleFunc("POST /console/queue/{id}/approve", c.authed(c.postApprove))
	c.mux.HandleFunc("POST /console/queue/{id}/preview", c.authed(c.postPreview))
	c.mux.HandleFunc("POST /console/queue/{id}/deny/prepare", c.authed(c.postDenyPrepare))
	c.mux.HandleFunc("POST /console/queue/{id}/deny", c.authed(c.postDeny))
	c.mux.HandleFunc("GET /console/audit", c.authed(c.getAudits))
	c.mux.HandleFunc("GET /console/audit/{id}", c.authed(c.getAudit))
	c.mux.HandleFunc("POST /console/audit/{id}/prepare", c.authed(c.postReviewPrepare))
	c.mux.HandleFunc("POST /console/audit/{id}/review", c.authed(c.postReview))
	c.mux.HandleFunc("GET /console/switches", c.authed(c.getSwitches))
	c.mux.HandleFunc("POST /console/switches/confirm", c.authed(c.postSwitchConfirm))
	c.mux.HandleFunc("POST /console/switches", c.authed(c.postSwitch))
	c.mux.HandleFunc("GET /console/logbook", c.authed(c.getLogbook))
	c.mux.HandleFunc("POST /console/logbook/verify", c.authed(c.postVerify))
	c.mux.HandleFunc("GET /console/dashboard", c.authed(c.getDashboard))
	c.mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error", nil, page{Title: "Not found", Error: "There is no console page at " + r.URL.Path + "."})
	})
}

// authed runs h for a request with a valid session, and for a POST only
// with the session's CSRF token; anything else is refused.
func (c *Console) authed(h func(w http.ResponseWriter, r *http.Request, s *Session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.session(r)
		if err != nil {
			if r.Method == http.MethodGet {
				if !errors.Is(err, errNoSession) {
					// A bad or expired cookie is cleared, and the login says why.
					http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
				}
				c.renderLogin(w, r, http.StatusUnauthorized, loginMessage(err))
				return
			}
			c.render(w, r, http.StatusUnauthorized, "error", nil, page{Title: "Not logged in", Error: loginMessage(err)})
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if err := r.ParseMultipartForm(maxForm); err != nil && !errors.Is(err, http.ErrNotMultipart) {
				c.render(w, r, http.StatusBadRequest, "error", s, page{Title: "Bad request", Error: "The form could not be read: " + err.Error()})
				return
			}
			if tok := r.PostFormValue("csrf"); tok == "" || !constantEqual(tok, s.CSRF) {
				c.render(w, r, http.StatusForbidden, "error", s, page{Title: "Refused", Error: "The form has no valid CSRF token: reload the page and try again."})
				return
			}
		}
		h(w, r, s)
	}
}

func loginMessage(err error) string {
	if errors.Is(err, errNoSession) {
		return "Log in with your SSH key to use the console."
	}
	return err.Error()
}

const maxForm = 1 << 20

// page is what every template gets.
type page struct {
	Title   string
	Nav     string
	Session *Session
	Error   string
	Notice  string
	Data    any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, s *Session, p page) {
	t, ok := c.pages[name]
	if !ok {
		http.Error(w, "console: no template "+name, http.StatusInternalServerError)
		return
	}
	p.Session = s
	var buf bytes.Buffer
	if err := t.Execute(&buf, p); err != nil {
		c.cfg.Logger.Error("console render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *Session, status int, title, msg string) {
	c.render(w, r, status, "error", s, page{Title: title, Error: msg})
}

var funcs = template.FuncMap{
	// dict builds a partial's fields from name-value pairs.
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, fmt.Errorf("dict: %d arguments, not name-value pairs", len(kv))
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, fmt.Errorf("dict: name %v is not a string", kv[i])
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"ago": func(t time.Time) string { return since(t) },
	// when renders an RFC 3339 time of a delegation for a person.
	"when": func(s string) string {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return s
		}
		return t.UTC().Format("2 Jan 2006 15:04 UTC")
	},
	"dur": func(d time.Duration) string { return roundDur(d) },
	"pretty": func(v any) string {
		var b []byte
		switch x := v.(type) {
		case json.RawMessage:
			var anyv any
			dec := json.NewDecoder(bytes.NewReader(x))
			dec.UseNumber() // numbers as written, not as floats
			if dec.Decode(&anyv) != nil {
				return string(x)
			}
			b, _ = json.MarshalIndent(anyv, "", "  ")
		default:
			b, _ = json.MarshalIndent(v, "", "  ")
		}
		return string(b)
	},
	"cell": cellText,
	"vis":  visible,
	// visline is vis for the canonical SQL, deparsed on one line: a
	// newline or tab in it is inside a literal, so it is marked too.
	"visline": func(s string) template.HTML { return marked(s, true) },
	"join":    strings.Join,
	// lookalikes lists, once each, why the look-alike characters of the
	// texts are marked: the warning above what shows them.
	"lookalikes": func(texts ...string) []string { return lookalike.Summary(maxLookalikes, texts...) },
	"tier": func(t string) string {
		if t == "B" {
			return "Tier B surveyed"
		}
		return "Tier A compiled"
	},
	"add":     func(a, b int) int { return a + b },
	"percent": func(f float64) float64 { return 100 * f },
}

func since(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return roundDur(time.Since(t)) + " ago"
}

func roundDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%.1f days", d.Hours()/24)
}

// cellText renders one untrusted row value as text (html/template escapes it).
func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// visible renders untrusted text for a person: escaped, and with every
// character a browser draws as nothing or that reorders the text around
// it shown as a marked code point (a bidi control in a string literal can
// make the SQL an approver reads differ from the SQL that runs; a
// zero-width character makes two values look equal), and so is each
// combining mark past maxMarks in a row. Newline and tab stay as they
// are; a byte that is not UTF-8 is shown as its hex value. A look-alike
// (lookalike.Find: a Cyrillic а in "exаmple.com", a letter of another
// script, U+00A0, U+2800 or U+3000 drawn as a space) is marked with what
// it is: the letter itself, the blank as its code point.
func visible(s string) template.HTML { return marked(s, false) }

// maxLookalikes is the reasons a look-alike warning lists; it then says
// how many more there are.
const maxLookalikes = 12

// maxMarks is the combining marks in a row shown as they are: a longer
// run is drawn stacked past its line, over the text around it.
const maxMarks = 4

// marked is visible, and marks newline and tab too when lines is set.
func marked(s string, lines bool) template.HTML {
	var b strings.Builder
	start, marks := 0, 0
	found, k := lookalike.Find(s), 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unicode.In(r, unicode.Mn, unicode.Me) {
			marks++
		} else {
			marks = 0
		}
		var look *lookalike.Finding
		for k < len(found) && found[k].Offset < i {
			k++
		}
		if k < len(found) && found[k].Offset == i {
			look = &found[k]
		}
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(template.HTMLEscapeString(s[start:i]))
			fmt.Fprintf(&b, `<span class="ctl">0x%02X</span>`, s[i])
			start = i + n
		case Hidden(r) || lines && (r == '\n' || r == '\t') || marks > maxMarks:
			b.WriteString(template.HTMLEscapeString(s[start:i]))
			fmt.Fprintf(&b, `<span class="ctl">U+%04X</span>`, r)
			start = i + n
		case look != nil:
			b.WriteString(template.HTMLEscapeString(s[start:i]))
			shown := template.HTMLEscapeString(s[i : i+n])
			if look.Class != lookalike.Confusable && look.Class != lookalike.MixedScript {
				shown = fmt.Sprintf("U+%04X", r)
			}
			fmt.Fprintf(&b, `<mark class="lookalike" title="%s">%s</mark>`, template.HTMLEscapeString(look.Why()), shown)
			start = i + n
		}
		i += n
	}
	b.WriteString(template.HTMLEscapeString(s[start:]))
	return template.HTML(b.String())
}

// hiddenIn lists, once each, the hidden characters of s as code points.
func hiddenIn(s string) []string {
	var out []string
	seen := map[rune]bool{}
	for _, r := range s {
		if Hidden(r) && !seen[r] {
			seen[r] = true
			out = append(out, fmt.Sprintf("U+%04X", r))
		}
	}
	return out
}

// Hidden reports whether r is drawn as nothing or changes the direction
// of the text around it: format characters (bidi controls, zero-width
// characters, tags), control characters other than newline and tab, line
// and paragraph separators, variation selectors and the Hangul fillers.
// The console marks them; the CLI and the queue webhook mark them, and
// every other look-alike, through lookalike.Mark.
func Hidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Variation_Selector):
		return true
	}
	switch r {
	case '\u115f', '\u1160', '\u3164', '\uffa0', '\u034f', '\u180e':
		return true
	}
	return false
}

func constantEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var d byte
	for i := 0; i < len(a); i++ {
		d |= a[i] ^ b[i]
	}
	return d == 0
}
