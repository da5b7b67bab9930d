package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestCompletionBash sources the script in a real bash and asks it what
// completes: commands, subcommands, flags and flag values, all from the
// commands' help.
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	var out bytes.Buffer
	if code := Main([]string{"completion", "bash"}, nil, &out, os.Stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	script := filepath.Join(t.TempDir(), "mandate.bash")
	if err := os.WriteFile(script, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) []string {
		t.Helper()
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := "source " + script + "\nCOMP_WORDS=(mandate " + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
			strconv.Itoa(len(words)) + "\n_mandate\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog)
		cmd.Dir = t.TempDir()
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, b)
		}
		return strings.Fields(string(b))
	}
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"ru"}, []string{"run", "runs"}},
		{[]string{"comp"}, []string{"completion"}},
		{[]string{"audit", "ver"}, []string{"verify"}},
		{[]string{"mcp", ""}, []string{"client", "reset", "serve"}},
		{[]string{"mcp", "client", "u", "--format", ""}, []string{"json", "text"}},
		{[]string{"completion", ""}, []string{"bash", "zsh"}},
		{[]string{"new", "--l"}, []string{"--lang"}},
		{[]string{"new", "x", "--lang", ""}, []string{"c", "go", "rust"}},
		{[]string{"new", "x", "--cap", "p"}, []string{"pay"}},
		{[]string{"graph", "--format", ""}, []string{"dot", "json", "svg", "text"}},
		{[]string{"run", "--log-level", "d"}, []string{"debug"}},
		{[]string{"run", "--engine", "w"}, []string{"wasmtime", "wazero"}},
		{[]string{"run", "--st"}, []string{"--state-dir"}},
		{[]string{"help", "bu"}, []string{"build"}},
	} {
		got := complete(c.words...)
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("mandate %s<TAB>: %q, want %q", strings.Join(c.words, " "), got, c.want)
		}
	}
}

// TestCompletionZsh: the zsh script parses (zsh -n) where zsh is.
func TestCompletionZsh(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"completion", "zsh"}, nil, &out, os.Stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"#compdef mandate", "'new:write a new tool", "--lang) vals=(go rust c)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the zsh script lacks %q", want)
		}
	}
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("no zsh here: its script is checked by content alone")
	}
	cmd := exec.Command(zsh, "-n")
	cmd.Stdin = &out
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("zsh -n: %v\n%s", err, b)
	}
}
