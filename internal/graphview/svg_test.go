package graphview

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/mandatevm/mandate/internal/graphviz"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/runstore"
)

// testOptions share one compilation cache between test runs, next to the
// engines' (<cache root>/graphviz-test).
func testOptions() Options {
	return Options{CacheDir: filepath.Join(filepath.Dir(guestbuild.DefaultCacheDir()), "graphviz-test")}
}

func svg(t testing.TB, r *runstore.Record) []byte {
	t.Helper()
	b, err := SVG(context.Background(), r, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// element is one element of a parsed SVG document.
type element struct {
	name  string
	attrs map[string]string
	text  string // its character data, decoded
}

// parseSVG parses doc strictly as XML and returns its elements in
// document order.
func parseSVG(t testing.TB, doc []byte) []element {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	dec.Strict = true
	var els []element
	var open []int
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, doc)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			e := element{name: x.Name.Local, attrs: map[string]string{}}
			if x.Name.Space != "" && x.Name.Space != "http://www.w3.org/2000/svg" {
				e.name = x.Name.Space + ":" + x.Name.Local
			}
			for _, a := range x.Attr {
				name := a.Name.Local
				if a.Name.Space != "" {
					name = a.Name.Space + ":" + name
				}
				e.attrs[name] = a.Value
			}
			open = append(open, len(els))
			els = append(els, e)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) > 0 {
				els[open[len(open)-1]].text += string(x)
			}
		}
	}
	return els
}

// allowedElements are the only elements a picture may have: shapes, text
// and groups; no script, link, image, foreignObject or style.
var allowedElements = map[string]bool{
	"svg": true, "g": true, "title": true, "path": true, "polygon": true,
	"ellipse": true, "polyline": true, "text": true,
}

// checkSafeSVG checks that doc is well-formed XML with only allowed
// elements, no event attribute, no link and no script, and no raw
// control character or invalid UTF-8.
func checkSafeSVG(t *testing.T, doc []byte) []element {
	t.Helper()
	if !utf8.Valid(doc) {
		t.Errorf("the SVG is not valid UTF-8")
	}
	for _, r := range string(doc) {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || 0x80 <= r && r < 0xa0 || r == '\u202e' {
			t.Errorf("the SVG holds a raw control character %U", r)
			break
		}
	}
	if bytes.Contains(bytes.ToLower(doc), []byte("<script")) {
		t.Errorf("the SVG holds <script")
	}
	els := parseSVG(t, doc)
	for _, e := range els {
		if !allowedElements[e.name] {
			t.Errorf("element <%s> %v is not allowed", e.name, e.attrs)
		}
		for name, v := range e.attrs {
			local := name[strings.LastIndex(name, ":")+1:]
			switch {
			case strings.HasPrefix(strings.ToLower(local), "on"):
				t.Errorf("<%s> has an event attribute %s=%q", e.name, name, v)
			case strings.EqualFold(local, "href"), strings.EqualFold(local, "src"), strings.EqualFold(local, "style"):
				t.Errorf("<%s> has %s=%q", e.name, name, v)
			case strings.Contains(strings.ToLower(v), "javascript:"), strings.Contains(v, "<"):
				t.Errorf("<%s> %s=%q", e.name, name, v)
			}
		}
	}
	return els
}

// TestSVGHostile: a record whose every string is an attack renders a
// well-formed picture of shapes and text, the strings shown as text.
func TestSVGHostile(t *testing.T) {
	r := hostileRecord()
	doc := svg(t, r)
	els := checkSafeSVG(t, doc)
	var texts strings.Builder
	for _, e := range els {
		if e.name == "text" {
			texts.WriteString(e.text + "\n")
		}
	}
	shown := texts.String()
	for _, want := range []string{
		`<img src=x onerror=alert(1)>`, `<script>alert(1)</script>`, `"]; evil [label="`, `]]>`,
		`\x1b[31mred\x1b[0m`, `\u0085\u009b31m`, `bad \xff\xfe utf-8`, `\u202egnp.exe`, `--> <!-- comment`,
		`\N \G \L`, `<IMG SRC="/etc/passwd"/>`, "long long", "…",
		"8 more denials", "3 more flows", `&lt;script&gt; &amp; &#x3c;b&#x3e;`, "... 2 more (mandate audit --denied)",
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the picture does not show %q as text", want)
		}
	}
	ids := elementIDs(els)
	for _, x := range r.Tasks {
		if c := ids[TaskElementID(x.ID)]; !strings.Contains(c, "task") {
			t.Errorf("task %q: element %s has class %q", x.ID, TaskElementID(x.ID), c)
		}
	}
	for _, x := range r.Caps {
		if c := ids[CapElementID(x.ID)]; !strings.Contains(c, "cap") {
			t.Errorf("cap %q: element %s has class %q", x.ID, CapElementID(x.ID), c)
		}
	}
	if t.Failed() {
		t.Logf("SVG:\n%.4000s", doc)
	}
}

