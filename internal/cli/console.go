package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/console"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

func runConsole(e *env, args []string) int {
	return e.dispatch("harbormaster console", []command{
		{"login", "sign a login challenge with your SSH key and print a one-time console link", runConsoleLogin},
	}, args)
}

func runConsoleLogin(e *env, args []string) int {
	fs := e.flags("harbormaster console login --server URL --key KEY",
		"Logs you in to the web console: fetches a challenge from the server, signs it\n"+
			"with your SSH key (namespace harbormaster-session, as 'ssh-keygen -Y sign'\n"+
			"would) and prints a one-time login link on its last line. Open it within five\n"+
			"minutes; it works once.")
	var sf serverFlags
	sf.register(e, fs)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if sf.server == "" || sf.key == "" {
		return e.usageErr(fs, "--server and --key are required")
	}
	link, err := consoleLoginLink(sf.server, sf.key)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	fmt.Fprintf(e.stdout, "Open this link in your browser (one use, within 5 minutes):\n%s\n", link)
	return exitOK
}

// consoleLoginLink fetches a challenge from server and signs it with the
// key at keyPath.
func consoleLoginLink(server, keyPath string) (string, error) {
	k, err := signing.LoadPrivateKey(keyPath)
	if err != nil {
		return "", err
	}
	server = strings.TrimRight(server, "/")
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(server + console.Prefix + "login/challenge")
	if err != nil {
		return "", fmt.Errorf("the console at %s could not be reached: %w", server, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the console at %s answered HTTP %d to a challenge request", server, resp.StatusCode)
	}
	ch := strings.TrimSpace(string(body))
	if ch == "" || strings.ContainsAny(ch, "\n\r") {
		return "", errors.New("the server's challenge is malformed")
	}
	sig, err := k.Sign(signing.NamespaceSession, console.ChallengeMessage(ch))
	if err != nil {
		return "", err
	}
	return console.LoginLink(server, ch, sig), nil
}
