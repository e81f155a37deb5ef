package layers_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/harbormaster-dev/harbormaster/"

// rule forbids a package (and its subpackages) to depend, directly or not,
// on any of the listed packages (and their subpackages).
type rule struct {
	pkg    string
	forbid []string
	why    string
}

var rules = []rule{
	{"internal/pilot", []string{"internal/store", "internal/logbook", "internal/switches", "internal/audit",
		"internal/surveyor", "internal/llm", "internal/gateway", "internal/httpapi", "internal/mcpserver", "internal/cli", "internal/config"},
		"the Pilot verifies everything itself from what it is handed and may run in its own process"},
	{"internal/store", []string{"internal/"}, "the store holds no domain logic"},
	{"internal/sqlcheck", []string{"internal/store", "internal/pilot", "internal/gateway", "internal/llm", "internal/surveyor"}, "the static check is pure"},
	{"internal/bound", []string{"internal/store", "internal/pilot", "internal/gateway", "internal/llm", "internal/surveyor"}, "compiling a delegation is pure"},
	{"internal/marque", []string{"internal/store", "internal/pilot", "internal/gateway", "internal/logbook"}, "the marque is a token, not a service"},
	{"internal/signing", []string{"internal/store", "internal/pilot", "internal/gateway", "internal/logbook"}, "signatures are pure"},
	{"internal/surveyor", []string{"internal/store", "internal/pilot", "internal/gateway", "internal/logbook", "internal/audit"},
		"the panel sees only what it is handed"},
	{"internal/llm", []string{"internal/store", "internal/pilot", "internal/gateway", "internal/logbook", "internal/surveyor"}, "provider clients are transport"},
	{"internal/cover", []string{"internal/store", "internal/pilot", "internal/gateway", "internal/logbook", "internal/surveyor", "internal/audit", "internal/switches"},
		"CoVer compiles sentences and measures panels: it sees only the catalog, sample rows and the models it is handed"},
	{"internal/logbook", []string{"internal/gateway", "internal/pilot", "internal/httpapi", "internal/cli"}, "the logbook is below the statement path"},
	{"internal/registry", []string{"internal/gateway", "internal/pilot", "internal/logbook", "internal/signing", "internal/marque",
		"internal/acts", "internal/surveyor", "internal/llm", "internal/audit", "internal/switches", "internal/route",
		"internal/httpapi", "internal/mcpserver", "internal/pgwire", "internal/console", "internal/scope", "internal/node", "internal/cli"},
		"the registry holds the delegations in force and nothing else: it verifies no act, writes no logbook, executes nothing and knows no front"},
	{"internal/gateway", []string{"internal/httpapi", "internal/mcpserver", "internal/pgwire", "internal/cli", "internal/node"}, "the statement path knows no front"},
	{"internal/node", []string{"internal/cli"}, "a node is wired without the commands"},
	{"internal/ledger", []string{"internal/gateway", "internal/httpapi", "internal/mcpserver", "internal/pgwire", "internal/console",
		"internal/cli", "internal/node", "internal/route", "internal/surveyor", "internal/audit", "internal/llm", "internal/switches",
		"internal/quota", "internal/leadsman"},
		"the ledger is the requests' lifecycle below the statement path: it knows no route, no panel, no front"},
	{"internal/referrals", []string{"internal/gateway", "internal/httpapi", "internal/mcpserver", "internal/pgwire", "internal/console",
		"internal/cli", "internal/node", "internal/surveyor", "internal/llm", "internal/audit", "internal/switches", "internal/route",
		"internal/registry", "internal/leadsman", "internal/backtest", "internal/cover", "internal/shadow", "internal/bench", "internal/faults"},
		"the referral service admits, announces and previews referrals below the statement path: it knows no front, no panel, no model, " +
			"and it executes nothing; of what executes statements it reaches the Pilot's preview role only (TestReferralsReachOnlyThePreview)"},
	{"internal/buildinfo", []string{"internal/store", "internal/pilot", "internal/gateway", "internal/logbook", "internal/httpapi", "internal/node", "internal/cli"},
		"what the binary is built from is read, not served"},
	{"internal/httpapi", []string{"internal/cli", "internal/mcpserver"}, "a front knows no wiring"},
	{"internal/mcpserver", []string{"internal/cli"}, "a front knows no wiring"},
	{"internal/mcpserver", []string{"internal/httpapi", "internal/pgwire", "internal/console"},
		"a front knows no other front: the views both agents' fronts render are internal/scope's, and the stdio server reaches the API over HTTP"},
	{"internal/scope", []string{"internal/httpapi", "internal/mcpserver", "internal/pgwire", "internal/console", "internal/cli", "internal/node",
		"internal/backtest", "internal/leadsman"},
		"what an agent is shown of its scope is drawn from the gateway's delegations and the bounds' catalogs, for every front alike"},
	{"internal/pgwire", []string{"internal/cli", "internal/node", "internal/httpapi", "internal/mcpserver",
		"internal/backtest", "internal/leadsman", "internal/console"},
		"an agents' front knows no wiring, no other front, nothing of the grantors' backtest or the Leadsman's notes"},
	{"internal/console", []string{"internal/cli", "internal/node", "internal/httpapi", "internal/mcpserver", "internal/pgwire"},
		"the console is a front: it acts through the gateway, as the API does, and knows no wiring"},
	{"internal/mcpserver", []string{"internal/backtest"}, "the agents' front shows nothing of the grantors' backtest"},
	{"internal/leadsman", []string{"internal/gateway", "internal/acts", "internal/pilot", "internal/audit", "internal/surveyor",
		"internal/marque", "internal/signing", "internal/switches", "internal/route", "internal/httpapi", "internal/mcpserver",
		"internal/console", "internal/node", "internal/cli", "internal/backtest"},
		"the Leadsman has no authority: it links nothing that approves, denies, executes, audits or routes"},
	{"internal/backtest", []string{"internal/gateway", "internal/pilot", "internal/acts", "internal/audit", "internal/surveyor",
		"internal/llm", "internal/leadsman", "internal/marque", "internal/switches", "internal/httpapi", "internal/mcpserver",
		"internal/node", "internal/cli"},
		"a backtest reads the logbook and checks statements: it executes nothing and is no front an agent reaches"},
}

