package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/leadsman"
	"github.com/harbormaster-dev/harbormaster/internal/lookalike"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// humanClient talks to the API as a human: every request signed with the
// human's SSH key.
type humanClient struct {
	server string
	key    *signing.PrivateKey
	http   *http.Client
}

func newHumanClient(server, keyPath string) (*humanClient, error) {
	if server == "" || keyPath == "" {
		return nil, errors.New("--server and --key are required")
	}
	k, err := signing.LoadPrivateKey(keyPath)
	if err != nil {
		return nil, err
	}
	return &humanClient{server: strings.TrimRight(server, "/"), key: k, http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// apiError is an error body from the server.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (HTTP %d, %s)", e.Message, e.Status, e.Code)
}

// do sends a request; namespace "" sends it unsigned.
func (c *humanClient) do(method, path, namespace string, body any, out any) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequest(method, c.server+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if namespace != "" {
		auth, err := c.key.SignRequest(namespace, method, req.URL.RequestURI(), time.Now(), raw)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var eb struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(data, &eb)
		if eb.Error.Message == "" {
			eb.Error.Message = strings.TrimSpace(string(data))
		}
		return &apiError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

type serverFlags struct{ server, key string }

func (f *serverFlags) register(e *env, fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&f.server, "server", e.getenv("HARBORMASTER_SERVER"), "the control plane's `URL` (or $HARBORMASTER_SERVER)")
	fs.StringVar(&f.key, "key", e.getenv("HARBORMASTER_KEY"), "your SSH private key `FILE` (or $HARBORMASTER_KEY)")
}

// client makes the signed-request client, or reports bad usage.
func (f *serverFlags) client(e *env, fs *flag.FlagSet) (*humanClient, int, bool) {
	c, err := newHumanClient(f.server, f.key)
	if err != nil {
		return nil, e.usageErr(fs, "%v", err), false
	}
	return c, 0, true
}

func runQueue(e *env, args []string) int {
	return e.dispatch("harbormaster queue", []command{
		{"list", "list the requests waiting for a human", runQueueList},
		{"show", "show one request: statement, reasons, preview (computed now if none)", runQueueShow},
		{"approve", "approve a request by signing it with your SSH key", runQueueApprove},
		{"deny", "deny a request by signing the denial with your SSH key", runQueueDeny},
	}, args)
}

func runQueueList(e *env, args []string) int {
	fs := e.flags("harbormaster queue list --server URL --key KEY [--json]", "Lists the requests waiting for a human on the targets your key may act on.")
	var sf serverFlags
	sf.register(e, fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	var out struct {
		Requests []gateway.RequestView `json:"requests"`
	}
	if err := c.do(http.MethodGet, "/v1/queue", signing.NamespaceSession, nil, &out); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	if *asJSON {
		writeJSON(e, out)
		return exitOK
	}
	if len(out.Requests) == 0 {
		fmt.Fprintln(e.stdout, "nothing is waiting")
		return exitOK
	}
	for _, r := range out.Requests {
		why := ""
		if len(r.Reasons) > 0 {
			why = r.Reasons[0]
		}
		if r.CanonicalSQL == "" {
			r.CanonicalSQL = r.SQL
		}
		fmt.Fprintf(e.stdout, "%s  %s  %-12s %-6s %s\n    %s\n    why: %s\n", r.ID, r.Created.Local().Format("2006-01-02 15:04:05"),
			r.Principal, r.Target, age(r.Created), oneLine(r.CanonicalSQL, 120), oneLine(why, 160))
		if l := lookalike.Summary(3, r.CanonicalSQL); len(l) > 0 {
			fmt.Fprintf(e.stdout, "    look-alike characters, marked ⟦…⟧: %s\n", strings.Join(l, "; "))
		}
	}
	return exitOK
}

func age(t time.Time) string { return "waiting " + time.Since(t).Round(time.Second).String() }

// oneLine makes untrusted text safe to print on one terminal line: C0
// controls become spaces, and a character a terminal draws as nothing,
// reads as a control (C1: U+009B is CSI), draws as blank space (U+00A0,
// U+2800, U+3000), that reorders the text around it (bidi controls in a
// string literal can make the statement read otherwise than it runs), or
// that looks like another (a Cyrillic а in "exаmple.com") is printed as
// its code point and name between ⟦ and ⟧ (lookalike.Mark), as is a byte
// that is not UTF-8. A ⟦ of the text is printed so too, so every ⟦ on the
// line is a mark. Cut past n bytes, never inside a mark.
func oneLine(s string, n int) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c == 0x7f {
			b[i] = ' '
		}
	}
	s = lookalike.Mark(string(b))
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if open := strings.LastIndex(s[:n], "⟦"); open >= 0 && !strings.Contains(s[open:n], "⟧") {
			n = open
		}
		s = s[:n] + "..."
	}
	return s
}

