package webui

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/internal/mcpclients"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// clientState is a state directory with one run, a session of client
// desk, and desk's label raised by a hostile tool's result.
func clientState(t *testing.T) (dir string, st *mcpclients.Store) {
	t.Helper()
	rec := hostileRecord(runA, "alice", t0)
	rec.Run.Module = sessionModule + "desk"
	dir = stateWith(t, rec)
	st, err := mcpclients.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if _, err := st.Raise(ctx, "desk", mcpclients.Raise{Run: runA, Tool: "tool " + xssScript + termEsc, Label: kindapi.NewLabel([]string{"pii:" + xssImg}, nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Raise(ctx, "bot", mcpclients.Raise{Run: runB, Tool: "web_search"}); err != nil {
		t.Fatal(err)
	}
	return dir, st
}

// TestUIClientsNone: with no clients store the list is empty, a client is
// not found, and the UI creates no store.
func TestUIClientsNone(t *testing.T) {
	dir := twoRuns(t)
	u := startUI(t, Options{StateDir: dir})
	var v clientsView
	u.getJSON("/api/clients", &v)
	if len(v.Clients) != 0 || v.Note == "" {
		t.Errorf("/api/clients: %+v, want none and a note", v)
	}
	u.get("/clients")
	resp := u.request("GET", "/api/clients/desk", true)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown client: %s, want 404", resp.Status)
	}
	if _, err := os.Stat(filepath.Join(dir, mcpclients.FileName)); !os.IsNotExist(err) {
		t.Errorf("the UI created %s (%v)", mcpclients.FileName, err)
	}
}

// TestUIClients: the list and a client's page show its label, history
// and sessions, every string escaped.
func TestUIClients(t *testing.T) {
	dir, _ := clientState(t)
	u := startUI(t, Options{StateDir: dir})
	var l clientsView
	b := u.getJSON("/api/clients", &l)
	if len(l.Clients) != 2 || l.Clients[0].Name != "bot" || l.Clients[1].Name != "desk" || l.Clients[1].Sessions != 1 || l.Clients[1].Raised.IsZero() {
		t.Errorf("/api/clients: %s", b)
	}
	if !strings.Contains(l.Clients[1].Label.Text, "pii:") {
		t.Errorf("desk's label: %+v", l.Clients[1].Label)
	}
	var v clientView
	b = u.getJSON("/api/clients/desk", &v)
	if len(v.History) != 1 || v.History[0].Event != mcpclients.EventRaise || v.History[0].Run != runA || len(v.Runs) != 1 || v.Runs[0].ID != runA || len(v.Nonce) != 64 {
		t.Fatalf("/api/clients/desk: %s", b)
	}
	if tool := v.History[0].Tool; strings.ContainsAny(tool, "\x1b\x07\u202e") || !strings.Contains(tool, `\x1b`) {
		t.Errorf("the tool %q is not escaped", tool)
	}
	for _, c := range []string{"<", ">"} {
		if strings.Contains(string(b), c) {
			t.Errorf("the JSON holds %q raw: %s", c, b)
		}
	}
	_, page := u.get("/clients/desk")
	if !strings.Contains(string(page), `data-page="client"`) || strings.Contains(string(page), "pii") {
		t.Errorf("the client's page is not the static page: %s", page)
	}
	for _, p := range []string{"/clients/no%20such", "/clients/" + strings.Repeat("x", 65)} {
		resp := u.request("GET", p, true)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", p, resp.Status)
		}
	}
	if _, idx := u.get("/"); !strings.Contains(string(idx), `href="/clients"`) {
		t.Errorf("the main page has no link to the clients")
	}
}

// TestUIClientReset: a reset goes through the guard (cookie, Origin,
// same-origin, JSON, small), a one-time nonce of the client's page and a
// reason, and is recorded in the store's history and the audit log.
func TestUIClientReset(t *testing.T) {
	dir, st := clientState(t)
	u := startUI(t, Options{StateDir: dir})
	ctx := context.Background()
	nonce := func(client string) string {
		var v clientView
		u.getJSON("/api/clients/"+client, &v)
		return v.Nonce
	}
	path := "/clients/desk/reset"
	n := nonce("desk")
	good := `{"nonce":"` + n + `","reason":"new task ` + xssScript + `"}`
	for _, c := range []struct {
		what   string
		cookie bool
		body   string
		hdr    []string
		code   int
	}{
		{"no cookie", false, good, nil, http.StatusUnauthorized},
		{"no Origin", true, good, []string{"Origin", ""}, http.StatusForbidden},
		{"another site's Origin", true, good, []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"cross-site fetch", true, good, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"a form's type", true, good, []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"too large", true, `{"nonce":"` + n + `","reason":"` + strings.Repeat("x", 5000) + `"}`, nil, http.StatusRequestEntityTooLarge},
		{"not JSON", true, "reset please", nil, http.StatusBadRequest},
		{"no reason", true, `{"nonce":"` + n + `","reason":"  "}`, nil, http.StatusBadRequest},
		{"a long reason", true, `{"nonce":"` + n + `","reason":"` + strings.Repeat("x", 501) + `"}`, nil, http.StatusBadRequest},
		{"wrong nonce", true, `{"nonce":"` + strings.Repeat("0", 64) + `","reason":"x"}`, nil, http.StatusForbidden},
		{"another client's nonce", true, `{"nonce":"` + nonce("bot") + `","reason":"x"}`, nil, http.StatusForbidden},
	} {
		if code, msg := u.post(path, c.body, c.cookie, c.hdr...); code != c.code {
			t.Errorf("%s: %d %s, want %d", c.what, code, msg, c.code)
		}
	}
	for _, m := range []string{"GET", "HEAD"} {
		resp := u.request(m, path, true)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s %s: %s, want 405", m, path, resp.Status)
		}
	}
	if c, _ := st.Label(ctx, "desk"); c.Label.IsZero() {
		t.Fatalf("a refused POST reset the label")
	}

	code, msg := u.post(path, good, true, "User-Agent", "Browser\u202e")
	if code != http.StatusOK {
		t.Fatalf("the reset: %d %s", code, msg)
	}
	if c, _ := st.Label(ctx, "desk"); !c.Label.IsZero() {
		t.Errorf("after the reset: %v", c.Label)
	}
	h, _ := st.History(ctx, "desk")
	if len(h) != 2 || h[1].Event != mcpclients.EventReset || !strings.HasPrefix(h[1].By, "web page, client 127.0.0.1:") ||
		!strings.Contains(h[1].By, `Browser\u202e`) || h[1].Why != "new task "+xssScript {
		t.Errorf("history: %+v", h)
	}
	if strings.Contains(msg, "<script") {
		t.Errorf("the response holds the reason raw: %s", msg)
	}
	alog, err := audit.OpenReadOnly(filepath.Join(dir, AuditFile))
	if err != nil {
		t.Fatal(err)
	}
	defer alog.Close()
	es, _ := alog.Entries(ctx, audit.Filter{})
	if e := es[len(es)-1]; e.Op != "reset-label" || e.Kind != "mcp" || !strings.HasPrefix(e.Principal, "web page, client") || !strings.Contains(e.Reason, "new task") {
		t.Errorf("the last audit entry: %+v", e)
	}
	if code, msg := u.post(path, good, true); code != http.StatusForbidden {
		t.Errorf("the nonce again: %d %s, want 403", code, msg)
	}
	if code, _ := u.post("/clients/nobody/reset", `{"nonce":"`+nonce("desk")+`","reason":"x"}`, true); code != http.StatusForbidden {
		t.Errorf("desk's nonce on another client: %d, want 403", code)
	}
}

