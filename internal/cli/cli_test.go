package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/harbormaster-dev/harbormaster/examples"
	"github.com/harbormaster-dev/harbormaster/internal/cli"
)

// TestMain makes this test binary double as the harbormaster command:
// testscript puts a copy named harbormaster on $PATH, and Go tests below
// run it as a separate process, as a user would.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"harbormaster": func() { os.Exit(cli.Do(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs testdata/script/*.txtar against the real command. Each
// script starts with the examples (shop.sql and the delegation YAML files)
// in its work directory.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: false,
		Setup:               setupScript,
		Condition:           scriptCondition,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":   cmdExits,
			"replace": cmdReplace,
			"allow":   cmdAllow,
			"lastline": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: lastline SRC DST")
				}
				lines := strings.Split(strings.TrimRight(ts.ReadFile(args[0]), "\n"), "\n")
				ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(lines[len(lines)-1]+"\n"), 0o644))
			},
		},
	})
}

// setupScript copies the examples into the script's work directory.
func setupScript(env *testscript.Env) error {
	return fs.WalkDir(examples.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := examples.FS.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(env.WorkDir, path), data, 0o644)
	})
}

// scriptCondition adds [sshkeygen]: ssh-keygen is installed. Under CI
// (CI=true) a missing ssh-keygen fails the script instead of skipping it.
func scriptCondition(cond string) (bool, error) {
	if cond != "sshkeygen" {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		if os.Getenv("CI") == "true" {
			return false, fmt.Errorf("ssh-keygen is required under CI: %v", err)
		}
		return false, nil
	}
	return true, nil
}

// cmdExits runs a program and checks its exact exit code, keeping its
// stdout and stderr for the next stdout/stderr assertions:
//
//	exits 2 harbormaster check
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// cmdReplace rewrites a file, replacing OLD by NEW, which must occur:
//
//	replace FILE OLD NEW
func cmdReplace(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: replace FILE OLD NEW")
	}
	path := ts.MkAbs(args[0])
	data := ts.ReadFile(args[0])
	if !strings.Contains(data, args[1]) {
		ts.Fatalf("%s does not contain %q", args[0], args[1])
	}
	ts.Check(os.WriteFile(path, []byte(strings.ReplaceAll(data, args[1], args[2])), 0o644))
}

// cmdAllow appends an allowed-signers line for a public key file:
//
//	allow FILE PRINCIPALS PUBFILE
func cmdAllow(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: allow FILE PRINCIPALS PUBFILE")
	}
	pub := strings.TrimSpace(ts.ReadFile(args[2]))
	f, err := os.OpenFile(ts.MkAbs(args[0]), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	ts.Check(err)
	_, err = fmt.Fprintf(f, "%s %s\n", args[1], pub)
	ts.Check(err)
	ts.Check(f.Close())
}

