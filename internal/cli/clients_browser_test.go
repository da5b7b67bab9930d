package cli

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/internal/mcpclients"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestClientsBrowser: a client's label raised in the store, mandate ui
// running; in headless Chromium the client's page (opened with the token
// URL) shows the label, a reason is typed and Reset clicked: the store's
// label is empty, its history and the audit log have the reset by the web
// page, and the page shows it.
func TestClientsBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the mandate binary and a browser")
	}
	chrome := chromium(t)
	out := outputDir(t)
	bin := buildMandate(t)
	state := t.TempDir()
	ctx := context.Background()
	st, err := mcpclients.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Raise(ctx, "desk", mcpclients.Raise{Run: "20260301T120000Z-aaaaaa", Tool: "my_benefits",
		Label: kindapi.NewLabel([]string{"pii:alice"}, nil)}); err != nil {
		t.Fatal(err)
	}
	ui := startUIProc(t, bin, state)
	u, _ := url.Parse(ui.url)
	pageURL := ui.base + "/clients/desk?token=" + url.QueryEscape(u.Query().Get("token"))

	b := browser(t, chrome)
	step(t, b, "the UI's URL (the cookie)", chromedp.Navigate(ui.url), chromedp.WaitVisible(chromedp.CSS(`#clients-link`)))
	step(t, b, "the clients list", chromedp.Navigate(ui.base+"/clients"), waitJS(`!!document.querySelector('#clients a[href="/clients/desk"]')`))
	step(t, b, "the client's page", chromedp.Navigate(pageURL), waitJS(`document.querySelector('#client-label') && document.querySelector('#client-label').textContent.includes('pii:alice')`))
	if loc := eval[string](t, b, `location.href`); strings.Contains(loc, "token") {
		t.Errorf("the token stays in the address: %s", loc)
	}
	step(t, b, "type a reason", chromedp.SendKeys(chromedp.CSS(`#reset-reason`), "new task <b>x</b>"), waitJS(`!document.querySelector('#reset').disabled`))
	shot(t, b, out, "client.png")
	step(t, b, "Reset", chromedp.Click(chromedp.CSS(`#reset`)), waitJS(`document.querySelector('#reset-result').className !== 'verdict'`))
	if r := eval[string](t, b, `document.querySelector('#reset-result').textContent`); !strings.HasPrefix(r, "Reset:") {
		t.Fatalf("after the click: %q", r)
	}
	step(t, b, "the page shows the reset", waitJS(`document.querySelector('#client-label').textContent === 'unlabelled'`))
	if h := eval[string](t, b, `document.querySelector('#history').textContent`); !strings.Contains(h, "reset by web page, client 127.0.0.1:") || !strings.Contains(h, "new task <b>x</b>") {
		t.Errorf("the history shows %q", h)
	}
	if n := eval[int](t, b, `document.querySelectorAll('#history b').length`); n != 0 {
		t.Errorf("the reason became markup")
	}
	if a := eval[[]string](t, b, `window.__alerts.concat(window.__csp)`); len(a) != 0 {
		t.Errorf("alerts or CSP violations: %q", a)
	}
	shot(t, b, out, "client-reset.png")

	if c, err := st.Label(ctx, "desk"); err != nil || !c.Label.IsZero() {
		t.Errorf("the stored label after the reset: %v %v", c.Label, err)
	}
	h, err := st.History(ctx, "desk")
	if err != nil || len(h) != 2 || h[1].Event != mcpclients.EventReset || !strings.HasPrefix(h[1].By, "web page, client 127.0.0.1:") || h[1].Why != "new task <b>x</b>" {
		t.Errorf("the history: %+v %v", h, err)
	}
	alog, err := audit.OpenReadOnly(auditPath(state))
	if err != nil {
		t.Fatal(err)
	}
	defer alog.Close()
	es, err := alog.Entries(ctx, audit.Filter{})
	if err != nil || len(es) != 1 || es[0].Op != "reset-label" || !strings.HasPrefix(es[0].Principal, "web page, client") {
		t.Errorf("the audit log: %+v %v", es, err)
	}
}
