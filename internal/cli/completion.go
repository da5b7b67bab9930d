package cli

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

const completionHelp = `Usage: mandate completion bash|zsh

Prints a shell completion script for mandate: commands, their subcommands
and flags, and the values of flags that take one of a few words (--format,
--lang, --cap, --engine, --log-level, ...), all read from the commands'
help, so they never drift from it. Anything else completes as a file name.

	# bash: for this shell, or for every shell
	source <(mandate completion bash)
	mandate completion bash > ~/.local/share/bash-completion/completions/mandate

	# zsh: for this shell, or in a folder on $fpath
	source <(mandate completion zsh)
	mandate completion zsh > "${fpath[1]}/_mandate"
`

func runCompletion(e *env, args []string) int {
	c := lookupCommand("completion")
	fs := flagSet("completion")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	shell, code, ok := e.oneArg(c, pos, "the shell (bash or zsh)")
	if !ok {
		return code
	}
	spec := completionSpec()
	switch shell {
	case "bash":
		fmt.Fprint(e.stdout, bashCompletion(spec))
	case "zsh":
		fmt.Fprint(e.stdout, zshCompletion(spec))
	default:
		return e.usageError(c, "unknown shell %q (bash or zsh)", shell)
	}
	return exitOK
}

// cmdSpec is what completes after one command.
type cmdSpec struct {
	name, short string
	subs        []string            // subcommands (mandate audit verify)
	flags       []string            // every flag, sorted
	values      map[string][]string // a flag's words (--format text|json)
}

var (
	flagToken  = regexp.MustCompile(`(?:^|[\s\[|])(--?[a-z][a-z0-9-]*)`)
	flagValues = regexp.MustCompile(`(--[a-z][a-z0-9-]*)[ =]([a-z0-9]+(?:\|[a-z0-9]+)+)`)
	subToken   = regexp.MustCompile(`^\s*(?:Usage: )?mandate ([a-z]+) ([a-z]+)\b`)
	flagLine   = regexp.MustCompile(`^\t(--?[a-z][a-z0-9-]*)`)
	shellWord  = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)
)

// knownValues are the words of flags whose help names a placeholder.
var knownValues = map[string][]string{
	"--engine":    {"wazero", "wasmtime"},
	"--log-level": {"trace", "debug", "info", "warn", "error", "off"},
	"--approve":   {"prompt", "wait", "yes", "no"},
}

