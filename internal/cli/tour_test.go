package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/testtools"
)

// The README's tour is checked by running it. A fenced block in the
// README is preceded by one of these comments:
//
//	<!-- tour -->                       run its "$ " commands in order, in one
//	                                    shell session (cd and export carry over),
//	                                    and compare each output with the sample
//	<!-- tour: serve -->                start the command (an sh block of one
//	                                    line) in the background: the serving demo
//	                                    the rest of the tour talks to
//	<!-- tour: not checked: REASON -->  say why a block is not run
//
// Every fenced block that holds a command (an sh block, or a "$ " line)
// carries one of them. A sample matches its output after placeholders:
// ids, hashes, keys, tokens, times, durations, ports, pids and the demo's
// directories match any value of their kind, the same sample value the
// same actual value throughout the tour (so a request id a sample shows
// is the one a later command names); a line "..." matches any lines, and
// "..." in a line any text; "   (abridged...)" at the end of a line is a
// note. "# exits N" at the end of a command: it fails with status N.
// /tmp/hm-demo and http://127.0.0.1:8080 stand for the serving demo's
// directory and API.

var tourMarker = regexp.MustCompile(`^<!-- tour(?:: (serve|not checked: .+))? -->$`)

type tourBlock struct {
	line   int    // of the opening fence, 1-based
	lang   string // the fence's info string
	mode   string // "check", "serve", "skip"; "" when unmarked
	reason string
	text   []string
}