// leadsmanImporters are the only packages that may import the Leadsman
// (and so read its notes): the fronts that show notes to humans and the
// wiring that starts it. No approval, denial, execution or audit code is
// among them, so nothing on those paths can read what a model wrote.
var leadsmanImporters = []string{"internal/console", "internal/httpapi", "internal/cli", "internal/node", "internal/leadsman"}

// noteRepository matches a use of the store's notes repository or table.
var noteRepository = regexp.MustCompile(`\bstore\.(NewNotes|Notes|Note|NoteStatus|NoteWriting|NoteWritten|NoteFailed|Unnoted)\b|\bleadsman_notes\b`)

// allowOnly lists packages that may import nothing of the module beyond
// the listed ones.
var allowOnly = map[string][]string{
	// The schema of the ledger's entries, which the backtest (which may
	// execute nothing) reads as the ledger writes it.
	"internal/ledger/entry": {},
	// The static check and its bounded memo (internal/memo imports
	// nothing of the module).
	"internal/route": {"internal/sqlcheck", "internal/memo"},
	// What marks look-alikes in agent text for the fronts and the webhook
	// is pure.
	"internal/lookalike": {},
}

// importOnly lists packages that may import nothing of the module
// directly beyond the listed ones (what they depend on through those is
// the rules' business).
var importOnly = map[string][]string{
	// The delegations in force are read from the store and compiled
	// bounds; the skew and the known delegations go to the metrics.
	"internal/registry": {"internal/store", "internal/bound", "internal/sqlcheck", "internal/metrics"},
	// The agents' scope is built from the gateway's delegations, the
	// bounds and the catalogs: nothing else.
	"internal/scope": {"internal/gateway", "internal/bound", "internal/sqlcheck"},
	// The requests' lifecycle: their rows, the logbook entries that record
	// them, the marque's statement hash and the Pilot's result and
	// receipts, and a bounded memo (of the executed texts it logged).
	"internal/ledger": {"internal/store", "internal/logbook", "internal/marque", "internal/pilot", "internal/memo", "internal/ledger/entry"},
	// The referral service: the requests' ledger (waiting counts, the
	// stored preview), the Pilot's preview role and its types, the check's
	// reason codes, the rate's buckets, the metrics and the look-alike
	// marks of the webhook's text.
	"internal/referrals": {"internal/ledger", "internal/pilot", "internal/sqlcheck", "internal/quota", "internal/metrics", "internal/lookalike"},
}