// run runs the harbormaster test binary copy as a separate process in dir.
func run(t *testing.T, dir string, stdin []byte, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code, err := runErr(dir, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return stdout, stderr, code
}

// runErr is run for use off the test goroutine.
func runErr(dir string, stdin []byte, args ...string) (stdout, stderr string, code int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "harbormaster", args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if ctx.Err() != nil {
		return out.String(), errb.String(), -1, fmt.Errorf("harbormaster %q did not finish in 60s", args)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		return "", "", -1, fmt.Errorf("harbormaster %q: %v", args, err)
	}
	return out.String(), errb.String(), code, nil
}

// exampleDir writes the examples into a fresh directory.
func exampleDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := setupScript(&testscript.Env{WorkDir: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

var commandLine = regexp.MustCompile(`(?m)^  ([a-z][a-z-]*) {2,}\S`)

// listCommands returns the commands a dispatcher's usage lists, or nil
// when the output is not a command list.
func listCommands(usage string) []string {
	if !strings.Contains(usage, "\ncommands:\n") {
		return nil
	}
	var names []string
	for _, m := range commandLine.FindAllStringSubmatch(usage, -1) {
		names = append(names, m[1])
	}
	return names
}

// TestHelpEverywhere asks every command and subcommand that
// "harbormaster --help" lists (recursively) for --help, -h and help:
// exit 0, a usage on stdout, nothing on stderr. New commands are covered
// without editing this test.
func TestHelpEverywhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seen := 0
	var walk func(path []string)
	walk = func(path []string) {
		seen++
		help := func(word string) string {
			args := append(append([]string(nil), path...), word)
			out, errOut, code := run(t, dir, nil, args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: harbormaster") {
				t.Errorf("harbormaster %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
			}
			return out
		}
		out := help("--help")
		if want := strings.Join(append([]string{"usage: harbormaster"}, path...), " "); !strings.HasPrefix(out, want) {
			t.Errorf("harbormaster %s --help: usage does not start %q:\n%s", strings.Join(path, " "), want, out)
		}
		if short := help("-h"); short != out {
			t.Errorf("harbormaster %s: -h and --help differ", strings.Join(path, " "))
		}
		subs := listCommands(out)
		if subs == nil {
			// "help" is a word only to dispatchers: a leaf command would
			// take it as an argument.
			return
		}
		if word := help("help"); word != out {
			t.Errorf("harbormaster %s: help and --help differ", strings.Join(path, " "))
		}
		for _, sub := range subs {
			walk(append(append([]string(nil), path...), sub))
		}
	}
	walk(nil)
	// At least: the top level, check, delegation and its four
	// subcommands, keygen.
	if seen < 8 {
		t.Errorf("only %d commands found in the usage", seen)
	}
	for _, want := range [][]string{{"check"}, {"keygen"}, {"delegation", "compile"}, {"delegation", "canonical"},
		{"delegation", "sign"}, {"delegation", "verify"}} {
		out, _, code := run(t, dir, nil, append(want, "--help")...)
		if code != 0 || !strings.Contains(out, "\nflags:\n") {
			t.Errorf("harbormaster %s --help: exit %d, no flags listed:\n%s", strings.Join(want, " "), code, out)
		}
	}
}

// checkClean fails when a run crashed or exited with a code other than
// 0, 1 or 2, or when an error went unreported.
func checkClean(t *testing.T, args []string, stderr string, code int) {
	t.Helper()
	if strings.Contains(stderr, "panic:") || strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "runtime error") {
		t.Errorf("harbormaster %q crashed:\n%s", args, stderr)
	}
	if code != 0 && code != 1 && code != 2 {
		t.Errorf("harbormaster %q exited %d, want 0, 1 or 2\n%s", args, code, stderr)
	}
	if code == 2 && !strings.Contains(stderr, "harbormaster: error: ") {
		t.Errorf("harbormaster %q exited 2 without a 'harbormaster: error:' line:\n%s", args, stderr)
	}
}

// TestGarbageNeverPanics runs every command with garbage arguments and
// files: no panic or stack trace, exit 0, 1 or 2, and a
// "harbormaster: error:" line whenever the exit is 2.
func TestGarbageNeverPanics(t *testing.T) {
	t.Parallel()
	dir := exampleDir(t)
	write := func(name string, data []byte) string {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	binary := write("binary", []byte("\x00\xff\xfe garbage \x1b[2J \xc3\x28"))
	empty := write("empty", nil)
	yamlBomb := write("bomb.yaml", []byte("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"))
	badYAML := write("bad.yaml", []byte("sentence: [\n"))
	badSQL := write("bad.sql", []byte("CREATE TABLE ((((;\n"))
	badSigners := write("signers", []byte("alice@shop ssh-ed25519 notbase64!!\n"))
	badSig := write("sig", []byte("-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n"))
	badKey := write("key", []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"))
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{binary, empty, yamlBomb, badYAML, badSQL, "adir", "missing", "unstick-orders.yaml", "shop.sql"}

	// Every command path, found from the usage listings, and whether it
	// dispatches to subcommands.
	type cmdPath struct {
		path       []string
		dispatcher bool
	}
	var paths []cmdPath
	var walk func(path []string)
	walk = func(path []string) {
		out, _, _ := run(t, dir, nil, append(append([]string(nil), path...), "--help")...)
		subs := listCommands(out)
		paths = append(paths, cmdPath{path, subs != nil})
		for _, sub := range subs {
			walk(append(append([]string(nil), path...), sub))
		}
	}
	walk(nil)

	// Arguments every command must refuse before doing any work: each list
	// holds a flag no command defines or malformed flag syntax, so that a
	// command such as demo or serve never starts. (Arguments cannot hold
	// NUL bytes; those go through files and stdin below.)
	generic := [][]string{
		{"--no-such-flag"},
		{"-no-such-flag=1"},
		{"--\xff"},
		{"\xff\xfe", "--no-such-flag"},
		{"---", "x"},
		{"-=x"},
		{"--help=maybe"},
		{strings.Repeat("A", 100000), "--no-such-flag"},
		{"x", "--no-such-flag", "y"},
	}
	// Words a dispatcher must refuse as unknown commands.
	words := [][]string{{"\xff\xfe"}, {""}, {" "}, {strings.Repeat("A", 100000)}, {"-"}, {"--"}, {"HELP"}}
	type tc struct {
		args  []string
		stdin []byte
	}
	var cases []tc
	for _, p := range paths {
		lists := generic
		if p.dispatcher {
			lists = append(append([][]string(nil), generic...), words...)
		}
		for _, g := range lists {
			cases = append(cases, tc{args: append(append([]string(nil), p.path...), g...)})
		}
	}
	// The offline commands, with every flag given garbage.
	for _, f := range files {
		cases = append(cases,
			tc{args: []string{"check", "--delegation", f, "--schema", "shop.sql", "--sql", "SELECT 1"}},
			tc{args: []string{"check", "--delegation", "unstick-orders.yaml", "--schema", f, "--sql", "SELECT 1"}},
			tc{args: []string{"check", "--delegation", f, "--schema", f, "--sql", "-"}, stdin: []byte("\x00\xff")},
			tc{args: []string{"delegation", "compile", f, "--schema", "shop.sql"}},
			tc{args: []string{"delegation", "compile", "unstick-orders.yaml", "--schema", f, "--json"}},
			tc{args: []string{"delegation", "canonical", f, "--schema", "shop.sql"}},
			tc{args: []string{"delegation", "sign", "unstick-orders.yaml", "--schema", "shop.sql", "--key", f, "--out", "-"}},
			tc{args: []string{"delegation", "sign", f, "--schema", f, "--key", badKey, "--out", "adir"}},
			tc{args: []string{"delegation", "verify", "unstick-orders.yaml", "--schema", "shop.sql", "--sig", f, "--signers", badSigners}},
			tc{args: []string{"delegation", "verify", "unstick-orders.yaml", "--schema", "shop.sql", "--sig", badSig, "--signers", f}},
			tc{args: []string{"keygen", "--out", filepath.Join("adir", "missing", "k"), "--name", f}},
		)
	}
	for _, sql := range []string{"", ";", "\x00", "SELECT", strings.Repeat("(", 100000), strings.Repeat("SELECT 1 UNION ", 20000) + "SELECT 1",
		"SELECT " + strings.Repeat("-", 50000) + "1", "SELECT " + strings.Repeat("1+", 30000) + "1", "SELECT " + strings.Repeat("ARRAY[", 5000) + "1",
		"UPDATE orders SET status = 'x' WHERE id = 1; DROP TABLE orders", "\xff\xfe"} {
		cases = append(cases, tc{args: []string{"check", "--delegation", "unstick-orders.yaml", "--schema", "shop.sql", "--sql", "-"}, stdin: []byte(sql)})
		if len(sql) < 100000 && !strings.Contains(sql, "\x00") && sql != "" {
			cases = append(cases, tc{args: []string{"check", "--delegation", "unstick-orders.yaml", "--schema", "shop.sql", "--sql", sql, "--json"}})
		}
	}
	cases = append(cases,
		tc{args: []string{"check", "--delegation", "unstick-orders.yaml", "--schema", "shop.sql", "--sql", "-"}, stdin: bytes.Repeat([]byte("x"), 2<<20)},
		tc{args: []string{"check", "--delegation", "unstick-orders.yaml", "--schema", "shop.sql", "--search-path", ",,,\xff", "--sql", "SELECT id FROM orders"}},
		tc{args: []string{"delegation", "compile", "unstick-orders.yaml", "fix-name-typos.yaml", "--schema", "shop.sql"}},
		tc{args: []string{"delegation", "compile", "unstick-orders.yaml", "--schema", "shop.sql", "--target", "postgres://x"}},
		tc{args: []string{"keygen", "--out", "k", "--name", "\xff", "--targets", "\n"}},
	)
	if testing.Short() {
		cases = cases[:len(cases)/4]
	}
	// Four at a time: the runs are independent processes.
	work := make(chan tc)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for c := range work {
				_, errOut, code, err := runErr(dir, c.stdin, c.args...)
				if err != nil {
					t.Error(err)
					continue
				}
				checkClean(t, c.args, errOut, code)
			}
		})
	}
	for _, c := range cases {
		work <- c
	}
	close(work)
	wg.Wait()
	t.Logf("%d garbage command lines over %d command paths", len(cases), len(paths))
}

// TestDoInProcess calls Do directly, as main does, to pin its contract:
// it returns the code instead of exiting and writes only to the given
// streams.
func TestDoInProcess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"--help"}, 0, "usage: harbormaster <command> [flags]", ""},
		{nil, 2, "", "usage: harbormaster <command> [flags]"}, // bad usage: the usage on stderr
		{[]string{"frobnicate"}, 2, "", "harbormaster: error: unknown command \"harbormaster frobnicate\"\nharbormaster: hint: run 'harbormaster --help' for the list of commands\n"},
		{[]string{"delegation", "frobnicate"}, 2, "", "harbormaster: error: unknown command \"harbormaster delegation frobnicate\"\n"},
		{[]string{"check", "--no-such-flag"}, 2, "", "harbormaster: error: "}, // flag errors on stderr, nothing on stdout
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		code := cli.Do(tc.args, strings.NewReader(""), &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.HasPrefix(errb.String(), tc.stderr) {
			t.Errorf("Do(%q) = %d\nstdout: %s\nstderr: %s", tc.args, code, out.String(), errb.String())
		}
		if tc.stdout == "" && out.Len() != 0 {
			t.Errorf("Do(%q) wrote to stdout on an error: %s", tc.args, out.String())
		}
	}
}

// TestKeygenKeyMode checks the private key is written owner-only.
func TestKeygenKeyMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, errOut, code := run(t, dir, nil, "keygen", "--out", "k", "--name", "alice", "--targets", "shop")
	if code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "alice@shop ") {
		t.Errorf("keygen printed no allowed-signers line for alice@shop:\n%s", out)
	}
	st, err := os.Stat(filepath.Join(dir, "k"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v, want 0600", st.Mode().Perm())
	}
}
