package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"unicode/utf8"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/optional"
	"github.com/mandatevm/mandate/internal/sdkembed"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Exit codes.
const (
	exitOK          = 0   // the task finished normally (or the command succeeded)
	exitTaskFailed  = 1   // the task exited non-zero, trapped or was denied fatally
	exitUsage       = 2   // usage, manifest, build or host errors
	exitLimit       = 3   // the task ran out of a limit: its deadline or its memory
	exitInterrupted = 130 // mandate was interrupted (Ctrl-C) and killed the task
)

// env is the process environment as commands see it; tests may replace
// it.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// terminal reports whether w is a terminal (what a guest wrote is then
	// escaped); nil means isTerminal.
	terminal func(w io.Writer) bool
	// ctx, when set, is what long-running commands (mcp serve) stop on,
	// besides a signal; nil means context.Background().
	ctx context.Context
}

// context is e.ctx with its default.
func (e *env) context() context.Context {
	if e.ctx != nil {
		return e.ctx
	}
	return context.Background()
}

// isTerminal reports whether w is a character device (a terminal, or
// /dev/null: escaping for it is harmless).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// isTerm is e.terminal with its default.
func (e *env) isTerm(w io.Writer) bool {
	if e.terminal != nil {
		return e.terminal(w)
	}
	return isTerminal(w)
}

// command is one subcommand.
type command struct {
	name  string
	short string
	help  string // full help text, printed by --help and "mandate help NAME"
	run   func(e *env, args []string) int
}

var commands []*command

func init() {
	commands = []*command{
		{"new", "write a new tool: guest, manifest, README and test", newHelp, runNew},
		{"build", "build a guest (Go, Rust or C) to WebAssembly", buildHelp, runBuild},
		{"sdk", "the guest SDK mandate carries, for plain go, cargo and make", sdkHelp, runSDK},
		{"run", "run a task described by a manifest", runHelp, runRun},
		{"graph", "show the capability graph of a recorded run", graphHelp, runGraph},
		{"runs", "list the recorded runs", runsHelp, runRuns},
		{"logs", "show what a run's tasks left: results, stdout, stderr", logsHelp, runLogs},
		{"audit", "show or verify the tamper-evident audit log", auditHelp, runAudit},
		{"ui", "a local web view of the runs, live, and the approvals page", uiHelp, runUI},
		{"approvals", "list and answer the approvals waiting for a person's yes", approvalsHelp, runApprovals},
		{"verify", "check a run's signed receipt and say what the run could do", verifyHelp, runVerify},
		{"check", "report what a manifest's tasks could hold and where it could go", checkHelp, runCheck},
		{"mcp", "serve a policy's tools over MCP, each call a task", mcpHelp, runMCP},
		{"node", "run a fleet node: take runs from NATS JetStream", nodeHelp, runNode},
		{"data", "import records into the embedded data store", dataHelp, runData},
		{"cache", "show and prune the guest and engine caches", cacheHelp, runCache},
		{"version", "print mandate's version", versionHelp, runVersion},
		{"completion", "print a bash or zsh completion script", completionHelp, runCompletion},
		{"help", "show help for a command", helpHelp, runHelpCmd},
	}
}

func lookupCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

const usageText = `Mandate runs AI agent tasks as WebAssembly guests with no ambient authority:
a task can use only the capabilities its manifest grants it, each scoped and
mediated by the kernel.

Usage:

	mandate <command> [arguments]

Commands:

%s
Run "mandate help <command>" (or "mandate <command> --help") for more about a
command.

Exit codes (mandate run):

	0    the task finished normally
	1    the task failed: it exited non-zero, trapped, or a kernel error ended it
	2    usage, manifest, build or host error (nothing ran, or the run
	     could not be recorded)
	3    the task ran out of a limit: its deadline (timeout) or its memory
	130  mandate was interrupted (Ctrl-C) and killed the task

Environment:

	MANDATE_STATE_DIR   where runs are recorded (default
	                    $XDG_STATE_HOME/mandate, else ~/.local/state/mandate)
	MANDATE_CACHE_DIR   where built guests and compiled modules are cached
	                    (default: the user cache directory + /mandate)

Examples:

	mandate build ./guest -o guest.wasm
	mandate run quickstart.hcl --var origin=https://flights.example
	mandate graph --format dot | dot -Tsvg > graph.svg
`

func usage() string {
	var b strings.Builder
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(&b, "\t%-*s  %s\n", width, c.name, c.short)
	}
	return fmt.Sprintf(usageText, b.String())
}

// Main is the whole CLI: it parses args (without the program name) and
// returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	return e.main(args)
}

func (e *env) main(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage())
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(e.stdout, usage())
		return exitOK
	case "-version", "--version":
		return runVersion(e, nil)
	}
	c := lookupCommand(args[0])
	if c == nil {
		fmt.Fprintf(e.stderr, "mandate: unknown command %q\nRun 'mandate help' for usage.\n", args[0])
		return exitUsage
	}
	return c.run(e, args[1:])
}

// flagSet returns a FlagSet that reports nothing itself: parse prints
// errors and help.
func flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("mandate "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args with fs, allowing flags after positional arguments
// ("mandate run m.hcl --var a=b"); "--" ends the flags. It returns the
// positional arguments and, when parsing stopped, the exit code: 0 after
// printing help, 2 after a usage error.
func (e *env) parse(c *command, fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(e.stdout, c.help)
				return nil, exitOK, false
			}
			return nil, e.usageError(c, "%v", err), false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, 0, true
		}
		// fs stopped at a positional argument, or after "--" (which it
		// drops): after "--" everything is positional.
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// oneArg returns the one positional argument pos must hold; what names it
// in the usage error when it is missing, and an extra one is named too.
func (e *env) oneArg(c *command, pos []string, what string) (arg string, code int, ok bool) {
	switch {
	case len(pos) == 0:
		return "", e.usageError(c, "missing %s", what), false
	case len(pos) > 1:
		return "", e.usageError(c, "unexpected argument %q", pos[1]), false
	}
	return pos[0], exitOK, true
}