// readmeBlocks returns the README's fenced blocks with their markers.
func readmeBlocks(t *testing.T, path string) []tourBlock {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var blocks []tourBlock
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		b := tourBlock{line: i + 1, lang: strings.TrimPrefix(lines[i], "```")}
		for k := i - 1; k >= 0; k-- {
			if strings.TrimSpace(lines[k]) == "" {
				continue
			}
			if m := tourMarker.FindStringSubmatch(lines[k]); m != nil {
				switch {
				case m[1] == "":
					b.mode = "check"
				case m[1] == "serve":
					b.mode = "serve"
				default:
					b.mode, b.reason = "skip", strings.TrimPrefix(m[1], "not checked: ")
				}
			}
			break
		}
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			b.text = append(b.text, lines[i])
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// holdsCommands says whether a block shows commands a reader would run.
func (b tourBlock) holdsCommands() bool {
	if b.lang == "sh" {
		return true
	}
	for _, l := range b.text {
		if strings.HasPrefix(l, "$ ") {
			return true
		}
	}
	return false
}

// tourStep is one "$ " command of a block and its sample output.
type tourStep struct {
	cmd    string
	sample []string
}

func tourSteps(b tourBlock) []tourStep {
	var steps []tourStep
	for i := 0; i < len(b.text); i++ {
		l := b.text[i]
		if !strings.HasPrefix(l, "$ ") {
			if len(steps) == 0 {
				continue
			}
			steps[len(steps)-1].sample = append(steps[len(steps)-1].sample, l)
			continue
		}
		cmd := strings.TrimPrefix(l, "$ ")
		for strings.HasSuffix(cmd, "\\") && i+1 < len(b.text) {
			i++
			cmd = strings.TrimSuffix(cmd, "\\") + " " + strings.TrimSpace(b.text[i])
		}
		steps = append(steps, tourStep{cmd: cmd})
	}
	for i := range steps {
		s := steps[i].sample
		for len(s) > 0 && strings.TrimSpace(s[len(s)-1]) == "" {
			s = s[:len(s)-1]
		}
		steps[i].sample = s
	}
	return steps
}

// placeholder is a kind of value that differs between runs; in a sample
// it matches any value of its kind. bind: the same sample text must stand
// for the same actual text everywhere.
type placeholder struct {
	sample *regexp.Regexp
	actual string
	bind   bool
}

var placeholders = []placeholder{
	{regexp.MustCompile(`/tmp/harbormaster-demo-[0-9]+`), `\S*?/harbormaster-demo-[0-9]+`, true},
	{regexp.MustCompile(`\b(?:req|jdg|aud)_[a-z0-9]{24}\b`), `(?:req|jdg|aud)_[a-z0-9]{24}`, true},
	{regexp.MustCompile(`SHA256:[A-Za-z0-9+/]{43}`), `SHA256:[A-Za-z0-9+/]{43}`, true},
	{regexp.MustCompile(`harbormaster-demo\+[0-9a-f]{8}\+[A-Za-z0-9+/=]+`), `harbormaster-demo\+[0-9a-f]{8}\+[A-Za-z0-9+/=]+`, true},
	{regexp.MustCompile(`\b[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})`),
		`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})`, false},
	{regexp.MustCompile(`\b[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\b`), `[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}`, false},
	{regexp.MustCompile(`\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} UTC`),
		`(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} UTC`, false},
	{regexp.MustCompile(`127\.0\.0\.1:[0-9]+`), `127\.0\.0\.1:[0-9]+`, false},
	{regexp.MustCompile(`\bpid [0-9]+`), `pid [0-9]+`, false},
	{regexp.MustCompile(`\b[0-9]+(?:\.[0-9]+)?(?:ns|µs|ms|s|m|h)(?:[0-9]+(?:\.[0-9]+)?(?:ns|µs|ms|s|m|h))*\b`),
		`[0-9]+(?:\.[0-9]+)?(?:ns|µs|ms|s|m|h)(?:[0-9]+(?:\.[0-9]+)?(?:ns|µs|ms|s|m|h))*`, false},
}

// randomRun is a run of token characters that holds a digit: a hash, a
// key, a token, a nonce. A delegation id is not one: it is the hash of the
// delegation's canonical bytes, the same on every run.
var randomRun = regexp.MustCompile(`[A-Za-z0-9+/=]{8,}`)

const randomActual = `[A-Za-z0-9+/=_-]+`

// linePattern is a sample line compiled: a regexp and, for each of its
// groups, the sample text that group binds (or "" when it binds nothing).
type linePattern struct {
	re    *regexp.Regexp
	binds []string
	any   bool // the line "...": any lines
}

func compileLine(sample string) linePattern {
	sample = strings.TrimRight(sample, " ")
	if i := strings.Index(sample, "   (abridged"); i >= 0 && strings.HasSuffix(sample, ")") {
		sample = sample[:i]
	}
	sample = strings.TrimRight(sample, " ")
	if strings.TrimSpace(sample) == "..." {
		return linePattern{any: true}
	}
	type span struct {
		lo, hi int
		actual string
		bind   bool
	}
	var spans []span
	taken := make([]bool, len(sample))
	add := func(lo, hi int, actual string, bind bool) {
		for i := lo; i < hi; i++ {
			if taken[i] {
				return
			}
		}
		for i := lo; i < hi; i++ {
			taken[i] = true
		}
		spans = append(spans, span{lo, hi, actual, bind})
	}
	for _, p := range placeholders {
		for _, m := range p.sample.FindAllStringIndex(sample, -1) {
			add(m[0], m[1], p.actual, p.bind)
		}
	}
	for _, m := range randomRun.FindAllStringIndex(sample, -1) {
		run := sample[m[0]:m[1]]
		if !strings.ContainsAny(run, "0123456789") || strings.HasSuffix(sample[:m[0]], "dlg_") {
			continue
		}
		add(m[0], m[1], randomActual, true)
	}
	for i := 0; i+3 <= len(sample); i++ {
		if sample[i:i+3] == "..." && !taken[i] {
			add(i, i+3, `.*`, false)
		}
	}
	// In order of position.
	for i := 1; i < len(spans); i++ {
		for j := i; j > 0 && spans[j].lo < spans[j-1].lo; j-- {
			spans[j], spans[j-1] = spans[j-1], spans[j]
		}
	}
	var re strings.Builder
	var binds []string
	re.WriteString("^")
	at := 0
	for _, s := range spans {
		re.WriteString(regexp.QuoteMeta(sample[at:s.lo]))
		re.WriteString("(" + s.actual + ")")
		if s.bind {
			binds = append(binds, sample[s.lo:s.hi])
		} else {
			binds = append(binds, "")
		}
		at = s.hi
	}
	re.WriteString(regexp.QuoteMeta(sample[at:]))
	re.WriteString("$")
	return linePattern{re: regexp.MustCompile(re.String()), binds: binds}
}

// matchLines matches the sample's patterns against the output's lines,
// extending bindings; it returns the bindings of a match, or nil.
func matchLines(pats []linePattern, out []string, bound map[string]string) map[string]string {
	if len(pats) == 0 {
		if len(out) == 0 {
			return bound
		}
		return nil
	}
	p := pats[0]
	if p.any {
		for k := 0; k <= len(out); k++ {
			if b := matchLines(pats[1:], out[k:], bound); b != nil {
				return b
			}
		}
		return nil
	}
	if len(out) == 0 {
		return nil
	}
	m := p.re.FindStringSubmatch(out[0])
	if m == nil {
		return nil
	}
	next := bound
	copied := false
	for i, key := range p.binds {
		if key == "" {
			continue
		}
		if v, ok := next[key]; ok {
			if v != m[i+1] {
				return nil
			}
			continue
		}
		if !copied {
			next = make(map[string]string, len(bound)+1)
			for k, v := range bound {
				next[k] = v
			}
			copied = true
		}
		next[key] = m[i+1]
	}
	return matchLines(pats[1:], out[1:], next)
}

// tourSession is the reader's terminal: a work directory holding the
// examples and the repository's testdata, the current directory and
// exported variables, and what the samples bound so far.
type tourSession struct {
	t       *testing.T
	root    string // the work directory
	cwd     string
	env     []string
	bound   map[string]string
	literal map[string]string // README text -> this run's text, in commands and samples
	script  string            // script(1), for a command that asks
	lastKey time.Time
	vkey    string // the serving demo's verifier key
}

var (
	exitsComment = regexp.MustCompile(`#\s*exits ([0-9]+)\s*$`)
	demoVKey     = regexp.MustCompile(`harbormaster-demo\+[0-9a-f]{8}\+[A-Za-z0-9+/=]+`)
	cdLine       = regexp.MustCompile(`^cd (\S+)$`)
	exportLine   = regexp.MustCompile(`^export ([A-Z_]+)=(\S+)$`)
)

// subst rewrites README text into this run's: the literal stand-ins, then
// every value a sample bound.
func (s *tourSession) subst(text string) string {
	for k, v := range s.literal {
		text = strings.ReplaceAll(text, k, v)
	}
	for k, v := range s.bound {
		text = strings.ReplaceAll(text, k, v)
	}
	if s.vkey != "" {
		text = demoVKey.ReplaceAllLiteralString(text, s.vkey)
	}
	return text
}

func (s *tourSession) run(readmeLine int, st tourStep) {
	t := s.t
	t.Helper()
	cmd := s.subst(st.cmd)
	if m := cdLine.FindStringSubmatch(cmd); m != nil {
		s.cwd = filepath.Join(s.cwd, m[1])
		if fi, err := os.Stat(s.cwd); err != nil || !fi.IsDir() {
			t.Fatalf("README.md:%d: $ %s: no such directory", readmeLine, st.cmd)
		}
		return
	}
	if m := exportLine.FindStringSubmatch(cmd); m != nil {
		s.env = append(s.env, m[1]+"="+m[2])
		return
	}
	// A signed request is single-use within its second: two in one
	// second would be refused as a replay, which no reader sees.
	if strings.Contains(cmd, "--key") {
		if d := time.Until(s.lastKey.Add(1100 * time.Millisecond)); d > 0 {
			time.Sleep(d)
		}
		defer func() { s.lastKey = time.Now() }()
	}
	answers := len(st.sample) > 0 && strings.HasSuffix(strings.TrimSpace(st.sample[indexOfPrompt(st.sample)]), "[y/N] y")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var c *exec.Cmd
	if answers {
		// The sample answers a question: on a terminal, through script(1),
		// answering once the question is asked.
		c = exec.CommandContext(ctx, s.script, "-qec", "set -o pipefail; "+cmd, "/dev/null")
	} else {
		c = exec.CommandContext(ctx, "bash", "-c", "set -o pipefail; "+cmd)
	}
	c.Dir = s.cwd
	c.Env = append(os.Environ(), s.env...)
	if answers {
		// script(1) runs the command with $SHELL, which CI (root, no
		// login shell) leaves unset, so /bin/sh: dash has no pipefail.
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Fatal(err)
		}
		c.Env = append(c.Env, "SHELL="+bash)
	}
	var out lockedBuffer
	c.Stdout, c.Stderr = &out, &out
	var stdin io.WriteCloser
	if answers {
		var err error
		if stdin, err = c.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if answers {
		for !strings.Contains(out.String(), "[y/N] ") && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		_, _ = io.WriteString(stdin, "y\n")
		defer stdin.Close()
	}
	err := c.Wait()
	got := strings.ReplaceAll(out.String(), "\r\n", "\n")
	if m := exitsComment.FindStringSubmatch(cmd); m != nil {
		// "# exits N": the README says the command fails, and how.
		var ee *exec.ExitError
		if !errors.As(err, &ee) || strconv.Itoa(ee.ExitCode()) != m[1] {
			t.Errorf("README.md:%d: $ %s: %v, want exit status %s\n%s", readmeLine, st.cmd, err, m[1], got)
		}
		err = nil
	}
	if err != nil {
		t.Fatalf("README.md:%d: $ %s\nran as: %s\nfailed: %v\n%s", readmeLine, st.cmd, cmd, err, got)
	}
	outLines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if got == "" {
		outLines = nil
	}
	for i := range outLines {
		outLines[i] = strings.TrimRight(outLines[i], " ")
	}
	pats := make([]linePattern, len(st.sample))
	for i, l := range st.sample {
		pats[i] = compileLine(s.subst(l))
	}
	b := matchLines(pats, outLines, s.bound)
	if b == nil {
		t.Errorf("README.md:%d: the sample of $ %s\ndoes not match its output (ran as: %s)\n--- sample:\n%s\n--- output:\n%s",
			readmeLine, st.cmd, cmd, strings.Join(st.sample, "\n"), got)
		return
	}
	s.bound = b
}

func indexOfPrompt(sample []string) int {
	for i, l := range sample {
		if strings.Contains(l, "[y/N] ") {
			return i
		}
	}
	return 0
}

// serve starts the serving demo of a "tour: serve" block and waits until
// it serves; its directory and API stand in for /tmp/hm-demo and
// http://127.0.0.1:8080 from then on.
func (s *tourSession) serve(readmeLine int, b tourBlock) {
	t := s.t
	t.Helper()
	if len(b.text) != 1 {
		t.Fatalf("README.md:%d: a tour: serve block holds one command", readmeLine)
	}
	dir := filepath.Join(t.TempDir(), "hm-demo")
	s.literal["/tmp/hm-demo"] = dir
	cmd := s.subst(b.text[0])
	c := exec.Command("bash", "-c", "exec "+cmd)
	c.Dir = s.cwd
	c.Env = append(os.Environ(), s.env...)
	var out lockedBuffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	t.Cleanup(func() {
		_ = c.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = c.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "Serving until interrupted") {
		select {
		case err := <-done:
			t.Fatalf("README.md:%d: %s exited at start: %v\n%s", readmeLine, cmd, err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("README.md:%d: %s did not start serving:\n%s", readmeLine, cmd, out.String())
		}
	}
	var inf struct {
		APIURL string `json:"api_url"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "info.json"))
	if err != nil || json.Unmarshal(raw, &inf) != nil || inf.APIURL == "" {
		t.Fatalf("README.md:%d: the demo's info.json: %v\n%s", readmeLine, err, raw)
	}
	s.literal["http://127.0.0.1:8080"] = inf.APIURL
	// The verifier key the README's commands show is the one this demo
	// prints (its key is new in every directory).
	vkey := regexp.MustCompile(`--vkey '(harbormaster-demo\+[^']+)'`).FindStringSubmatch(out.String())
	if vkey == nil {
		t.Fatalf("README.md:%d: the demo prints no --vkey:\n%s", readmeLine, out.String())
	}
	s.vkey = vkey[1]
}

// TestReadmeTour runs the README's tour as a reader would, with this test
// binary as the harbormaster on PATH (TestMain), and checks that every
// sample is what its command prints, so the tour cannot drift from the
// code. Every block that shows commands is either checked or says why not.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	blocks := readmeBlocks(t, filepath.Join("..", "..", "README.md"))
	var checked, skipped int
	for _, b := range blocks {
		if !b.holdsCommands() {
			continue
		}
		switch b.mode {
		case "":
			t.Errorf("README.md:%d: a block of commands with no <!-- tour --> or <!-- tour: not checked: REASON --> before it", b.line)
		case "skip":
			skipped++
		default:
			checked++
		}
	}
	if t.Failed() {
		return
	}
	if checked == 0 {
		t.Fatal("the README marks no block of its tour as checked")
	}
	needPostgres(t)
	testtools.Need(t, "ssh-keygen", "Debian: apt-get install openssh-client")
	s := &tourSession{
		t:       t,
		root:    exampleRoot(t),
		bound:   map[string]string{},
		literal: map[string]string{},
		script:  testtools.Need(t, "script", "Debian: apt-get install bsdutils"),
	}
	s.cwd = s.root
	for _, b := range blocks {
		switch b.mode {
		case "serve":
			s.serve(b.line, b)
		case "check":
			for _, st := range tourSteps(b) {
				s.run(b.line, st)
			}
		}
	}
	t.Logf("%d blocks checked, %d not checked (each says why)", checked, skipped)
}

// exampleRoot is a directory laid out as the repository's root is for
// the tour: a copy of examples/ (the tour writes keys and signatures
// there) and the repository's testdata.
func exampleRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	ex := filepath.Join(root, "examples")
	if err := os.Mkdir(ex, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(filepath.Join("..", "..", "examples"), ex); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(filepath.Join("..", "..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, filepath.Join(root, "testdata")); err != nil {
		t.Fatal(err)
	}
	return root
}

func copyTree(src, dst string) error {
	return filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
}

// TestTourSampleMatching checks the matcher the tour test rests on: a
// placeholder matches a value of its kind and binds it, a line "..."
// matches any lines, and a changed count or word does not match.
func TestTourSampleMatching(t *testing.T) {
	t.Parallel()
	sample := []string{
		"-> referred to a human, request req_4v4tbt7b6bjlmxdlpflhxwz4:",
		"...",
		"ok: 17 entries, head 17 1a8cb096..., 1 checkpoints   (abridged)",
		"again req_4v4tbt7b6bjlmxdlpflhxwz4 after 738ms, delegation dlg_69e109c6c9fc212b79ae27d5",
	}
	pats := make([]linePattern, len(sample))
	for i, l := range sample {
		pats[i] = compileLine(l)
	}
	ok := []string{
		"-> referred to a human, request req_2al72w5lhu3wdqo5u3a2g2hk:",
		"a", "b",
		"ok: 17 entries, head 17 ffee0011223344, 1 checkpoints",
		"again req_2al72w5lhu3wdqo5u3a2g2hk after 1.2s, delegation dlg_69e109c6c9fc212b79ae27d5",
	}
	b := matchLines(pats, ok, map[string]string{})
	if b == nil || b["req_4v4tbt7b6bjlmxdlpflhxwz4"] != "req_2al72w5lhu3wdqo5u3a2g2hk" {
		t.Fatalf("no match, or a wrong binding: %v", b)
	}
	for i, bad := range [][]string{
		{ok[0], ok[3], strings.Replace(ok[4], "req_2al72w5lhu3wdqo5u3a2g2hk", "req_aaaaaaaaaaaaaaaaaaaaaaaa", 1)},
		{ok[0], strings.Replace(ok[3], "17 entries", "18 entries", 1), ok[4]},
		{ok[0], ok[3], strings.Replace(ok[4], "dlg_69e1", "dlg_69e2", 1)},
		{ok[0], ok[3]},
	} {
		if matchLines(pats, bad, map[string]string{}) != nil {
			t.Errorf("case %d matched:\n%s", i, strings.Join(bad, "\n"))
		}
	}
}
