package cli

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

func runCompletion(e *env, args []string) int {
	fs := e.flags("harbormaster completion bash|zsh",
		"Prints a shell completion script for commands, subcommands and flags.\n\n"+
			"  bash:  source <(harbormaster completion bash)     (or save it in\n"+
			"         /etc/bash_completion.d/harbormaster)\n"+
			"  zsh:   harbormaster completion zsh > \"${fpath[1]}/_harbormaster\"   (then compinit)\n\n"+
			"Arguments that are not a command or a flag complete as file names.")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "give the shell: bash or zsh")
	}
	words := completionWords()
	switch fs.Arg(0) {
	case "bash":
		writeBashCompletion(e.stdout, words)
	case "zsh":
		writeZshCompletion(e.stdout, words)
	default:
		return e.usageErr(fs, "unknown shell %q: bash or zsh", fs.Arg(0))
	}
	return exitOK
}

var (
	helpCommandRE = regexp.MustCompile(`^  ([a-z][a-z0-9-]*) {2,}`)
	helpFlagRE    = regexp.MustCompile(`^  -([a-zA-Z][a-zA-Z0-9-]*)`)
)

// completionWords maps a command path ("harbormaster", "harbormaster
// queue") to the words that may follow it: its subcommands, or its flags.
// It reads them from each command's own --help, so the completion never
// drifts from the commands.
func completionWords() map[string][]string {
	words := map[string][]string{}
	var walk func(path []string, run func(e *env, args []string) int)
	walk = func(path []string, run func(e *env, args []string) int) {
		var out bytes.Buffer
		run(&env{stdout: &out, stderr: io.Discard, getenv: func(string) string { return "" }}, []string{"--help"})
		key := strings.Join(path, " ")
		subs := map[string]bool{}
		for _, line := range strings.Split(out.String(), "\n") {
			if m := helpFlagRE.FindStringSubmatch(line); m != nil {
				words[key] = append(words[key], "--"+m[1])
			} else if m := helpCommandRE.FindStringSubmatch(line); m != nil && strings.Contains(out.String(), "\ncommands:\n") {
				subs[m[1]] = true
			}
		}
		if len(subs) == 0 {
			return
		}
		for name := range subs {
			words[key] = append(words[key], name)
			sub := name
			walk(append(append([]string(nil), path...), sub), func(e *env, args []string) int {
				return run(e, append([]string{sub}, args...))
			})
		}
		sort.Strings(words[key])
	}
	walk([]string{"harbormaster"}, func(e *env, args []string) int {
		return e.dispatch("harbormaster", commands(), args)
	})
	return words
}

func completionKeys(words map[string][]string) []string {
	keys := make([]string, 0, len(words))
	for k := range words {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The scripts find the longest command path among the words typed so far
// (skipping flags and their values, which are not commands), and offer
// what may follow it; a word that is not a command or a flag completes as
// a file name.
func writeBashCompletion(w io.Writer, words map[string][]string) {
	fmt.Fprintf(w, "# bash completion for harbormaster (harbormaster completion bash)\n")
	fmt.Fprintf(w, "declare -gA _harbormaster_words=(\n")
	for _, k := range completionKeys(words) {
		fmt.Fprintf(w, "  [%q]=%q\n", k, strings.Join(words[k], " "))
	}
	fmt.Fprintf(w, `)
_harbormaster() {
  local cur="${COMP_WORDS[COMP_CWORD]}" key="harbormaster" w i
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    [[ -n "${_harbormaster_words["$key $w"]+x}" ]] && key="$key $w"
  done
  COMPREPLY=($(compgen -W "${_harbormaster_words["$key"]}" -- "$cur"))
}
complete -o default -F _harbormaster harbormaster
`)
}

func writeZshCompletion(w io.Writer, words map[string][]string) {
	fmt.Fprintf(w, "#compdef harbormaster\n# zsh completion for harbormaster (harbormaster completion zsh)\n")
	fmt.Fprintf(w, "typeset -gA _harbormaster_words\n_harbormaster_words=(\n")
	for _, k := range completionKeys(words) {
		fmt.Fprintf(w, "  %q %q\n", k, strings.Join(words[k], " "))
	}
	fmt.Fprintf(w, `)
# _harbormaster_candidates sets reply to what may follow the words typed
# before the cursor ($words[2,CURRENT-1]).
_harbormaster_candidates() {
  local key="harbormaster" w
  for w in "${(@)words[2,CURRENT-1]}"; do
    [[ "$w" == -* ]] && continue
    (( ${+_harbormaster_words[$key $w]} )) && key="$key $w"
  done
  reply=(${=_harbormaster_words[$key]})
}
_harbormaster() {
  local -a reply
  _harbormaster_candidates
  if [[ "$PREFIX" == -* || ( ${#reply} -gt 0 && "${reply[1]}" != -* ) ]]; then
    compadd -a reply
  else
    _files
  fi
}
if (( $+functions[compdef] )); then
  compdef _harbormaster harbormaster
fi
`)
}
