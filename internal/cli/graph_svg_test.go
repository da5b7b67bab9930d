package cli

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/graphview"
	"github.com/mandatevm/mandate/internal/testengine"
)

// TestGraphSVGOfQuickstart runs the quickstart (go run ./examples/quickstart,
// built) and draws its run with the mandate binary: the picture holds, as
// a node with its element id and class, every task and capability that
// --format json lists; the first picture makes CACHE/graphviz, 0700, and
// nothing else the binary does makes a cache.
func TestGraphSVGOfQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quickstart, and mandate")
	}
	bin := buildMandate(t)
	dir := t.TempDir()
	quickstart := filepath.Join(dir, "quickstart")
	build := exec.Command("go", append(append([]string{"build", "-o", quickstart}, testengine.BuildFlags()...), "../../examples/quickstart")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	state := filepath.Join(dir, "state")
	run := exec.Command(quickstart, "--state-dir", state)
	run.Dir = "../.." // it finds its manifest from the repository root
	run.Env = append(os.Environ(), "MANDATE_ENGINE="+testengine.Name(), "MANDATE_CACHE_DIR="+testCache())
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out)
	}

	// A fresh cache root and TMPDIR: what starting mandate costs.
	cache, tmp := filepath.Join(dir, "cache"), filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	mandate := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--state-dir", state)...)
		if args[0] == "version" || args[0] == "help" {
			cmd = exec.Command(bin, args...)
		}
		cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+cache, "TMPDIR="+tmp)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("mandate %s: %v\n%s", strings.Join(args, " "), err, &stderr)
		}
		return out
	}
	for _, args := range [][]string{{"version"}, {"help"}, {"graph"}, {"graph", "--format", "dot"}} {
		mandate(args...)
		if _, err := os.Stat(cache); err == nil {
			t.Fatalf("mandate %s made the cache %s", strings.Join(args, " "), cache)
		}
	}

	var g struct {
		Tasks []struct{ ID string } `json:"tasks"`
		Caps  []struct{ ID string } `json:"caps"`
	}
	if err := json.Unmarshal(mandate("graph", "--format", "json"), &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Tasks) == 0 || len(g.Caps) < 2 {
		t.Fatalf("the quickstart's graph: %+v", g)
	}
	classes := svgNodeClasses(t, mandate("graph", "--format", "svg"))
	for _, x := range g.Tasks {
		if c := classes[graphview.TaskElementID(x.ID)]; !strings.HasPrefix(c, "node task") {
			t.Errorf("task %s: class %q, want node task...; nodes: %v", x.ID, c, classes)
		}
	}
	for _, x := range g.Caps {
		if c := classes[graphview.CapElementID(x.ID)]; !strings.HasPrefix(c, "node cap") {
			t.Errorf("cap %s: class %q, want node cap...; nodes: %v", x.ID, c, classes)
		}
	}
	fi, err := os.Stat(filepath.Join(cache, "graphviz"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the Graphviz cache: %v, %v; want a directory, 0700", fi, err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		t.Errorf("mandate wrote in TMPDIR: %v", entries)
	}

	out := filepath.Join(dir, "graph.svg")
	if len(mandate("graph", "--format", "svg", "--output", out)) != 0 {
		t.Errorf("--output printed to stdout")
	}
	if b, err := os.ReadFile(out); err != nil || len(svgNodeClasses(t, b)) != len(classes) {
		t.Errorf("--output %s: %v", out, err)
	}
}

// svgNodeClasses parses an SVG document and maps each group's id to its
// class.
func svgNodeClasses(t *testing.T, doc []byte) map[string]string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	dec.Strict = true
	ids := map[string]string{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ids
		}
		if err != nil {
			t.Fatalf("not XML: %v\n%s", err, doc)
		}
		if e, ok := tok.(xml.StartElement); ok && e.Name.Local == "g" {
			var id, class string
			for _, a := range e.Attr {
				switch a.Name.Local {
				case "id":
					id = a.Value
				case "class":
					class = a.Value
				}
			}
			ids[id] = class
		}
	}
}
