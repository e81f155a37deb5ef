package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/cli"
)

func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := cli.Do([]string{"completion", shell}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("completion %s: exit %d: %s", shell, code, errb.String())
	}
	p := filepath.Join(t.TempDir(), "harbormaster."+shell)
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func shell(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI (Debian: apt-get install %s): %v", name, name, err)
		}
		t.Skipf("%s is not installed: %v", name, err)
	}
	return p
}

// TestCompletion loads the bash and zsh completion scripts in the real
// shells and asks them what completes after a few command lines.
func TestCompletion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		words []string // typed so far; the last is the word being completed
		want  []string
		not   []string
	}{
		{[]string{""}, []string{"queue", "serve", "version", "completion", "demo"}, []string{"--json"}},
		{[]string{"qu"}, []string{"queue"}, []string{"serve"}},
		{[]string{"queue", ""}, []string{"approve", "deny", "list", "show"}, []string{"queue"}},
		{[]string{"queue", "approve", "--"}, []string{"--yes", "--json", "--server", "--key"}, []string{"approve"}},
		{[]string{"serve", "--config", "x.yaml", "--l"}, []string{"--log-level"}, []string{"--config"}},
		{[]string{"delegation", "compile", "--"}, []string{"--schema", "--json"}, nil},
	}
	check := func(t *testing.T, sh string, words []string, got string, want, not []string) {
		fields := strings.Fields(got)
		has := map[string]bool{}
		for _, f := range fields {
			has[f] = true
		}
		for _, w := range want {
			if !has[w] {
				t.Errorf("%s: harbormaster %s<TAB> offers %q, want %s among them", sh, strings.Join(words, " "), got, w)
			}
		}
		for _, w := range not {
			if has[w] {
				t.Errorf("%s: harbormaster %s<TAB> offers %s", sh, strings.Join(words, " "), w)
			}
		}
	}
	t.Run("bash", func(t *testing.T) {
		t.Parallel()
		bash := shell(t, "bash")
		script := completionScript(t, "bash")
		for _, c := range cases {
			quoted := []string{"harbormaster"}
			for _, w := range c.words {
				quoted = append(quoted, "'"+w+"'")
			}
			prog := "source " + script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
				itoa(len(c.words)) + "\n_harbormaster\necho \"${COMPREPLY[@]}\"\ncomplete -p harbormaster\n"
			out, err := exec.Command(bash, "--norc", "-c", prog).CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			lines := strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)
			if len(lines) != 2 || !strings.Contains(lines[1], "-F _harbormaster harbormaster") {
				t.Fatalf("bash: the completion is not registered: %s", out)
			}
			check(t, "bash", c.words, lines[0], c.want, c.not)
		}
	})
	t.Run("zsh", func(t *testing.T) {
		t.Parallel()
		zsh := shell(t, "zsh")
		script := completionScript(t, "zsh")
		for _, c := range cases {
			quoted := []string{"harbormaster"}
			for _, w := range c.words {
				quoted = append(quoted, "'"+w+"'")
			}
			prog := "source " + script + "\nwords=(" + strings.Join(quoted, " ") + ")\nCURRENT=" + itoa(len(c.words)+1) +
				"\n_harbormaster_candidates\nprint -r -- ${(M)reply:#" + strings.ReplaceAll(c.words[len(c.words)-1], "-", "\\-") + "*}\n"
			out, err := exec.Command(zsh, "-f", "-c", prog).CombinedOutput()
			if err != nil {
				t.Fatalf("zsh: %v\n%s", err, out)
			}
			check(t, "zsh", c.words, strings.TrimSpace(string(out)), c.want, c.not)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestKeygenNamespacesMatchDocs: the namespaces keygen prints are the ones
// the README's tour shows, and docs/delegations.md says how many.
func TestKeygenNamespacesMatchDocs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stdout, stderr, code := run(t, dir, nil, "keygen", "--out", filepath.Join(dir, "alice"), "--name", "alice", "--targets", "shop")
	if code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, stderr)
	}
	i := strings.Index(stdout, `namespaces="`)
	if i < 0 {
		t.Fatalf("keygen printed no namespaces:\n%s", stdout)
	}
	ns := stdout[i : i+strings.Index(stdout[i+len(`namespaces="`):], `"`)+len(`namespaces="`)+1]
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "alice@shop "+ns+" ssh-ed25519 ") {
		t.Errorf("the README's keygen output does not list %s", ns)
	}
	n := strings.Count(ns, ",") + 1
	words := map[int]string{6: "six", 7: "seven", 8: "eight", 9: "nine"}
	dm, err := os.ReadFile("../../docs/delegations.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dm), "prints a line with all "+words[n]+" namespaces") || !strings.Contains(string(readme), "lists all "+words[n]+"\nnamespaces") {
		t.Errorf("docs/delegations.md or the README does not say keygen prints all %d namespaces", n)
	}
}
