package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/mandatevm/mandate/internal/testengine"
)

// The browser tests drive headless Chromium (Debian's chromium package;
// .ci/run installs it when missing) with chromedp against a real
// "mandate ui" process, on runs recorded by the real examples and guests.
// Screenshots go to $TEST_OUTPUT_DIR/<test> when it is set, else to the
// test's temporary directory. MANDATE_UI_SCREENSHOT=PATH also saves the
// quickstart's run page there (how docs/ui.png is made).

// chromium returns the browser's path, or skips the test (fails it on CI,
// where .ci/run installs the browser).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "headless Chromium is not installed (apt-get install chromium; .ci/run installs it): the browser test cannot run"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// outputDir is where the test's screenshots go.
func outputDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("TEST_OUTPUT_DIR")
	if d == "" {
		return t.TempDir()
	}
	d = filepath.Join(d, t.Name())
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// alertHook runs before any script of every page: it counts calls to
// alert, confirm and prompt, and every Content-Security-Policy violation
// (an injected <img onerror> would be one).
const alertHook = `(() => {
  window.__alerts = [];
  for (const f of ['alert', 'confirm', 'prompt']) {
    const name = f;
    window[name] = function (m) { window.__alerts.push(name + ': ' + m); };
  }
  window.__csp = [];
  document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
})();`

// browser starts headless Chromium with a fresh profile and the alert
// hook, at 1200x800.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	profile, err := os.MkdirTemp("", "mandate-ui-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile), chromedp.WindowSize(1200, 800),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-extensions", true),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		// Chromium's children may write to the profile a little after it
		// ends.
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	// The first Run starts the browser: no timeout on it (a timeout would
	// stop the browser with it).
	start := time.Now()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	t.Logf("chromium started in %v", time.Since(start).Round(time.Millisecond))
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: alertHook}); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "the viewport", chromedp.EmulateViewport(1200, 800))
	return ctx
}

// step runs actions with a timeout (on a context derived from the one
// that started the browser).
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until expr is true in the page.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr)(ctx, t)
		return err
	})
}

// eval evaluates expr in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// shot saves a screenshot of the viewport as dir/name.
func shot(t *testing.T, ctx context.Context, dir, name string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// runExample builds examples/NAME and runs it, recording into state.
func runExample(t *testing.T, name, state string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", append(append([]string{"build", "-o", bin}, testengine.BuildFlags()...), "../../examples/"+name)...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build examples/%s: %v\n%s", name, err, out)
	}
	cmd := exec.Command(bin, "-state-dir", state)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "MANDATE_ENGINE="+testengine.Name(), "MANDATE_CACHE_DIR="+testCache())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("examples/%s: %v\n%s", name, err, out)
	}
}

// graphJSON is what the test reads of "mandate graph --format json".
type graphJSON struct {
	Run   struct{ ID, Task string }
	Tasks []struct{ ID string }
	Caps  []struct {
		ID, Kind, Name, Holder, Parent string
	}
	Denials []struct{ Cap string }
}

