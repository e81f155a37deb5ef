package cli_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/cli"
)

// TestMCPFromEnvironment: harbormaster mcp takes the server from
// $HARBORMASTER_SERVER and the token from $HARBORMASTER_TOKEN (or the
// variable --token-env names), and --token-file wins over the variable.
func TestMCPFromEnvironment(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer good-token" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"a valid agent token is required"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"delegations":[]}`))
	}))
	t.Cleanup(srv.Close)
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := cli.Do(append([]string{"mcp"}, args...), strings.NewReader(""), &out, &errb)
		return code, errb.String()
	}

	t.Setenv("HARBORMASTER_SERVER", srv.URL)
	t.Setenv("HARBORMASTER_TOKEN", "good-token")
	if code, stderr := run(); code != 0 {
		t.Fatalf("from the environment: exit %d: %s", code, stderr)
	}
	t.Setenv("HARBORMASTER_TOKEN", "bad-token")
	if code, stderr := run(); code == 0 || !strings.Contains(stderr, "$HARBORMASTER_TOKEN") {
		t.Fatalf("a refused token from the environment: exit %d: %s", code, stderr)
	}
	t.Setenv("MY_AGENT_TOKEN", "good-token")
	if code, stderr := run("--token-env", "MY_AGENT_TOKEN"); code != 0 {
		t.Fatalf("--token-env: exit %d: %s", code, stderr)
	}
	file := t.TempDir() + "/token"
	if err := os.WriteFile(file, []byte("good-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stderr := run("--token-file", file); code != 0 {
		t.Fatalf("--token-file over a bad $HARBORMASTER_TOKEN: exit %d: %s", code, stderr)
	}
	t.Setenv("HARBORMASTER_TOKEN", "")
	if code, stderr := run(); code == 0 || !strings.Contains(stderr, "HARBORMASTER_TOKEN") {
		t.Fatalf("no token: exit %d: %s", code, stderr)
	}
	t.Setenv("HARBORMASTER_SERVER", "")
	if code, stderr := run("--token-file", file); code == 0 || !strings.Contains(stderr, "HARBORMASTER_SERVER") {
		t.Fatalf("no server: exit %d: %s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"Bearer good-token", "Bearer bad-token", "Bearer good-token", "Bearer good-token"}
	if len(seen) != len(want) {
		t.Fatalf("requests %q, want the tokens %q", seen, want)
	}
	for i, s := range seen {
		if !strings.HasSuffix(s, want[i]) || !strings.HasPrefix(s, "/v1/delegations ") {
			t.Errorf("request %d: %q, want %q", i, s, want[i])
		}
	}
}