// TestUIClientResetFails: a reset that cannot be recorded is a clear
// error, and the pages still work.
func TestUIClientResetFails(t *testing.T) {
	dir, _ := clientState(t)
	u := startUI(t, Options{StateDir: dir})
	// A key readable by others: the audit log refuses to open it.
	if err := os.Chmod(filepath.Join(dir, audit.KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	var v clientView
	u.getJSON("/api/clients/desk", &v)
	code, msg := u.post("/clients/desk/reset", `{"nonce":"`+v.Nonce+`","reason":"x"}`, true)
	if code != http.StatusInternalServerError || !strings.Contains(msg, "audit log could not record it") {
		t.Errorf("a reset the audit log cannot record: %d %s", code, msg)
	}
	if os.Getuid() != 0 {
		os.Chmod(filepath.Join(dir, audit.KeyFile), 0o600)
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		u.getJSON("/api/clients/desk", &v)
		if code, msg := u.post("/clients/desk/reset", `{"nonce":"`+v.Nonce+`","reason":"x"}`, true); code != http.StatusInternalServerError || !strings.Contains(msg, "the reset failed") {
			t.Errorf("a reset in a read-only state directory: %d %s", code, msg)
		}
	}
	u.getJSON("/api/clients", &clientsView{})
	u.getJSON("/api/clients/desk", &v)
}
