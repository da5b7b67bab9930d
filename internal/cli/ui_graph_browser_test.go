package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

// bigRecord is a run whose graph is far wider than a page: a chain of n
// tasks, each spawned by the one before, each holding three capabilities
// derived from its parent's.
func bigRecord(id string, n int) runstore.Record {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := runstore.Record{Version: runstore.RecordVersion,
		Run: runstore.Run{ID: id, Manifest: "/m/big.hcl", Task: "big", Module: "/m/guest", Digest: "sha256:00", Principal: "alice",
			Engine: "wazero", Started: start, Ended: start.Add(time.Second), State: "done"}}
	for i := 1; i <= n; i++ {
		t := kernel.GraphTask{ID: fmt.Sprintf("t%d", i), Principal: "alice", Module: "sha256:00", State: kernel.TaskDone}
		if i > 1 {
			t.Parent = fmt.Sprintf("t%d", i-1)
		}
		rec.Tasks = append(rec.Tasks, t)
		for j, fields := range [][]kindapi.Detail{
			{{Name: "origin", Value: "https://api.example"}, {Name: "methods", Value: "GET"}, {Name: "paths", Value: "/v1/search"}},
			{{Name: "collection", Value: "benefits"}, {Name: "records", Value: "own"}, {Name: "ops", Value: "read"}},
			{{Name: "provider", Value: "https://pay.example"}, {Name: "currency", Value: "EUR"}, {Name: "max_amount", Value: "50.00 EUR"}},
		} {
			c := kernel.GraphCap{ID: fmt.Sprintf("c%d", 3*(i-1)+j+1), Kind: []string{"net", "data", "pay"}[j], Holder: t.ID,
				Scope: json.RawMessage(`{}`), View: kernel.CapView{Fields: fields}}
			if i > 1 {
				c.Parent = fmt.Sprintf("c%d", 3*(i-2)+j+1)
				c.View.Passed = true
			}
			rec.Caps = append(rec.Caps, c)
		}
	}
	return rec
}

// TestUIGraphReadable: the run page of a large graph keeps its text
// readable: the picture is never drawn below 3/4 of its own size (the
// capabilities' text, 10 points, at least 10 CSS pixels), scrolling in
// its box instead; the size button goes to its actual size, then the
// whole width (small text, the reader's choice), then back. And the runs
// list says what the run could do.
func TestUIGraphReadable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a browser")
	}
	chrome := chromium(t)
	out := outputDir(t)
	bin := buildMandate(t)
	state := filepath.Join(t.TempDir(), "state")
	st, err := runstore.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	const id = "20260301T120000Z-b16b16"
	if err := st.Finish(context.Background(), bigRecord(id, 24)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	p := startUIProc(t, bin, state)
	ctx := browser(t, chrome)

	step(t, ctx, "the runs list", chromedp.Navigate(p.url), chromedp.WaitVisible(chromedp.CSS(`#runs tbody tr[data-run]`)))
	grants := eval[string](t, ctx, `document.querySelector('#runs tbody tr[data-run] td.grants').textContent`)
	if grants != "net: GET api.example; data: benefits (read); pay: ≤ 50.00 EUR" {
		t.Errorf("the runs list's capabilities: %q", grants)
	}
	if h := eval[string](t, ctx, `[...document.querySelectorAll('#runs thead th')].map(h => h.textContent).join('|')`); !strings.HasSuffix(h, "|Capabilities") {
		t.Errorf("the runs list's columns: %q", h)
	}

	step(t, ctx, "the run's page", chromedp.Navigate(p.base+"/runs/"+id), chromedp.WaitVisible(chromedp.CSS(`#graph svg g.cap`)))
	// measure: the picture's scale (CSS pixels per point of its own
	// size), the smallest rendered size of the capabilities' 10-point
	// text, the picture's and its box's widths, and the button's label.
	type measure struct {
		Scale, MinText, Width, Box float64
		Button                     string
	}
	measureJS := `(() => {
	  const svg = document.querySelector('#graph svg');
	  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width / (4 / 3);
	  const px = [...svg.querySelectorAll('g.cap text')].map(x => parseFloat(x.getAttribute('font-size')))
	    .filter(s => s >= 10).map(s => s * 4 / 3 * scale);
	  return { Scale: scale, MinText: Math.min(...px), Width: svg.getBoundingClientRect().width,
	    Box: document.querySelector('#graph').clientWidth, Button: document.querySelector('#graph-size').textContent };
	})()`
	m := eval[measure](t, ctx, measureJS)
	t.Logf("readable: %+v", m)
	if m.Box <= 0 || m.Width < 2*m.Box {
		t.Fatalf("the picture (%v px) is not much wider than its box (%v px): not a large graph", m.Width, m.Box)
	}
	if m.Scale < 0.74 || m.MinText < 9.9 {
		t.Errorf("the picture is drawn at %.2f of its size, its capabilities' text at %.1f px: want at least 0.75 and 10 px", m.Scale, m.MinText)
	}
	shot(t, ctx, out, "big-readable.png")

	step(t, ctx, "actual size", chromedp.Click(chromedp.CSS(`#graph-size`)), waitJS(`document.querySelector('#graph-size').textContent === 'whole width'`))
	if m := eval[measure](t, ctx, measureJS); m.Scale < 0.99 || m.Scale > 1.01 {
		t.Errorf("actual size: drawn at %.2f", m.Scale)
	}
	step(t, ctx, "whole width", chromedp.Click(chromedp.CSS(`#graph-size`)), waitJS(`document.querySelector('#graph-size').textContent === 'readable size'`))
	if m := eval[measure](t, ctx, measureJS); m.Width > m.Box+1 {
		t.Errorf("whole width: the picture is %v px in a box of %v", m.Width, m.Box)
	}
	shot(t, ctx, out, "big-whole.png")
	step(t, ctx, "readable again", chromedp.Click(chromedp.CSS(`#graph-size`)), waitJS(`document.querySelector('#graph-size').textContent === 'actual size'`))
	if m := eval[measure](t, ctx, measureJS); m.Scale < 0.74 {
		t.Errorf("readable again: drawn at %.2f", m.Scale)
	}
	if v := eval[[]string](t, ctx, `window.__csp`); len(v) != 0 {
		t.Errorf("Content-Security-Policy violations: %q", v)
	}
}
