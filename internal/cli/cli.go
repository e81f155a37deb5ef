// Package cli holds the harbormaster commands and wires the subsystems
// together. main calls Do; nothing else exits.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// exit codes
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and the answer is no (e.g. a bad signature)
	exitUsage = 2 // bad usage or bad input
)

// env is what every command gets: its streams and the process context.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

type command struct {
	name    string
	summary string
	run     func(e *env, args []string) int
}

func commands() []command {
	return []command{
		{"check", "decide one statement against a delegation, offline", runCheck},
		{"delegation", "compile, print, sign and verify delegations", runDelegation},
		{"keygen", "make an Ed25519 SSH key pair for a human signer", runKeygen},
		{"token", "make a bearer token for an agent", runToken},
		{"mcp", "serve the agent tools over MCP on stdin/stdout, forwarding to a running server", runMCP},
		{"serve", "run the control plane and its Pilots", runServe},
		{"pilot", "run Pilots in a process of their own; pilot certs: their channel's certificates", runPilot},
		{"config", "validate a serve config", runConfig},
		{"target", "prepare a target database", runTarget},
		{"logbook", "verify, tail and export the logbook", runLogbook},
		{"store", "apply the control store's migrations", runStore},
		{"demo", "run the whole system on this machine with a scripted agent", runDemo},
		{"queue", "list, show, approve and deny referred requests", runQueue},
		{"switch", "switch Tier B on or off", runSwitch},
		{"surveyor", "the Tier B panel: regression gate, enablement, reinstatement", runSurveyor},
		{"audit", "review sampled Surveyor judgments", runAudit},
		{"console", "log in to the web console with your SSH key", runConsole},
		{"bench", "measure what a running node adds to a single-row UPDATE", runBench},
		{"cover", "CoVer: measure a panel (study), its cost, label a corpus, run the gate corpus", runCover},
		{"version", "print the version, commit, Go, compiler, checker and prompt-bundle versions", runVersion},
		{"completion", "print a shell completion script (bash or zsh)", runCompletion},
	}
}

// Do runs the command line and returns the exit code.
func Do(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		return runVersion(e, args[1:])
	}
	return e.dispatch("harbormaster", commands(), args)
}

func (e *env) dispatch(prefix string, cmds []command, args []string) int {
	if len(args) == 0 {
		// Bad usage: the usage goes to stderr, stdout stays for output.
		e.usage(e.stderr, prefix, cmds)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		e.usage(e.stdout, prefix, cmds)
		return exitOK
	}
	for _, c := range cmds {
		if c.name == args[0] {
			return c.run(e, args[1:])
		}
	}
	e.errorf("unknown command %q", strings.TrimSpace(prefix+" "+args[0]))
	e.hintf("run '%s --help' for the list of commands", prefix)
	return exitUsage
}

func (e *env) usage(w io.Writer, prefix string, cmds []command) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", prefix)
	sorted := append([]command(nil), cmds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	for _, c := range sorted {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nrun '%s <command> --help' for a command's flags\n", prefix)
}

func (e *env) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "harbormaster: error: %s\n", fmt.Sprintf(format, args...))
}

func (e *env) hintf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "harbormaster: hint: %s\n", fmt.Sprintf(format, args...))
}

// flags makes a FlagSet whose usage goes to stdout for --help and whose
// errors are reported as harbormaster: error lines.
func (e *env) flags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(e.stdout, "usage: %s\n\n%s\n\nflags:\n", name, synopsis)
		fs.SetOutput(e.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses flags; it returns (code, false) when the caller should return.
//
// Flags may come before or after positional arguments (FILE --schema x).
func (e *env) parse(fs *flag.FlagSet, args []string) (int, bool) {
	// The flag package calls Usage on any error: the usage (stdout) is
	// printed for --help only, an error gets its error line (stderr).
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	var positional []string
	var err error
	for {
		if err = fs.Parse(args); err != nil || fs.NArg() == 0 {
			break
		}
		rest := fs.Args()
		if rest[0] == "--" {
			positional = append(positional, rest[1:]...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	if err == nil {
		// Leave the positional arguments where fs.Args() finds them.
		err = fs.Parse(append([]string{"--"}, positional...))
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return exitOK, false
	case err != nil:
		e.errorf("%s: %v", cmdName(fs.Name()), err)
		e.hintf("run '%s --help'", cmdName(fs.Name()))
		return exitUsage, false
	}
	return 0, true
}

// usageErr reports bad usage of one command.
func (e *env) usageErr(fs *flag.FlagSet, format string, args ...any) int {
	e.errorf("%s: %s", cmdName(fs.Name()), fmt.Sprintf(format, args...))
	e.hintf("run '%s --help'", cmdName(fs.Name()))
	return exitUsage
}

// cmdName is the command part of a synopsis ("harbormaster check --sql ..."
// -> "harbormaster check").
func cmdName(synopsis string) string {
	var out []string
	for _, w := range strings.Fields(synopsis) {
		if strings.ContainsAny(w[:1], "-[(") || strings.ToUpper(w) == w {
			break
		}
		out = append(out, w)
	}
	return strings.Join(out, " ")
}
