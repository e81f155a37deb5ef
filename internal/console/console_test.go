package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/console"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/leadsman"
	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
)

var shared pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

// fixture is a whole system (a real PostgreSQL target, the SQLite store,
// the Pilot, a Surveyor panel on scripted provider servers, the sampled
// audit) with the API and the console on one HTTP server.
type fixture struct {
	sys     *gatewaytest.System
	dsn     string
	panel   *surveyor.Panel
	console *console.Console
	srv     *httptest.Server
	keys    *gatewaytest.Keys
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dsn: pgtmptest.NewDatabase(t, shared.Server(t)), keys: gatewaytest.NewKeys(t)}
	gatewaytest.LoadShop(t, f.dsn)
	var jurors []llm.Juror
	for i, start := range []func(testing.TB, llmtest.Behaviour) *llmtest.Server{llmtest.NewOpenAI, llmtest.NewAnthropic, llmtest.NewOpenAI} {
		srv := start(t, llmtest.AlwaysConforms())
		kind := llm.KindOpenAI
		if i == 1 {
			kind = llm.KindAnthropic
		}
		j, err := llm.New(llm.ProviderConfig{Name: fmt.Sprintf("%s-%d", kind, i), Kind: kind, BaseURL: srv.URL, Model: "m", Timeout: 10 * time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		jurors = append(jurors, j)
	}
	var err error
	if f.panel, err = surveyor.NewPanel(surveyor.Config{}, jurors, nil); err != nil {
		t.Fatal(err)
	}
	opt := gatewaytest.Options{TargetDSN: f.dsn, StorePath: t.TempDir() + "/store.db", Keys: f.keys, Audit: &audit.Config{}}
	opt.Gateway.Surveyor = f.panel
	f.sys = gatewaytest.Start(t, opt)
	f.console, err = console.New(console.Config{Gateway: f.sys.Gateway, Signers: f.keys.Signers, Logbook: f.sys.Logbook,
		Key: console.SessionKey(f.keys.ControlPlane), CheckpointVerifier: f.sys.CheckpointVerifier, Switches: f.sys.Switches,
		Auditor: f.sys.Auditor, Surveyor: f.panel, Claim: func(ctx context.Context, digest string, until time.Time) (bool, error) {
			return f.sys.Store.ClaimRequest(ctx, digest, time.Now().UnixNano(), until.UnixNano())
		},
		Notes: console.LeadsmanNotes(leadsman.NewReader(f.sys.Store))})
	if err != nil {
		t.Fatal(err)
	}
	f.console.Register(f.sys.API.Mux())
	f.srv = httptest.NewServer(f.sys.API.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

// submit sends a statement as the agent.
func (f *fixture) submit(t *testing.T, sql string) *gateway.Response {
	t.Helper()
	resp, err := f.sys.Gateway.Submit(t.Context(), gatewaytest.Agent, gatewaytest.Target, sql)
	if err != nil {
		t.Fatalf("%q: %v", sql, err)
	}
	return resp
}

// loginLink is what `harbormaster console login` prints for key.
func (f *fixture) loginLink(t *testing.T, key *signing.PrivateKey) string {
	t.Helper()
	resp, err := http.Get(f.srv.URL + console.Prefix + "login/challenge")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sig, err := key.Sign(signing.NamespaceSession, console.ChallengeMessage(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return console.LoginLink(f.srv.URL, string(b), sig)
}

// startLeadsman runs a real Leadsman whose scripted model writes text on
// every waiting request, until the returned stop is called.
func (f *fixture) startLeadsman(t *testing.T, text string) (stop func()) {
	t.Helper()
	srv := llmtest.NewOpenAI(t, llmtest.Text(text))
	w, err := llm.NewWriter(llm.ProviderConfig{Name: "scripted", Kind: llm.KindOpenAI, BaseURL: srv.URL, Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := leadsman.New(t.Context(), leadsman.Config{Identity: "leadsman:test", Poll: 20 * time.Millisecond}, w, f.sys.Store, f.sys.Logbook)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	return func() { cancel(); <-done; _ = l.Close() }
}

// waitNote waits (up to 30s) until the Leadsman's note on id is written.
func (f *fixture) waitNote(t *testing.T, id string) *leadsman.Note {
	t.Helper()
	r := leadsman.NewReader(f.sys.Store)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := r.Note(t.Context(), id)
		if err == nil && n.Status != "writing" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("no note on %s: %v", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

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

func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		t.Fatalf("no %q in the page", from)
	}
	out, _, _ := strings.Cut(rest, to)
	return out
}