// elementIDs maps each element id of a picture to its class.
func elementIDs(els []element) map[string]string {
	ids := map[string]string{}
	for _, e := range els {
		if id, ok := e.attrs["id"]; ok {
			ids[id] = e.attrs["class"]
		}
	}
	return ids
}

// TestSVGIDs: every task and capability is a group with a stable id and
// class, the hook the web UI makes clickable.
func TestSVGIDs(t *testing.T) {
	for name, r := range map[string]*runstore.Record{"sample": sampleRecord(), "quickstart": quickstartRecord(), "wide": wideRecord(20)} {
		t.Run(name, func(t *testing.T) {
			els := checkSafeSVG(t, svg(t, r))
			ids := elementIDs(els)
			for _, x := range r.Tasks {
				if got := ids[TaskElementID(x.ID)]; !strings.HasPrefix(got, "node task") {
					t.Errorf("task %s: class %q, want node task...", x.ID, got)
				}
			}
			for _, x := range r.Caps {
				if got := ids[CapElementID(x.ID)]; !strings.HasPrefix(got, "node cap") {
					t.Errorf("cap %s: class %q, want node cap...", x.ID, got)
				}
			}
		})
	}
}

// TestSVGShowsRevokedStruckThrough: a revoked capability's text is drawn
// struck through, and a denial in red.
func TestSVGShowsRevokedStruckThrough(t *testing.T) {
	els := checkSafeSVG(t, svg(t, quickstartRecord()))
	in := func(id string) []element {
		for i, e := range els {
			if e.name == "g" && e.attrs["id"] == id {
				var out []element
				for _, x := range els[i+1:] {
					if x.name == "g" {
						break
					}
					out = append(out, x)
				}
				return out
			}
		}
		t.Fatalf("no element %s", id)
		return nil
	}
	struck := func(els []element, substr string) (found, isStruck bool) {
		for _, e := range els {
			if e.name == "text" && strings.Contains(e.text, substr) {
				return true, e.attrs["text-decoration"] == "line-through"
			}
		}
		return false, false
	}
	if found, s := struck(in("cap-c2"), "/search/oneway"); !found || !s {
		t.Errorf("revoked c2's scope: found %v, struck through %v", found, s)
	}
	if found, s := struck(in("cap-c1"), "/search"); !found || s {
		t.Errorf("live c1's scope: found %v, struck through %v", found, s)
	}
	red := false
	for _, e := range in("cap-c1") {
		red = red || e.name == "text" && strings.Contains(e.text, "3 denied") && e.attrs["fill"] == "#c62828"
	}
	if !red {
		t.Errorf("c1's denials are not a red mark")
	}
}

func TestSVGTooLarge(t *testing.T) {
	r := wideRecord(MaxSVGNodes/3 + 2)
	if _, err := SVG(context.Background(), r, testOptions()); !errors.Is(err, ErrTooLarge) {
		t.Errorf("%d tasks and caps: %v, want ErrTooLarge", len(r.Tasks)+len(r.Caps), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SVG(ctx, sampleRecord(), testOptions()); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

// TestSVGConcurrent: calls from many goroutines are serialized, each
// gets its own picture (run with -race).
func TestSVGConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := wideRecord(2 + i)
			b, err := SVG(context.Background(), r, testOptions())
			if err == nil && !bytes.Contains(b, []byte(fmt.Sprintf(`id="task&#45;t%d"`, 1+i))) {
				err = fmt.Errorf("picture %d lacks its last task", i)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestCacheDirRefused: a cache directory others may write to is refused
// (its code would run in this process), and the refusal is not kept.
func TestCacheDirRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := checkCacheDir(dir); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("checkCacheDir(0777) = %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if err := checkCacheDir(file); err == nil {
		t.Errorf("checkCacheDir(a file) = nil")
	}
	fresh := filepath.Join(t.TempDir(), "a", "b")
	if err := checkCacheDir(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("created %v, %v; want 0700", fi.Mode(), err)
	}
}

// TestSVGMemoryBounded: Graphviz's memory, which every drawing grows, is
// given back by a new instance once past resetAbove, and drawing goes on.
func TestSVGMemoryBounded(t *testing.T) {
	svg(t, sampleRecord()) // compiled
	mu.Lock()
	saved, before := resetAbove, resets
	resetAbove = 2 << 20
	mu.Unlock()
	t.Cleanup(func() { mu.Lock(); resetAbove = saved; mu.Unlock() })
	var peak uint64
	for i := 0; i < 200; i++ {
		r := quickstartRecord()
		r.Run.ID = fmt.Sprintf("drawing%03d", i)
		if doc := svg(t, r); !bytes.Contains(doc, []byte(r.Run.ID)) {
			t.Fatalf("drawing %d is not of its record", i)
		}
		mu.Lock()
		peak = max(peak, graphviz.MemorySize())
		mu.Unlock()
	}
	if resets == before {
		t.Errorf("no new instance after 200 drawings (memory %d bytes)", peak)
	}
	if peak > 4<<20 {
		t.Errorf("memory reached %d bytes, reset above %d", peak, 2<<20)
	}
	t.Logf("%d new instances, memory at most %d bytes", resets-before, peak)
}