// completionSpec reads every command's help: the Usage lines (up to the
// first blank line) and the lines of its Flags section that start with a
// flag.
func completionSpec() []cmdSpec {
	var out []cmdSpec
	for _, c := range commands {
		s := cmdSpec{name: c.name, short: c.short, values: map[string][]string{}}
		flags, subs := map[string]bool{}, map[string]bool{}
		usage, inFlags := true, false
		for _, line := range strings.Split(c.help, "\n") {
			switch {
			case usage && strings.TrimSpace(line) == "":
				usage = false
			case strings.TrimSpace(line) == "Flags:":
				inFlags = true
				continue
			case inFlags && line != "" && !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, " "):
				inFlags = false
			}
			if usage {
				if m := subToken.FindStringSubmatch(line); m != nil && m[1] == c.name {
					subs[m[2]] = true
				}
				for _, m := range flagToken.FindAllStringSubmatch(line, -1) {
					flags[m[1]] = true
				}
			}
			if inFlags {
				if m := flagLine.FindStringSubmatch(line); m != nil {
					flags[m[1]] = true
				}
			}
			if usage || inFlags {
				for _, m := range flagValues.FindAllStringSubmatch(line, -1) {
					if _, ok := s.values[m[1]]; !ok {
						s.values[m[1]] = strings.Split(m[2], "|")
					}
				}
			}
		}
		if c.name == "help" || c.name == "completion" {
			for _, o := range commands {
				if c.name == "help" {
					subs[o.name] = true
				}
			}
			if c.name == "completion" {
				subs["bash"], subs["zsh"] = true, true
			}
		}
		for f, words := range knownValues {
			if _, ok := s.values[f]; flags[f] && !ok {
				s.values[f] = words
			}
		}
		s.flags, s.subs = sortedKeys(flags), sortedKeys(subs)
		out = append(out, s)
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// shellWords quotes words for a shell script: they are the help's own
// letters, digits and dashes, checked here all the same.
func shellWords(words []string) string {
	for _, w := range words {
		if !shellWord.MatchString(w) {
			panic("completion: word " + w)
		}
	}
	return strings.Join(words, " ")
}

func bashCompletion(spec []cmdSpec) string {
	var b strings.Builder
	var names []string
	for _, s := range spec {
		names = append(names, s.name)
	}
	b.WriteString("# bash completion for mandate: source <(mandate completion bash)\n")
	b.WriteString("_mandate() {\n\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n")
	b.WriteString("\tlocal cmd=\"${COMP_WORDS[1]}\" subs=\"\" flags=\"\"\n")
	fmt.Fprintf(&b, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W \"%s\" -- \"$cur\"))\n\t\treturn\n\tfi\n", shellWords(names))
	b.WriteString("\tcase \"$cmd\" in\n")
	for _, s := range spec {
		fmt.Fprintf(&b, "\t%s)\n\t\tsubs=\"%s\"\n\t\tflags=\"%s\"\n", s.name, shellWords(s.subs), shellWords(s.flags))
		if len(s.values) > 0 {
			b.WriteString("\t\tcase \"$prev\" in\n")
			for _, f := range sortedKeys(boolSet(s.values)) {
				fmt.Fprintf(&b, "\t\t%s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;\n", f, shellWords(s.values[f]))
			}
			b.WriteString("\t\tesac\n")
		}
		b.WriteString("\t\t;;\n")
	}
	b.WriteString("\tesac\n")
	b.WriteString("\tif [[ \"$cur\" == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n\t\treturn\n\tfi\n")
	b.WriteString("\tif [ \"$COMP_CWORD\" -eq 2 ] && [ -n \"$subs\" ]; then\n\t\tCOMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n")
	b.WriteString("\t\t[ \"${#COMPREPLY[@]}\" -gt 0 ] && return\n\tfi\n")
	b.WriteString("\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n}\ncomplete -o filenames -F _mandate mandate\n")
	return b.String()
}

func zshCompletion(spec []cmdSpec) string {
	var b strings.Builder
	b.WriteString("#compdef mandate\n# zsh completion for mandate: source <(mandate completion zsh)\n")
	b.WriteString("_mandate() {\n\tlocal -a cmds subs flags vals\n\tcmds=(\n")
	for _, s := range spec {
		fmt.Fprintf(&b, "\t\t'%s:%s'\n", s.name, strings.ReplaceAll(s.short, "'", "'\\''"))
	}
	b.WriteString("\t)\n\tif (( CURRENT == 2 )); then\n\t\t_describe 'command' cmds\n\t\treturn\n\tfi\n")
	b.WriteString("\tcase $words[2] in\n")
	for _, s := range spec {
		fmt.Fprintf(&b, "\t%s)\n\t\tsubs=(%s)\n\t\tflags=(%s)\n", s.name, shellWords(s.subs), shellWords(s.flags))
		if len(s.values) > 0 {
			b.WriteString("\t\tcase $words[CURRENT-1] in\n")
			for _, f := range sortedKeys(boolSet(s.values)) {
				fmt.Fprintf(&b, "\t\t%s) vals=(%s); compadd -a vals; return ;;\n", f, shellWords(s.values[f]))
			}
			b.WriteString("\t\tesac\n")
		}
		b.WriteString("\t\t;;\n")
	}
	b.WriteString("\tesac\n")
	b.WriteString("\tif [[ $PREFIX == -* ]]; then\n\t\tcompadd -a flags\n\t\treturn\n\tfi\n")
	b.WriteString("\tif (( CURRENT == 3 )) && (( ${#subs} )); then\n\t\tcompadd -a subs\n\tfi\n\t_files\n}\n")
	b.WriteString("if [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n\t_mandate \"$@\"\nelse\n\tcompdef _mandate mandate\nfi\n")
	return b.String()
}

func boolSet(m map[string][]string) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}