// referralsPilotNames are the only names of internal/pilot the referral
// service may use: the preview role's result and its refusal. Nothing of
// a referred statement may run until a human asks (DESIGN.md invariant
// 10), and then only its read-only preview.
var referralsPilotNames = []string{"Preview", "Previewer", "ErrNotPreviewable"}

// pilotName matches a use of a name of internal/pilot; executing matches
// a call of a method that runs or holds a statement on a target.
var (
	pilotName = regexp.MustCompile(`\bpilot\.([A-Za-z_]\w*)`)
	executing = regexp.MustCompile(`\.(Execute|ExecuteApproved|Rehearse|Describe|Begin|VoidReceipt|Savepoint|Commit|Exec|Query|QueryRow)\(`)
)

// sqlImporters are the only packages that may import database/sql: the
// store (every table), the ledger (the request rows it writes inside
// logbook entries' transactions), the logbook (which runs those
// transactions) and the Pilot (the target's connection, not the control
// store's). The statement path holds no store transaction.
var sqlImporters = []string{"internal/store", "internal/ledger", "internal/logbook", "internal/pilot"}

// requestRepository matches a use of the store's requests repository.
var requestRepository = regexp.MustCompile(`\bstore\.(NewRequests|Requests|Request|RequestFilter|RequestOutcome|RequestStatus|Decision)\b`)

// requestReaders may reach the requests repository besides the ledger
// and the store: the Leadsman reads waiting requests' rows, and writes
// none.
var requestReaders = []string{"internal/store", "internal/ledger", "internal/leadsman"}

func under(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, strings.TrimSuffix(prefix, "/")+"/")
}

// graph is every package of the module with its dependencies (not its
// tests'), from go list.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "github.com/harbormaster-dev/harbormaster/...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	g := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(f[0], mod)
		for _, d := range f[1:] {
			if strings.HasPrefix(d, mod) {
				g[pkg] = append(g[pkg], strings.TrimPrefix(d, mod))
			}
		}
		if _, ok := g[pkg]; !ok {
			g[pkg] = nil
		}
	}
	return g
}

// TestLayers fails when a package depends on a layer it must not reach.
func TestLayers(t *testing.T) {
	g := graph(t)
	for _, must := range []string{"internal/pilot", "internal/gateway", "internal/route", "internal/store", "internal/cli"} {
		if _, ok := g[must]; !ok {
			t.Fatalf("go list did not list %s: the graph is wrong", must)
		}
	}
	for pkg, deps := range g {
		for _, r := range rules {
			if !under(pkg, r.pkg) || strings.HasSuffix(pkg, "test") {
				continue
			}
			for _, d := range deps {
				for _, f := range r.forbid {
					if under(d, f) && !under(d, r.pkg) {
						t.Errorf("%s depends on %s: %s", pkg, d, r.why)
					}
				}
			}
		}
		if allowed, ok := allowOnly[pkg]; ok {
			for _, d := range deps {
				if !slices.Contains(allowed, d) {
					t.Errorf("%s depends on %s; it may depend on %v only", pkg, d, allowed)
				}
			}
		}
		if pkg != "cmd/harbormaster" && !under(pkg, "internal/cli") && slices.Contains(deps, "internal/cli") {
			t.Errorf("%s depends on internal/cli: only cmd/harbormaster wires the system", pkg)
		}
		if pkg != "cmd/harbormaster" && !under(pkg, "internal/cli") && !under(pkg, "internal/node") &&
			!strings.HasSuffix(pkg, "test") && slices.Contains(deps, "internal/node") {
			t.Errorf("%s depends on internal/node: only the commands start nodes", pkg)
		}
	}
}

// TestDirectImports fails when a package of importOnly imports a package
// of the module it does not list.
func TestDirectImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/harbormaster-dev/harbormaster/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		allowed, ok := importOnly[pkg]
		if !ok {
			continue
		}
		seen++
		for _, imp := range f[1:] {
			if d, ours := strings.CutPrefix(imp, mod); ours && !slices.Contains(allowed, d) {
				t.Errorf("%s imports %s; it may import %v only", pkg, d, allowed)
			}
		}
	}
	if seen != len(importOnly) {
		t.Fatalf("go list listed %d of the %d packages of importOnly", seen, len(importOnly))
	}
}