func readGraph(t *testing.T, bin, state, run string) graphJSON {
	t.Helper()
	args := []string{"graph", "--format", "json", "--state-dir", state}
	if run != "" {
		args = append(args, run)
	}
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("mandate graph %s: %v", run, err)
	}
	var g graphJSON
	if err := json.Unmarshal(out, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestUIBrowser: the trip planner's run and the XSS guest's, in a real
// browser: the runs list, the planner's run page, a click on the payment
// capability (its denials counted, its derivation shown), the finder's
// passed capability (its path to the grant), and the hostile run, whose
// strings show as text while no script of theirs runs.
func TestUIBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs examples, guests and a browser")
	}
	chrome := chromium(t)
	out := outputDir(t)
	bin := buildMandate(t)
	state := filepath.Join(t.TempDir(), "state")
	runExample(t, "tripplanner", state)
	xss := xssRun(t, bin, state)
	p := startUIProc(t, bin, state)
	ctx := browser(t, chrome)

	// The runs list: the token leaves the address bar for a cookie.
	step(t, ctx, "the runs list", chromedp.Navigate(p.url), chromedp.WaitVisible(chromedp.CSS(`#runs tbody tr[data-run]`)))
	if loc := eval[string](t, ctx, `location.href`); strings.Contains(loc, "token") {
		t.Errorf("the token is still in the address bar: %s", loc)
	}
	if c := eval[string](t, ctx, `document.cookie`); c != "" {
		t.Errorf("the page can read the cookie: %q", c)
	}
	rows := eval[[]string](t, ctx, `[...document.querySelectorAll('#runs tbody tr')].map(r => r.dataset.run + ' ' + r.cells[1].textContent)`)
	if len(rows) != 2 {
		t.Fatalf("the runs list: %q", rows)
	}
	tripID := ""
	for _, r := range rows {
		if id, task, _ := strings.Cut(r, " "); task == "trip-planner" {
			tripID = id
		}
	}
	if tripID == "" {
		t.Fatalf("no trip-planner run in %q", rows)
	}
	trip := readGraph(t, bin, state, tripID)
	shot(t, ctx, out, "runs.png")

	// Filters are query parameters.
	step(t, ctx, "a filter", chromedp.Navigate(p.base+"/?principal=mallory"), chromedp.WaitVisible(chromedp.CSS(`#runs tbody tr[data-run]`)))
	if got := eval[[]string](t, ctx, `[...document.querySelectorAll('#runs tbody tr[data-run]')].map(r => r.dataset.run)`); len(got) != 1 || got[0] != xss {
		t.Errorf("principal=mallory lists %q, want the XSS run %s", got, xss)
	}
	step(t, ctx, "back to all runs", chromedp.Navigate(p.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#runs tbody tr[data-run="`+tripID+`"]`)))

	// The trip planner's run, by its link.
	step(t, ctx, "the trip planner's run", chromedp.Click(chromedp.CSS(`#runs tbody tr[data-run="`+tripID+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#tasks li.task`)), chromedp.WaitVisible(chromedp.CSS(`#verdict`)))
	if v := eval[string](t, ctx, `document.querySelector('#verdict').textContent`); !strings.Contains(v, "verifies") || strings.Contains(v, "not") {
		t.Errorf("the audit verdict: %q", v)
	}
	// The picture: a node for every task and capability of the record.
	step(t, ctx, "the graph picture", chromedp.WaitVisible(chromedp.CSS(`#graph svg g.cap`)))
	ids := eval[[]string](t, ctx, `[...document.querySelectorAll('#graph svg g[id]')].map(g => g.id)`)
	for _, c := range trip.Caps {
		if !slices.Contains(ids, "cap-"+c.ID) {
			t.Errorf("the picture has no node cap-%s (it has %q)", c.ID, ids)
		}
	}
	for _, tk := range trip.Tasks {
		if !slices.Contains(ids, "task-"+tk.ID) {
			t.Errorf("the picture has no node task-%s", tk.ID)
		}
	}
	shot(t, ctx, out, "trip-run.png")

	// The payment capability: its denials and its derivation (a grant).
	var card, search string
	cardDenials := 0
	for _, c := range trip.Caps {
		if c.Kind == "pay" && c.Name == "card" {
			card = c.ID
		}
		if c.Kind == "net" && c.Name == "search" {
			search = c.ID
		}
	}
	for _, d := range trip.Denials {
		if d.Cap == card {
			cardDenials++
		}
	}
	if card == "" || search == "" || cardDenials < 2 {
		t.Fatalf("the trip planner's graph: card %q (%d denials), search %q", card, cardDenials, search)
	}
	step(t, ctx, "click the card", chromedp.Click(chromedp.CSS(`#tasks button.cap[data-cap="`+card+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail-path`)))
	if n := eval[string](t, ctx, `document.querySelector('#detail-denials-count').textContent`); n != fmt.Sprint(cardDenials) {
		t.Errorf("the card's denials shown: %q, want %d", n, cardDenials)
	}
	if rows := eval[int](t, ctx, `document.querySelectorAll('#detail-denials li').length`); rows != cardDenials {
		t.Errorf("the card's detail lists %d denials, want %d", rows, cardDenials)
	}
	path := eval[[]string](t, ctx, `[...document.querySelectorAll('#detail-path li')].map(l => l.textContent)`)
	if len(path) != 1 || !strings.Contains(path[0], card) || !strings.Contains(path[0], "grant") {
		t.Errorf("the card's derivation path: %q, want the grant alone", path)
	}
	scope := eval[string](t, ctx, `document.querySelector('#detail').textContent`)
	for _, want := range []string{"when", "offer.duration_hours <= 12", "airline.example"} {
		if !strings.Contains(scope, want) {
			t.Errorf("the card's detail lacks %q", want)
		}
	}
	shot(t, ctx, out, "trip-card.png")

	// A click on a capability in the picture selects it too.
	step(t, ctx, "click the card in the picture", chromedp.Click(chromedp.CSS(`#tasks button.cap[data-cap="`+search+`"]`)),
		waitJS(`!document.querySelector('#detail h2').textContent.includes('"card"')`),
		chromedp.ScrollIntoView(chromedp.CSS(`#graph svg g[id="cap-`+card+`"]`)),
		chromedp.Click(chromedp.CSS(`#graph svg g[id="cap-`+card+`"]`)),
		waitJS(`document.querySelector('#detail h2').textContent.includes('"card"')`))
	if sel := eval[[]string](t, ctx, `[...document.querySelectorAll('#graph svg g.selected')].map(g => g.id)`); len(sel) != 1 || sel[0] != "cap-"+card {
		t.Errorf("selected in the picture: %q, want cap-%s", sel, card)
	}
	shot(t, ctx, out, "trip-graph-click.png")

	// The finder's search capability: passed from the planner's flights
	// grant; the path shown is the record's, grant first.
	var want []string
	byID := map[string]int{}
	for i, c := range trip.Caps {
		byID[c.ID] = i
	}
	for id := search; id != ""; {
		want = append([]string{id}, want...)
		i, ok := byID[id]
		if !ok || len(want) > len(trip.Caps) {
			break
		}
		id = trip.Caps[i].Parent
	}
	step(t, ctx, "click the finder's capability", chromedp.Click(chromedp.CSS(`#tasks button.cap[data-cap="`+search+`"]`)),
		waitJS(`document.querySelector('#detail h2').textContent.includes('"search"')`))
	path = eval[[]string](t, ctx, `[...document.querySelectorAll('#detail-path li')].map(l => l.dataset.cap + ': ' + l.textContent)`)
	if len(path) != len(want) || len(path) < 2 {
		t.Fatalf("the search capability's path: %q, want %v", path, want)
	}
	for i, id := range want {
		if !strings.HasPrefix(path[i], id+": ") {
			t.Errorf("path step %d: %q, want %s", i, path[i], id)
		}
	}
	if !strings.Contains(path[0], `"flights"`) || !strings.Contains(path[0], "grant") || !strings.Contains(path[len(path)-1], "passed to t2") {
		t.Errorf("the search capability's path: %q: want the flights grant first and the pass to t2 last", path)
	}
	if h := eval[string](t, ctx, `location.hash`); h != "#cap="+search {
		t.Errorf("the selection is not in the URL: %q", h)
	}
	shot(t, ctx, out, "trip-search.png")

	// The XSS guest's run: every string is text.
	step(t, ctx, "the XSS run", chromedp.Navigate(p.base+"/runs/"+xss), chromedp.WaitVisible(chromedp.CSS(`#tasks li.task`)),
		chromedp.WaitVisible(chromedp.CSS(`#outputs pre`)), chromedp.WaitVisible(chromedp.CSS(`#graph svg g.cap`)))
	if g := eval[string](t, ctx, `document.querySelector('#graph svg').textContent`); !strings.Contains(g, "onerror=alert(1)") {
		t.Errorf("the picture does not show the hostile capability name as text: %q", g)
	}
	text := eval[string](t, ctx, `document.body.innerText`)
	for _, want := range []string{`<img src=x onerror=alert(1)>`, `<script>alert(1)</script>`, `fetch<script>alert(1)</script>`,
		`\x1b[31mRED`, `\x1b]8;;http://evil.example\alink`, `\u009b2J`} {
		if !strings.Contains(text, want) {
			t.Errorf("the XSS run's page does not show %q as text", want)
		}
	}
	hostile := eval[string](t, ctx, `[...document.querySelectorAll('#tasks button.cap')].find(b => b.textContent.includes('<img')).dataset.cap`)
	step(t, ctx, "click the hostile capability", chromedp.Click(chromedp.CSS(`#tasks button.cap[data-cap="`+hostile+`"]`)),
		waitJS(`document.querySelector('#detail h2').textContent.includes('<img src=x onerror=alert(1)>')`))
	step(t, ctx, "settle", chromedp.Sleep(500*time.Millisecond))
	counts := eval[[]int](t, ctx, `[document.querySelectorAll('img, iframe, object, embed, foreignObject').length,
		document.querySelectorAll('script').length, document.querySelectorAll('[onerror], [onload], [onclick]').length]`)
	if counts[0] != 0 || counts[1] != 1 || counts[2] != 0 {
		t.Errorf("the XSS run's page has %d img/iframe/object elements, %d scripts, %d handler attributes; want 0, 1 (app.js), 0", counts[0], counts[1], counts[2])
	}
	if a := eval[[]string](t, ctx, `window.__alerts`); len(a) != 0 {
		t.Errorf("a guest's script ran: %q", a)
	}
	if v := eval[[]string](t, ctx, `window.__csp`); len(v) != 0 {
		t.Errorf("Content-Security-Policy violations: %q", v)
	}
	shot(t, ctx, out, "xss.png")

	// Live: a run recorded while the list is open shows up without a reload.
	step(t, ctx, "the runs list again", chromedp.Navigate(p.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#runs tbody tr[data-run]`)),
		waitJS(`document.querySelector('#live').textContent === 'live'`))
	another := xssRun(t, bin, state)
	start := time.Now()
	step(t, ctx, "the new run, live", waitJS(`!!document.querySelector('#runs tbody tr[data-run="`+another+`"]')`))
	t.Logf("a new run appeared in the open list %v after mandate run returned", time.Since(start).Round(time.Millisecond))
	if n := eval[int](t, ctx, `document.querySelectorAll('#runs tbody tr[data-run]').length`); n != 3 {
		t.Errorf("the live list has %d runs, want 3", n)
	}
	t.Logf("screenshots in %s", out)
}

// TestUIScreenshot saves the quickstart's run page as
// $MANDATE_UI_SCREENSHOT (docs/ui.png is made so), a 1200x800 PNG.
func TestUIScreenshot(t *testing.T) {
	dest := os.Getenv("MANDATE_UI_SCREENSHOT")
	if dest == "" {
		t.Skip("set MANDATE_UI_SCREENSHOT=PATH to save the quickstart's run page there")
	}
	chrome := chromium(t)
	state := filepath.Join(t.TempDir(), "state")
	runExample(t, "quickstart", state)
	bin := buildMandate(t)
	g := readGraph(t, bin, state, "")
	p := startUIProc(t, bin, state, "last")
	ctx := browser(t, chrome)
	step(t, ctx, "the quickstart's run", chromedp.Navigate(p.url), chromedp.WaitVisible(chromedp.CSS(`#tasks li.task`)),
		chromedp.WaitVisible(chromedp.CSS(`#verdict`)), chromedp.WaitVisible(chromedp.CSS(`#graph svg g.cap`)))
	sel := ""
	for _, c := range g.Caps {
		if c.Parent != "" {
			sel = c.ID // the narrowed, revoked one
		}
	}
	if sel != "" {
		step(t, ctx, "select a capability", chromedp.Click(chromedp.CSS(`#tasks button.cap[data-cap="`+sel+`"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#detail-path`)), chromedp.Sleep(300*time.Millisecond))
	}
	step(t, ctx, "to the top", waitJS(`(window.scrollTo(0, 0), window.scrollY === 0)`), chromedp.Sleep(200*time.Millisecond))
	b := shot(t, ctx, t.TempDir(), "ui.png")
	if !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatal("not a PNG")
	}
	if err := os.WriteFile(dest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes", dest, len(b))
}