func (e *env) usageError(c *command, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "mandate %s: %s\nRun 'mandate help %s' for usage.\n", c.name, fmt.Sprintf(format, args...), c.name)
	return exitUsage
}

func (e *env) errorf(format string, args ...any) {
	// A message may quote what a guest chose (a denied call's reason):
	// escaped, as everything a guest can influence on a terminal.
	fmt.Fprintf(e.stderr, "mandate: %s\n", kindapi.EscapeText(fmt.Sprintf(format, args...)))
}

const helpHelp = `Usage: mandate help [command]

Shows help for mandate, or for one command.

Examples:

	mandate help
	mandate help run
`

func runHelpCmd(e *env, args []string) int {
	c := lookupCommand("help")
	switch {
	case len(args) == 0:
		fmt.Fprint(e.stdout, usage())
		return exitOK
	case len(args) > 1:
		return e.usageError(c, "too many arguments")
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		fmt.Fprint(e.stdout, helpHelp)
		return exitOK
	}
	t := lookupCommand(args[0])
	if t == nil {
		return e.usageError(c, "unknown command %q", args[0])
	}
	fmt.Fprint(e.stdout, t.help)
	return exitOK
}

const versionHelp = `Usage: mandate version

Prints mandate's module version (a release, a pseudo-version for a commit,
or "(devel)" for a build from a checkout), then, one per line, the version
control revision it was built from when the build recorded one (builds in
a checkout do; "go install ...@version" builds carry the version instead),
the Go version and platform, the guest SDK it carries, the engines, and
the optional parts it was built with (build tags natsserver, postgres:
the default build leaves them out for their compile time).
All of it comes from the binary's build information.

Example:

	mandate version
`

// buildInfo is debug.ReadBuildInfo; tests may replace it.
var buildInfo = debug.ReadBuildInfo

// versionString is what mandate version prints.
func versionString() string {
	var b strings.Builder
	v, rev, deps := "(devel)", "", map[string]string{}
	if bi, ok := buildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		var at, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = ", with uncommitted changes"
				}
			}
		}
		if rev != "" && at != "" {
			rev += " (" + at + modified + ")"
		}
		for _, d := range bi.Deps {
			if d.Replace != nil && d.Replace.Version != "" {
				d = d.Replace
			}
			deps[d.Path] = d.Version
		}
	}
	fmt.Fprintf(&b, "mandate %s\n", v)
	if rev != "" {
		fmt.Fprintf(&b, "revision   %s\n", rev)
	}
	fmt.Fprintf(&b, "go         %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	sdk := sdkembed.Version
	if d, err := sdkembed.Digest(); err == nil {
		sdk += " " + d
	}
	fmt.Fprintf(&b, "guest SDK  %s %s (carried by mandate build)\n", sdkembed.Module, sdk)
	var engines []string
	for _, name := range host.EngineNames() {
		e := name
		switch name {
		case "wazero":
			if d := deps["github.com/tetratelabs/wazero"]; d != "" {
				e += " " + d
			}
		case "wasmtime":
			if d := deps["github.com/bytecodealliance/wasmtime-go/v39"]; d != "" {
				e += " (wasmtime-go " + d + ")"
			}
		}
		if name == host.DefaultEngine {
			e += " (the default; --engine picks another)"
		}
		engines = append(engines, e)
	}
	fmt.Fprintf(&b, "engines    %s\n", strings.Join(engines, ", "))
	var parts, out []string
	for _, p := range optional.Parts() {
		in := "no"
		if p.In {
			in = "yes"
		} else {
			out = append(out, p.Tag)
		}
		parts = append(parts, p.Tag+" "+in)
	}
	fmt.Fprintf(&b, "optional   %s", strings.Join(parts, ", "))
	if len(out) > 0 {
		fmt.Fprintf(&b, " (go install -tags '%s' ./cmd/mandate builds them in)", strings.Join(out, " "))
	}
	b.WriteString("\n")
	return b.String()
}

func runVersion(e *env, args []string) int {
	c := lookupCommand("version")
	fs := flagSet("version")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return e.usageError(c, "unexpected argument %q", pos[0])
	}
	fmt.Fprint(e.stdout, versionString())
	return exitOK
}

// writeJSON writes v as indented JSON and a newline. encoding/json
// escapes C0 controls but writes DEL and the C1 controls (U+0080 to
// U+009F; U+009B is a CSI to some terminals) as they are: those are
// escaped too, so JSON a guest's strings are in is as safe on a terminal
// as the text forms. The JSON means the same.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(escapeControls(b), '\n'))
	return err
}

// escapeControls is the escaping of DEL and the C1 controls writeJSON
// does: b itself when it has none.
func escapeControls(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == 0x7f || 0x80 <= r && r <= 0x9f {
			if out == nil {
				out = append(make([]byte, 0, len(b)+16), b[:i]...)
			}
			out = fmt.Appendf(out, `\u%04x`, r)
		} else if out != nil {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	if out == nil {
		out = b
	}
	return out
}

// tabIndent indents every non-empty line of s by a tab, as help texts
// show code.
func tabIndent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "\t" + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