// lookalikes prints, under a heading, why the look-alike characters of
// texts are marked: nothing when they have none.
func lookalikes(e *env, heading string, texts ...string) {
	l := lookalike.Summary(maxLookalikes, texts...)
	if len(l) == 0 {
		return
	}
	fmt.Fprintf(e.stdout, "%s\n", heading)
	for _, why := range l {
		fmt.Fprintf(e.stdout, "  ! %s\n", why)
	}
}

// maxLookalikes is the reasons a look-alike warning lists; it then says
// how many more there are.
const maxLookalikes = 12

func (c *humanClient) request(id string) (*gateway.RequestView, error) {
	var v gateway.RequestView
	if err := c.do(http.MethodGet, "/v1/requests/"+id, signing.NamespaceSession, nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func runQueueShow(e *env, args []string) int {
	fs := e.flags("harbormaster queue show ID --server URL --key KEY [--refresh] [--json]",
		"Shows a request: the statement as submitted and as it would run, why it was\n"+
			"referred, and its preview: what it would reach and write, read without running\n"+
			"it. A waiting request is previewed the first time a human asks (this command,\n"+
			"the console); every approver then shares that preview until one asks for a\n"+
			"fresh one with --refresh.")
	var sf serverFlags
	sf.register(e, fs)
	asJSON := fs.Bool("json", false, "print JSON")
	refresh := fs.Bool("refresh", false, "take a fresh preview (of a waiting request) first")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "expected one request ID")
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	v, err := c.request(fs.Arg(0))
	if err == nil && *refresh {
		var fresh gateway.RequestView
		if err = c.do(http.MethodPost, "/v1/requests/"+v.ID+"/preview", signing.NamespaceSession, map[string]string{}, &fresh); err == nil {
			v = &fresh
		}
	}
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	note, err := c.note(v.ID)
	if err != nil {
		e.hintf("the Leadsman's note could not be read: %v", err)
	}
	if *asJSON {
		writeJSON(e, struct {
			*gateway.RequestView
			LeadsmanNote *leadsman.Note `json:"leadsman_note,omitempty"`
		}{v, note})
		return exitOK
	}
	printRequest(e, v)
	printNote(e, note)
	return exitOK
}

// note reads the Leadsman's note on a request: nil when there is none
// (the Leadsman is off, or has not written it yet).
func (c *humanClient) note(id string) (*leadsman.Note, error) {
	var n leadsman.Note
	err := c.do(http.MethodGet, "/v1/requests/"+id+"/note", signing.NamespaceSession, nil, &n)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// printNote prints a Leadsman note, marked as what it is. Its text is a
// model's output, as untrusted as the statement: every line is made safe
// for the terminal.
func printNote(e *env, n *leadsman.Note) {
	if n == nil {
		return
	}
	w := e.stdout
	fmt.Fprintf(w, "note:     %s, by %s", leadsman.Label, oneLine(n.Leadsman, 80))
	if n.Model != "" {
		fmt.Fprintf(w, " (%s %s)", oneLine(n.Provider, 64), oneLine(n.Model, 64))
	}
	fmt.Fprintln(w)
	switch {
	case n.Status == "writing":
		fmt.Fprintf(w, "  (being written)\n")
	case n.Text == "":
		fmt.Fprintf(w, "  (none: %s)\n", oneLine(n.Failure, 300))
	default:
		lines := strings.Split(n.Text, "\n")
		if len(lines) > 40 {
			lines = append(lines[:40], "...")
		}
		for _, l := range lines {
			fmt.Fprintf(w, "  | %s\n", oneLine(l, 300))
		}
	}
}

func printRequest(e *env, v *gateway.RequestView) {
	w := e.stdout
	fmt.Fprintf(w, "request   %s (%s)\n", v.ID, v.Status)
	fmt.Fprintf(w, "from      %s on %s, %s\n", v.Principal, v.Target, v.Created.Local().Format(time.RFC1123))
	lookalikes(e, "warning   the statement holds characters that look like others, marked ⟦…⟧ below:", v.SQL, v.CanonicalSQL)
	fmt.Fprintf(w, "submitted %s\n", oneLine(v.SQL, 2000))
	fmt.Fprintf(w, "runs as   %s\n", oneLine(v.CanonicalSQL, 2000))
	if v.DecidedBy != "" {
		fmt.Fprintf(w, "decided   by %s\n", v.DecidedBy)
	}
	fmt.Fprintf(w, "reasons:\n")
	for _, r := range v.Reasons {
		fmt.Fprintf(w, "  - %s\n", oneLine(r, 500))
	}
	if v.Detail != "" {
		// For humans only: the target's error text, the jurors' answers
		// and why a juror failed, which the agent is not told.
		lookalikes(e, "warning   the detail holds characters that look like others, marked ⟦…⟧ below:", v.Detail)
		fmt.Fprintf(w, "detail    %s\n", oneLine(v.Detail, 2000))
	}
	printPreview(e, v)
}

// printPreview prints a request's preview, or why it has none.
func printPreview(e *env, v *gateway.RequestView) {
	w := e.stdout
	if len(v.Preview) == 0 {
		switch {
		case v.PreviewError != "":
			fmt.Fprintf(w, "preview:  none: %s\n", oneLine(v.PreviewError, 500))
		case v.Status == gateway.StatusWaiting:
			fmt.Fprintf(w, "preview:  none yet\n")
		}
		return
	}
	// Numbers as the preview has them: read as floats, an integer past 2^53
	// would print a value other than the one the approval's digest covers.
	var pv pilot.Preview
	dec := json.NewDecoder(bytes.NewReader(v.Preview))
	dec.UseNumber()
	if err := dec.Decode(&pv); err != nil {
		fmt.Fprintf(w, "preview:  unreadable: %v\n", err)
		return
	}
	more := ""
	if pv.TooMany {
		more = " or more (too many to approve here)"
	}
	fmt.Fprintf(w, "preview:  %s would reach %d row(s)%s%s, read %s without running it (digest %s)\n", strings.ToUpper(pv.Kind), pv.Rows, more,
		map[bool]string{true: " of " + oneLine(pv.Table, 200), false: ""}[pv.Table != ""], pv.Taken.Local().Format(time.RFC1123), shortDigest(pv.Digest))
	label := map[string][2]string{"update": {"before", "sets"}, "delete": {"deletes", ""}, "insert": {"", "adds"}, "select": {"returns", ""}}[pv.Kind]
	after := make([]map[string]any, len(pv.After))
	for i, a := range pv.After {
		img := map[string]any{}
		for k, x := range a {
			img[k] = x
		}
		if i < len(pv.AsWritten) {
			for k, x := range pv.AsWritten[i] {
				img[k] = asWrittenValue(x)
			}
		}
		after[i] = img
	}
	lookalikes(e, "  warning: the values hold characters that look like others, marked ⟦…⟧ below:", imageTexts(pv.Before, after)...)
	printImages(e, label[0], pv.Before)
	printImages(e, label[1], after)
	if pv.ImagesTruncated {
		fmt.Fprintf(w, "  (the first rows only)\n")
	}
	keys := make([]string, 0, len(pv.Defaults))
	for k := range pv.Defaults {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  filled by the table: %s %s (not evaluated)\n", oneLine(k, 100), oneLine(pv.Defaults[k], 300))
	}
	for _, f := range pv.Fires {
		fmt.Fprintf(w, "  sets off (listed, not run): %s\n", oneLine(f, 500))
	}
	fmt.Fprintf(w, "  a preview cannot show:\n")
	for _, l := range pv.Limits {
		fmt.Fprintf(w, "    - %s\n", oneLine(l, 500))
	}
}

// asWrittenValue is a value a preview shows as the statement wrote it: it
// prints as <expression, when it runs> (imageValue).
type asWrittenValue string

// imageValue is one value of a row image as printed: JSON, strings
// quoted, and a value shown as written unquoted as <expression, when it
// runs>, so that it cannot pass for a string value.
func imageValue(v any) string {
	if a, ok := v.(asWrittenValue); ok {
		return "<" + string(a) + ", when it runs>"
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func shortDigest(d string) string {
	if len(d) > 16 {
		return d[:16]
	}
	return d
}

// imageTexts are the columns and values of row images, as text.
func imageTexts(sets ...[]map[string]any) []string {
	var out []string
	for _, rows := range sets {
		for _, r := range rows {
			for _, k := range slices.Sorted(maps.Keys(r)) {
				v, ok := r[k].(string)
				if !ok {
					v = imageValue(r[k])
				}
				out = append(out, k, v)
			}
		}
	}
	return out
}

func printImages(e *env, label string, rows []map[string]any) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(e.stdout, "  %s:\n", label)
	for _, r := range rows {
		keys := make([]string, 0, len(r))
		for k := range r {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + imageValue(r[k])
		}
		fmt.Fprintf(e.stdout, "    %s\n", oneLine(strings.Join(parts, " "), 400))
	}
}

func runQueueApprove(e *env, args []string) int {
	fs := e.flags("harbormaster queue approve ID --server URL --key KEY [--yes] [--json]",
		"Approves a waiting request: fetches the canonical approval (request, target,\n"+
			"statement hash, preview digest, row guard, expiry), shows the request and the\n"+
			"exact approval it would sign, asks you to confirm, signs it with your SSH key\n"+
			"(namespace harbormaster-approval) and sends it. The statement then runs only if\n"+
			"it reaches and writes what its preview showed; otherwise it goes back to the\n"+
			"queue with a fresh preview.\n\n"+
			"Without a terminal on stdin it signs only with --yes. Exit 0 when the statement\n"+
			"ran, 1 when it did not (or you declined), 2 for bad usage.")
	var sf serverFlags
	sf.register(e, fs)
	yes := fs.Bool("yes", false, "sign without asking (for scripts)")
	asJSON := fs.Bool("json", false, "print the request after the approval as JSON (what is shown before goes to stderr)")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "expected one request ID")
	}
	if !*yes && !e.interactive() {
		return e.usageErr(fs, "stdin is not a terminal, so there is no one to confirm: pass --yes to sign without asking")
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	var prop struct {
		Approval string              `json:"approval"`
		Request  gateway.RequestView `json:"request"`
	}
	if err := c.do(http.MethodGet, "/v1/requests/"+fs.Arg(0)+"/approval", signing.NamespaceSession, nil, &prop); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	// Check the proposal against what we were shown before signing it.
	ap, err := acts.ParseApproval([]byte(prop.Approval))
	var pv pilot.Preview
	if err == nil {
		err = json.Unmarshal(prop.Request.Preview, &pv)
	}
	if err != nil || ap.RequestID != prop.Request.ID || ap.StatementSHA256 != marque.StatementHash(prop.Request.CanonicalSQL) ||
		ap.PreviewSHA256 != pv.Digest || ap.PreviewSHA256 != prop.Request.PreviewSHA256 || ap.MaxRows != pv.Rows {
		e.errorf("the server's approval does not match the request it showed; not signing")
		return exitFail
	}
	shown := e
	if *asJSON {
		shown = &env{ctx: e.ctx, stdin: e.stdin, stdout: e.stderr, stderr: e.stderr, getenv: e.getenv}
	}
	printRequest(shown, &prop.Request)
	fmt.Fprintf(shown.stdout, "\nyou sign (namespace %s, key %s):\n  %s\n", signing.NamespaceApproval, c.key.Fingerprint(), oneLine(prop.Approval, 4000))
	fmt.Fprintf(shown.stdout, "it lets the statement run once, reaching at most %d row(s), until %s\n", ap.MaxRows, ap.Expires)
	if !*yes && !e.confirm("Sign and send this approval? [y/N] ") {
		fmt.Fprintln(e.stderr, "not approved: nothing was signed")
		return exitFail
	}
	sig, err := c.key.Sign(signing.NamespaceApproval, []byte(prop.Approval))
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	var v gateway.RequestView
	if err := c.do(http.MethodPost, "/v1/requests/"+ap.RequestID+"/approve", "", map[string]string{"act": prop.Approval, "signature": string(sig)}, &v); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	if *asJSON {
		writeJSON(e, v)
		if v.Status == gateway.StatusExecuted {
			return exitOK
		}
		return exitFail
	}
	fmt.Fprintf(e.stdout, "\napproved (guard: at most %d row(s), signed by key %s): request %s is %s", ap.MaxRows, c.key.Fingerprint(), v.ID, v.Status)
	if v.Status == gateway.StatusExecuted {
		fmt.Fprintf(e.stdout, ", %d row(s) affected\n", v.RowsAffected)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "\n")
	for _, r := range v.Reasons {
		fmt.Fprintf(e.stdout, "  - %s\n", oneLine(r, 500))
	}
	return exitFail
}

// interactive reports whether stdin is a terminal, someone who can answer
// a confirmation.
func (e *env) interactive() bool {
	f, ok := e.stdin.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// confirm asks a yes/no question on stderr and reads the answer from
// stdin: only y or yes is yes.
func (e *env) confirm(question string) bool {
	fmt.Fprint(e.stderr, question)
	line, _ := bufio.NewReader(e.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

func runQueueDeny(e *env, args []string) int {
	fs := e.flags("harbormaster queue deny ID --server URL --key KEY --reason TEXT [--json]",
		"Denies a waiting request: signs the denial (namespace harbormaster-denial) with\nyour SSH key and sends it. The agent sees the request denied, with your reason.")
	var sf serverFlags
	sf.register(e, fs)
	reason := fs.String("reason", "", "why (shown to the agent and kept in the logbook)")
	asJSON := fs.Bool("json", false, "print the request after the denial as JSON")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || *reason == "" {
		return e.usageErr(fs, "expected one request ID and --reason")
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	v, err := c.request(fs.Arg(0))
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	var out gateway.RequestView
	if err := e.postAct(c, "/v1/requests/"+v.ID+"/deny", signing.NamespaceDenial, acts.Denial{Version: 1, Kind: acts.KindDenial,
		RequestID: v.ID, Target: v.Target, StatementSHA256: marque.StatementHash(v.CanonicalSQL), Reason: *reason}, &out); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	if *asJSON {
		writeJSON(e, out)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "denied: request %s is %s\n", out.ID, out.Status)
	return exitOK
}

func runSwitch(e *env, args []string) int {
	fs := e.flags("harbormaster switch tier-b on|off [--target NAME] --server URL --key KEY [--json]",
		"Switches Tier B (the Surveyor's fast path) on or off for the deployment, or for one\n"+
			"target. An operator act: signed with your SSH key (namespace harbormaster-switch)\n"+
			"and logged. Tier B runs for a target only when both its switch and the\n"+
			"deployment's are on; every node sees a change within one poll (1s).")
	var sf serverFlags
	sf.register(e, fs)
	target := fs.String("target", "", "the target `NAME` (default: the deployment switch)")
	asJSON := fs.Bool("json", false, "print the server's answer as JSON")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 || fs.Arg(0) != "tier-b" || (fs.Arg(1) != "on" && fs.Arg(1) != "off") {
		return e.usageErr(fs, "expected: tier-b on|off")
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	var out map[string]any
	body := map[string]any{"name": "tier_b", "target": *target, "on": fs.Arg(1) == "on"}
	if err := c.do(http.MethodPost, "/v1/switches", signing.NamespaceSwitch, body, &out); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	if *asJSON {
		writeJSON(e, out)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "tier_b is %s for %v (by %v)\n", fs.Arg(1), out["scope"], out["by"])
	return exitOK
}

func runDelegationRevoke(e *env, args []string) int {
	fs := e.flags("harbormaster delegation revoke ID --target NAME --server URL --key KEY --reason TEXT [--json]",
		"Revokes a delegation at once on every path: signs a revocation (namespace\n"+
			"harbormaster-revocation) with your SSH key, as a grantor or operator allowed for\n"+
			"the target, and sends it. Revocation is logged and cannot be undone: sign a new\n"+
			"delegation instead.")
	var sf serverFlags
	sf.register(e, fs)
	target := fs.String("target", "", "the delegation's target `NAME`")
	reason := fs.String("reason", "", "why")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || *target == "" || *reason == "" {
		return e.usageErr(fs, "expected one delegation ID, --target and --reason")
	}
	c, code, ok := sf.client(e, fs)
	if !ok {
		return code
	}
	if err := e.postAct(c, "/v1/delegations/"+fs.Arg(0)+"/revoke", signing.NamespaceRevocation, acts.Revocation{Version: 1,
		Kind: acts.KindRevocation, DelegationID: fs.Arg(0), Target: *target, Reason: *reason, Time: time.Now().UTC().Format(time.RFC3339)}, nil); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	if *asJSON {
		writeJSON(e, map[string]any{"delegation_id": fs.Arg(0), "target": *target, "revoked": true})
		return exitOK
	}
	fmt.Fprintf(e.stdout, "revoked %s\n", fs.Arg(0))
	return exitOK
}