// TestLeadsmanIsReadOnlyByTheFronts: only leadsmanImporters import
// internal/leadsman, and only the Leadsman itself (and the store, which
// defines it) touches the notes repository or its table; the packages on
// the approval, denial, execution and audit paths do not depend on the
// Leadsman even indirectly.
func TestLeadsmanIsReadOnlyByTheFronts(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Dir}} | {{join .Imports " "}} | {{join .GoFiles " "}} | {{join .Deps " "}}`,
		"github.com/harbormaster-dev/harbormaster/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, " | ")
		head := strings.Fields(parts[0])
		pkg, dir := strings.TrimPrefix(head[0], mod), head[1]
		for _, imp := range strings.Fields(parts[1]) {
			if under(strings.TrimPrefix(imp, mod), "internal/leadsman") {
				found = found || pkg == "internal/httpapi"
				if !slices.ContainsFunc(leadsmanImporters, func(p string) bool { return under(pkg, p) }) {
					t.Errorf("%s imports %s: only %v may read the Leadsman's notes", pkg, imp, leadsmanImporters)
				}
			}
		}
		for _, path := range []string{"internal/gateway", "internal/acts", "internal/pilot", "internal/audit", "internal/surveyor", "internal/route", "internal/switches"} {
			if under(pkg, path) && !strings.HasSuffix(pkg, "test") && strings.Contains(" "+parts[3]+" ", " "+mod+"internal/leadsman ") {
				t.Errorf("%s depends on the Leadsman: nothing on the approval, denial, execution or audit path may", pkg)
			}
		}
		if under(pkg, "internal/store") || under(pkg, "internal/leadsman") {
			continue
		}
		for _, name := range strings.Fields(parts[2]) {
			src, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if m := noteRepository.FindString(string(src)); m != "" {
				t.Errorf("%s/%s uses %s: the notes are the Leadsman's to write and its Reader's to read", pkg, name, m)
			}
		}
	}
	if !found {
		t.Fatal("go list shows no package importing the Leadsman: the check read nothing")
	}
	for _, bad := range []string{"n := store.NewNotes(st)", "var x store.Note", "SELECT note FROM leadsman_notes"} {
		if noteRepository.FindString(bad) == "" {
			t.Errorf("the notes check misses %q", bad)
		}
	}
	if noteRepository.FindString("store.Notebook, store.NewRequests, harbormaster_leadsman_notes_total") != "" {
		t.Error("the notes check matches what is not the notes repository")
	}
}

// TestRequestRowsAreTheLedgers: only sqlImporters import database/sql,
// and only the ledger (with the store, and the Leadsman's reads) reaches
// the requests repository: the gateway changes a request only through
// the ledger.
func TestRequestRowsAreTheLedgers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Dir}} | {{join .Imports " "}} | {{join .GoFiles " "}}`,
		"github.com/harbormaster-dev/harbormaster/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sawGateway, sawLedger := false, false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, " | ")
		head := strings.Fields(parts[0])
		pkg, dir := strings.TrimPrefix(head[0], mod), head[1]
		sawGateway = sawGateway || pkg == "internal/gateway"
		test := strings.HasSuffix(pkg, "test")
		if slices.Contains(strings.Fields(parts[1]), "database/sql") {
			sawLedger = sawLedger || pkg == "internal/ledger"
			if !test && !slices.ContainsFunc(sqlImporters, func(p string) bool { return under(pkg, p) }) {
				t.Errorf("%s imports database/sql: only %v may", pkg, sqlImporters)
			}
		}
		if test || slices.ContainsFunc(requestReaders, func(p string) bool { return under(pkg, p) }) {
			continue
		}
		for _, name := range strings.Fields(parts[2]) {
			src, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if m := requestRepository.FindString(string(src)); m != "" {
				t.Errorf("%s/%s uses %s: a request's row is the ledger's", pkg, name, m)
			}
		}
	}
	if !sawGateway || !sawLedger {
		t.Fatal("go list shows no gateway, or no ledger importing database/sql: the check read nothing")
	}
	for _, bad := range []string{"rq, err := store.NewRequests(ctx, st)", "f := store.RequestFilter{}", "var s store.RequestStatus"} {
		if requestRepository.FindString(bad) == "" {
			t.Errorf("the requests check misses %q", bad)
		}
	}
	if requestRepository.FindString("store.Store, store.Requestsx, ledger.Request") != "" {
		t.Error("the requests check matches what is not the requests repository")
	}
}

