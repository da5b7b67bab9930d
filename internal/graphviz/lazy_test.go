package graphviz_test

// Not upstream: tests of what this copy changed (README.md).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/graphviz"
	"github.com/mandatevm/mandate/internal/graphviz/internal/wasm"
)

// atLink is what the package had done once every init function ran,
// before any test.
var atLink error

func TestMain(m *testing.M) {
	atLink = wasm.Ready()
	os.Exit(m.Run())
}

// TestLinkingDoesNoWork: a binary that links the package has compiled and
// instantiated nothing before its first use, and wrote nothing to
// TMPDIR (upstream compiled the module in init and cached it in
// $TMPDIR/go-graphviz).
func TestLinkingDoesNoWork(t *testing.T) {
	if !errors.Is(atLink, wasm.ErrNotInitialized) {
		t.Fatalf("after init: Ready() = %v, want ErrNotInitialized", atLink)
	}
	if os.Getenv("GRAPHVIZ_LINK_CHILD") != "" {
		return // the child below: linking is all it does
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	cmd := exec.Command(exe, "-test.run=^TestLinkingDoesNoWork$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GRAPHVIZ_LINK_CHILD=1", "TMPDIR="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		t.Errorf("linking wrote to TMPDIR: %v", entries)
	}
}

const sample = `digraph { a [id="task-t1", class="task", label=<<S>x &lt; y</S>>]; a -> b }`

// TestLazyInit: entry points used before Init say so; Init creates the
// cache directory it is given, 0700, and keeps compiled code there; only
// the first Init counts; the module cannot read the host's files.
func TestLazyInit(t *testing.T) {
	ctx := context.Background()
	if _, err := graphviz.ParseBytes([]byte(sample)); !errors.Is(err, wasm.ErrNotInitialized) {
		t.Fatalf("ParseBytes before Init: %v, want ErrNotInitialized", err)
	}
	if _, err := graphviz.NewRenderPlugin(ctx, "x", nil); !errors.Is(err, wasm.ErrNotInitialized) {
		t.Fatalf("NewRenderPlugin before Init: %v, want ErrNotInitialized", err)
	}
	cache := filepath.Join(t.TempDir(), "a", "graphviz")
	if err := graphviz.Init(ctx, cache); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(cache)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("cache dir mode %v, want 0700", got)
	}
	if entries, _ := os.ReadDir(cache); len(entries) == 0 {
		t.Errorf("nothing cached in %s", cache)
	}
	other := filepath.Join(t.TempDir(), "other")
	if err := graphviz.Init(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(other); err == nil {
		t.Errorf("a second Init created its cache dir")
	}

	secret := filepath.Join(t.TempDir(), "secret.svg")
	if err := os.WriteFile(secret, []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>secret</text></svg>`), 0o600); err != nil {
		t.Fatal(err)
	}
	svg := render(t, sample[:len(sample)-1]+`; b [image="`+secret+`"] }`)
	for _, want := range []string{`id="task&#45;t1"`, `class="node task"`, `text-decoration="line-through"`, `x &lt; y`} {
		if !strings.Contains(svg, want) {
			t.Errorf("no %s in:\n%s", want, svg)
		}
	}
	if strings.Contains(svg, "<image") || strings.Contains(svg, "secret") {
		t.Errorf("the module read a host file:\n%s", svg)
	}
}

func render(t *testing.T, dot string) string {
	t.Helper()
	ctx := context.Background()
	g, err := graphviz.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	graph, err := graphviz.ParseBytes([]byte(dot))
	if err != nil {
		t.Fatal(err)
	}
	defer graph.Close()
	var b bytes.Buffer
	if err := g.Render(ctx, graph, graphviz.SVG, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestManyContexts: New and Close, again and again, with graphs of many
// sizes. (Without plugins, upstream passed Graphviz a plugin list with no
// zero entry at its end: it read past it, and New failed now and then.)
func TestManyContexts(t *testing.T) {
	if err := graphviz.Init(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		dot := "digraph { a -> b"
		for j := 0; j < (i*7)%23; j++ {
			dot += fmt.Sprintf("; n%d -> n%d", j, j+1)
		}
		render(t, dot+" }")
	}
}

// TestReset: a new instance frees the memory drawings left, and draws
// again.
func TestReset(t *testing.T) {
	ctx := context.Background()
	if err := graphviz.Init(ctx, ""); err != nil {
		t.Fatal(err)
	}
	big := "digraph { a"
	for j := 0; j < 200; j++ {
		big += fmt.Sprintf("; n%d -> n%d [label=%q]", j, j+1, strings.Repeat("x", j))
	}
	big += " }"
	for i := 0; i < 5; i++ {
		render(t, big)
	}
	before := graphviz.MemorySize()
	if err := graphviz.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if after := graphviz.MemorySize(); after >= before {
		t.Errorf("memory %d bytes after Reset, %d before", after, before)
	}
	if svg := render(t, sample); !strings.Contains(svg, `id="task&#45;t1"`) {
		t.Errorf("after Reset:\n%s", svg)
	}
}