// TestReferralsReachOnlyThePreview: the referral service depends on the
// Pilot's package (for its preview role, and through the ledger), so the
// layer rules cannot keep it from executing; this does. Its source names
// nothing of internal/pilot but referralsPilotNames and calls no method
// that runs a statement: the one call that reaches a target is the
// preview a human asked for.
func TestReferralsReachOnlyThePreview(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.Dir}} | {{join .GoFiles " "}}`, mod+"internal/referrals").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dir, files, _ := strings.Cut(strings.TrimSpace(string(out)), " | ")
	previews := 0
	for _, name := range strings.Fields(files) {
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range pilotName.FindAllStringSubmatch(string(src), -1) {
			if !slices.Contains(referralsPilotNames, m[1]) {
				t.Errorf("internal/referrals/%s uses %s: of the Pilot it may use %v only", name, m[0], referralsPilotNames)
			}
		}
		if m := executing.FindString(string(src)); m != "" {
			t.Errorf("internal/referrals/%s calls %s: the referral service executes nothing", name, m)
		}
		previews += strings.Count(string(src), ".Preview(ctx, ")
	}
	if previews == 0 {
		t.Fatal("internal/referrals calls no Preview: the check read nothing")
	}
	for _, bad := range []string{"res, err := p.Execute(ctx, pilot.Request{})", "p.Rehearse(ctx, sql, b, a, who, path)", "tx, _ := p.Begin(ctx, o)"} {
		if executing.FindString(bad) == "" {
			t.Errorf("the execution check misses %q", bad)
		}
	}
	if m := pilotName.FindStringSubmatch("var e pilot.Executor"); m == nil || slices.Contains(referralsPilotNames, m[1]) {
		t.Errorf("the Pilot names check lets pilot.Executor through")
	}
	if executing.FindString("pv, js, err := p.Preview(ctx, r.Canonical)") != "" {
		t.Error("the execution check matches the preview")
	}
}

// TestLayersCatchAViolation: the check finds a forbidden dependency in a
// graph that has one, so it cannot pass by reading nothing.
func TestLayersCatchAViolation(t *testing.T) {
	bad := rule{"internal/pilot", []string{"internal/store"}, ""}
	if !under("internal/pilot/remote", bad.pkg) || !under("internal/store", bad.forbid[0]) || under("internal/storex", "internal/store") {
		t.Fatal("under is wrong")
	}
	g := graph(t)
	found := false
	for _, d := range g["internal/gateway"] {
		found = found || d == "internal/pilot"
	}
	if !found {
		t.Fatal("the graph does not show that the gateway depends on the Pilot")
	}
}

// TestDomainReachesTablesThroughTheStore: the statement path, the
// registry, the audit and the switches import no database driver and hold
// no SQL text; they reach their tables only through the store's
// repositories, which have a SQLite and a PostgreSQL driver.
func TestDomainReachesTablesThroughTheStore(t *testing.T) {
	domain := []string{"internal/gateway", "internal/registry", "internal/audit", "internal/switches", "internal/route", "internal/quota"}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Dir}} {{join .Imports " "}} | {{join .GoFiles " "}}`,
		"github.com/harbormaster-dev/harbormaster/internal/gateway", "github.com/harbormaster-dev/harbormaster/internal/registry", "github.com/harbormaster-dev/harbormaster/internal/audit", "github.com/harbormaster-dev/harbormaster/internal/switches",
		"github.com/harbormaster-dev/harbormaster/internal/route", "github.com/harbormaster-dev/harbormaster/internal/quota").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sqlText := regexp.MustCompile(`\b(SELECT\s+[\w*(]|INSERT\s+INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b)`)
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		head, files, _ := strings.Cut(line, " | ")
		f := strings.Fields(head)
		pkg, dir := strings.TrimPrefix(f[0], mod), f[1]
		if !slices.Contains(domain, pkg) {
			continue
		}
		seen++
		for _, imp := range f[2:] {
			if strings.Contains(imp, "go-sqlite3") || strings.Contains(imp, "jackc/pgx") || strings.Contains(imp, "modernc.org/sqlite") {
				t.Errorf("%s imports the database driver %s", pkg, imp)
			}
		}
		for _, name := range strings.Fields(files) {
			src, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			// Only string literals count: comments may speak of SQL.
			for _, lit := range goStrings(string(src)) {
				if m := sqlText.FindString(lit); m != "" {
					t.Errorf("%s/%s holds SQL text (%q): it belongs in a store repository", pkg, name, m)
				}
			}
		}
	}
	if seen != len(domain) {
		t.Fatalf("go list listed %d of the %d domain packages", seen, len(domain))
	}
	if got := goStrings("a := `SELECT x FROM t` + \"UPDATE t SET a = 1\" // SELECT y"); len(got) != 2 || sqlText.FindString(got[1]) == "" {
		t.Fatalf("goStrings: %q", got)
	}
}

// goStrings returns the string literals of Go source, roughly: raw
// strings and interpreted strings outside comments.
func goStrings(src string) []string {
	var out []string
	for i := 0; i < len(src); i++ {
		switch {
		case strings.HasPrefix(src[i:], "//"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 3
		case src[i] == '`':
			end := strings.IndexByte(src[i+1:], '`')
			if end < 0 {
				return out
			}
			out = append(out, src[i+1:i+1+end])
			i += end + 1
		case src[i] == '"':
			j := i + 1
			for j < len(src) && src[j] != '"' && src[j] != '\n' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j <= len(src) {
				out = append(out, src[i+1:min(j, len(src))])
			}
			i = j
		case src[i] == '\'':
			// A rune literal: skip it so a quote inside does not start a string.
			j := i + 1
			for j < len(src) && src[j] != '\'' && src[j] != '\n' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			i = j
		}
	}
	return out
}

// authorityUse matches a call that takes or uses a Pilot's in-process
// authority (pilot.Authority: an authorization passed as a value, with
// no marque).
// Qualified in any way (a call, a method value or expression, the type
// under any import name), by reflection, or through a dot import of the
// Pilot's package.
var authorityUse = regexp.MustCompile(`\.Authority\b|"Authority"|\. "github\.com/harbormaster-dev/harbormaster/internal/pilot"`)

// TestOnlyTheGatewayAuthorizesInProcess: the in-process authority is the
// gateway's, for a Pilot in its own process. No other package takes it:
// in particular not the remote Pilot's server, whose requests come off
// the network and must carry a signed marque (issue 25).
func TestOnlyTheGatewayAuthorizesInProcess(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Dir}} | {{join .GoFiles " "}}`,
		"github.com/harbormaster-dev/harbormaster/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	users := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, " | ")
		head := strings.Fields(parts[0])
		pkg, dir := strings.TrimPrefix(head[0], mod), head[1]
		if pkg == "internal/pilot" {
			continue // where it is defined
		}
		for _, name := range strings.Fields(parts[1]) {
			src, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if m := authorityUse.FindString(string(src)); m != "" {
				users[pkg] = true
				if pkg != "internal/gateway" {
					t.Errorf("%s/%s uses %s: only the gateway authorizes a Pilot in its own process", pkg, name, m)
				}
			}
		}
	}
	if authorityUse.FindString("s.Authorize(r, principal); pilot.AuthorizedRequest") != "" {
		t.Error("the authority check matches what is not the authority")
	}
	if !users["internal/gateway"] {
		t.Fatal("the gateway does not use the in-process authority: the check read nothing")
	}
	for _, bad := range []string{"a := p.Authority()", "var a *pilot.Authority", "func f(a *pilot.Authority)",
		"(*pl.Pilot).Authority(p).Authorize(req, g)", "f := p.Authority", `v.MethodByName("Authority")`,
		`import . "github.com/harbormaster-dev/harbormaster/internal/pilot"`} {
		if authorityUse.FindString(bad) == "" {
			t.Errorf("the authority check misses %q", bad)
		}
	}
}
