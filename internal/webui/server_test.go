package webui

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"encoding/xml"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/testfs"
	"github.com/mandatevm/mandate/runstore"
	_ "modernc.org/sqlite"
)

const runA = "20260301T120000Z-aaaaaa"
const runB = "20260301T120500Z-bbbbbb"

// every path the UI serves, with a run that exists.
var uiPaths = []string{"/", "/runs/" + runA, "/runs/last", "/assets/app.js", "/assets/style.css", "/assets/icon.svg",
	"/api/runs", "/api/runs/" + runA, "/api/runs/last", "/api/runs/" + runA + "/graph.svg", "/api/events", "/nothing-here"}

func fakeGraph(ctx context.Context, rec *runstore.Record) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0"?><!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">`)
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="100pt" height="50pt" viewBox="0 0 100 50" onload="alert(1)">`)
	b.WriteString(`<script>alert(1)</script><g id="graph0" class="graph">`)
	for _, c := range rec.Caps {
		b.WriteString(`<g id="cap-` + c.ID + `" class="node cap"><title>`)
		xmlEscape(&b, c.Name)
		b.WriteString(`</title><ellipse cx="5" cy="5" rx="4" ry="3" fill="none" stroke="black" onclick="alert(1)"/>`)
		b.WriteString(`<a xlink:href="javascript:alert(1)"><text x="1" y="1">link</text></a>`)
		b.WriteString(`<text x="1" y="1" style="fill:url(http://evil.example/x)">`)
		xmlEscape(&b, c.Name)
		b.WriteString(`</text><foreignObject><div xmlns="http://www.w3.org/1999/xhtml"><img src="x" onerror="alert(1)"/></div></foreignObject></g>`)
	}
	b.WriteString(`<image href="http://evil.example/p.png"/><use href="#cap-c1"/><path d="M0 0" fill="url(#grad)" stroke="url(http://evil.example/)"/></g></svg>`)
	return b.Bytes(), nil
}

func xmlEscape(b *bytes.Buffer, s string) {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	b.WriteString(r.Replace(s))
}

func twoRuns(t *testing.T) string {
	t.Helper()
	a := hostileRecord(runA, "alice", t0)
	b := hostileRecord(runB, "bob", t0.Add(5*time.Minute))
	b.Run.State, b.Run.Exit, b.Run.Error = "done", 0, ""
	b.Denials, b.Tasks[0].Denials = nil, 0
	return stateWith(t, a, b)
}

// TestTokenRequired: no page, asset, JSON or event stream without the
// token or its cookie; a wrong token or cookie is refused alike, and the
// refusal carries no data.
func TestUITokenRequired(t *testing.T) {
	u := startUI(t, Options{StateDir: twoRuns(t), Graph: fakeGraph})
	for _, p := range uiPaths {
		for _, c := range []struct {
			what string
			path string
			hdr  []string
		}{
			{"no token", p, nil},
			{"a wrong token", p + "?token=wrong", nil},
			{"a token one byte short", p + "?token=" + testToken[:len(testToken)-1], nil},
			{"a wrong cookie", p, []string{"Cookie", u.s.guard.cookie + "=wrong"}},
			{"another port's cookie", p, []string{"Cookie", "mandate_ui_1=" + testToken}},
			{"the token as a bearer header", p, []string{"Authorization", "Bearer " + testToken}},
		} {
			resp := u.request("GET", strings.Replace(c.path, "?", "?", 1), false, c.hdr...)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s with %s: %s, want 401", p, c.what, resp.Status)
			}
			if bytes.Contains(b, []byte("alice")) || bytes.Contains(b, []byte(runA)) || len(resp.Cookies()) > 0 {
				t.Errorf("GET %s with %s: the refusal leaks: %q %v", p, c.what, b, resp.Cookies())
			}
		}
		resp := u.request("GET", p, true)
		resp.Body.Close()
		want := http.StatusOK
		if p == "/nothing-here" {
			want = http.StatusNotFound
		}
		if resp.StatusCode != want {
			t.Errorf("GET %s with the cookie: %s, want %d", p, resp.Status, want)
		}
	}
}

// TestUICookieFlow: the first request with the token sets an HttpOnly,
// SameSite=Strict cookie for the whole UI and redirects to the same URL
// without the token; the cookie then opens everything; a redirect never
// leaves the server.
func TestUICookieFlow(t *testing.T) {
	u := startUI(t, Options{StateDir: twoRuns(t)})
	resp := u.request("GET", "/runs/"+runA+"?x=1&token="+testToken+"#cap=c1", false)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("with the token: %s, want 303", resp.Status)
	}
	if loc := resp.Header.Get("Location"); loc != "/runs/"+runA+"?x=1" {
		t.Errorf("redirect to %q, want the URL without the token", loc)
	}
	cs := resp.Cookies()
	if len(cs) != 1 {
		t.Fatalf("cookies %v, want one", cs)
	}
	c := cs[0]
	if c.Value != testToken || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Name != u.s.guard.cookie {
		t.Errorf("cookie %+v: want the token, HttpOnly, SameSite=Strict, Path=/, named for the port", c)
	}
	setCookie := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(setCookie, want) {
			t.Errorf("Set-Cookie %q lacks %s", setCookie, want)
		}
	}
	// The cookie opens the page the redirect names.
	resp = u.request("GET", "/runs/"+runA+"?x=1", false, "Cookie", c.Name+"="+c.Value)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with the cookie: %s", resp.Status)
	}
	// Redirects stay on this server.
	for _, p := range []string{"//evil.example/x", "/\\evil.example/x"} {
		req, _ := http.NewRequest("GET", u.srv.URL+"/", nil)
		req.URL.Path, req.URL.RawPath, req.URL.RawQuery = p, "", "token="+testToken
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); loc != "/" {
			t.Errorf("GET %s?token=: redirect to %q, want /", p, loc)
		}
	}
	// The token twice is refused.
	resp = u.request("GET", "/?token="+testToken+"&token="+testToken, false)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("two tokens: %s, want 401", resp.Status)
	}
}

// TestUIForeignHost: a request whose Host is not the server's loopback
// address (a DNS name rebound to 127.0.0.1, another port) is refused,
// token, cookie and all; localhost:PORT is served.
func TestUIForeignHost(t *testing.T) {
	u := startUI(t, Options{StateDir: twoRuns(t)})
	_, port, _ := net.SplitHostPort(u.host)
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.2:" + port, "127.0.0.1:1", "localhost",
		"localhost." + ":" + port, "[::1]:" + port, "127.0.0.1:" + port + ".evil.example"} {
		for _, p := range []string{"/", "/api/runs", "/api/events", "/?token=" + testToken} {
			resp := u.request("GET", p, true, "Host", host)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || bytes.Contains(b, []byte("alice")) || len(resp.Cookies()) > 0 {
				t.Errorf("GET %s with Host %q: %s %q, want 403 and nothing", p, host, resp.Status, b)
			}
		}
	}
	for _, host := range []string{"localhost:" + port, "LOCALHOST:" + port, "127.0.0.1:" + port} {
		resp := u.request("GET", "/api/runs", true, "Host", host)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Host %q: %s, want 200", host, resp.Status)
		}
	}
}

// TestUIOnlyReads: every method but GET and HEAD is refused everywhere,
// with the cookie; HEAD is served.
func TestUIOnlyReads(t *testing.T) {
	u := startUI(t, Options{StateDir: twoRuns(t), Graph: fakeGraph})
	for _, p := range uiPaths {
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
			resp := u.request(m, p, true)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %s (Allow %q), want 405", m, p, resp.Status, resp.Header.Get("Allow"))
			}
		}
		if p == "/nothing-here" {
			continue
		}
		resp := u.request("HEAD", p, true)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("HEAD %s: %s", p, resp.Status)
		}
	}
}

// TestUIHeaders: every response, served or refused, carries the CSP,
// nosniff, no referrer and no-store, with the right Content-Type.
func TestUIHeaders(t *testing.T) {
	u := startUI(t, Options{StateDir: twoRuns(t), Graph: fakeGraph})
	types := map[string]string{
		"/": "text/html; charset=utf-8", "/runs/" + runA: "text/html; charset=utf-8", "/runs/last": "text/html; charset=utf-8",
		"/assets/app.js": "text/javascript; charset=utf-8", "/assets/style.css": "text/css; charset=utf-8", "/assets/icon.svg": "image/svg+xml",
		"/api/runs": "application/json", "/api/runs/" + runA: "application/json", "/api/runs/last": "application/json",
		"/api/runs/" + runA + "/graph.svg": "image/svg+xml", "/api/events": "text/event-stream", "/nothing-here": "text/plain; charset=utf-8",
	}
	check := func(what string, resp *http.Response) {
		t.Helper()
		h := resp.Header
		for k, want := range map[string]string{
			"Content-Security-Policy": ContentSecurityPolicy, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
			"Cache-Control": "no-store", "X-Frame-Options": "DENY",
		} {
			if got := h.Get(k); got != want {
				t.Errorf("%s: %s: %q, want %q", what, k, got, want)
			}
		}
		if strings.Contains(h.Get("Content-Security-Policy"), "unsafe") {
			t.Errorf("%s: the CSP allows something unsafe", what)
		}
	}
	if ContentSecurityPolicy != "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'" {
		t.Errorf("the CSP changed: %s", ContentSecurityPolicy)
	}
	for p, ctype := range types {
		resp := u.request("GET", p, true)
		resp.Body.Close()
		check("GET "+p, resp)
		if got := resp.Header.Get("Content-Type"); got != ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", p, got, ctype)
		}
		resp = u.request("GET", p, false)
		resp.Body.Close()
		check("GET "+p+" without the token", resp)
	}
	for _, resp := range []*http.Response{u.request("POST", "/", true), u.request("GET", "/", true, "Host", "evil.example"),
		u.request("GET", "/?token="+testToken, false)} {
		resp.Body.Close()
		check(resp.Request.Method+" "+resp.Request.URL.String()+" refused", resp)
	}
}

// rawControl returns the first byte of b a terminal or a text layout
// would act on (C0 but newline and tab, DEL, C1, bidi overrides, invalid
// UTF-8), or -1.
func rawControl(b []byte) int {
	for i, r := range string(b) {
		switch {
		case r == '\uFFFD' && !bytes.HasPrefix(b[i:], []byte("\uFFFD")):
			return i
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r < 0xa0, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return i
		}
	}
	return -1
}

// TestUIEscaping: what the server renders carries every hostile string
// as data only: the JSON has no markup (<, > and & are \u escapes) and no
// raw control character, and decodes to the strings with their controls
// shown as Go escapes; the pages are the embedded files, with no data in
// them; the picture keeps no script, handler, link or foreign content.
func TestUIEscaping(t *testing.T) {
	u := startUI(t, Options{StateDir: twoRuns(t), Graph: fakeGraph})
	for _, p := range []string{"/api/runs", "/api/runs/" + runA, "/api/runs/" + runB} {
		_, b := u.get(p)
		for _, bad := range []string{"<img", "<script", "</", ">"} {
			if bytes.Contains(b, []byte(bad)) {
				t.Errorf("GET %s: the JSON carries %q raw", p, bad)
			}
		}
		if i := rawControl(b); i >= 0 {
			t.Errorf("GET %s: a raw control character at byte %d: %q", p, i, b[max(0, i-30):min(len(b), i+10)])
		}
	}
	// Output withheld as an answer is not served at all.
	if _, b := u.get("/api/runs/" + runA); bytes.Contains(b, []byte("withheld answer")) || !bytes.Contains(b, []byte(`"withheld": true`)) && !bytes.Contains(b, []byte(`"withheld":true`)) {
		t.Errorf("the withheld output is served, or not marked withheld")
	}
	var v runView
	u.getJSON("/api/runs/"+runA, &v)
	escaped := `\x1b[31mRED\x1b]8;;http://evil.example\alink\x1b]8;;\a\u009b2J\u202eevil`
	c3 := v.Caps[2]
	checks := []struct{ what, got, want string }{
		{"a capability name", c3.Name, xssImg},
		{"a scope value", v.Caps[1].Fields[0].Value, "/search/" + xssImg + escaped},
		{"a when constraint", v.Caps[0].When[0], `request.path != "` + xssImg + `"`},
		{"a task error", v.Tasks[0].Error, "failed " + xssScript},
		{"a task error with escapes", v.Tasks[1].Error, escaped},
		{"a denial's op", v.Denials[0].Op, "call:fetch" + xssScript},
		{"a denial's reason", v.Denials[0].Reason, `path "/admin/` + xssImg + `" is outside the allowed prefixes ` + escaped},
		{"the run's error", v.Run.Error, "exit 1: " + escaped},
		{"the result", v.Outputs[0].Text, "result " + xssImg + escaped + `\xff\xfe`},
		{"stdout", v.Outputs[1].Text, "stdout " + xssScript + "\n"},
		{"withheld stdout", v.Outputs[2].Text, ""},
		{"a flow's reason", v.Flows[0].Reason, "label {pii:" + xssImg + "} may not flow to http://127.0.0.1:1"},
		{"the task name", v.Run.Task, "task " + xssScript},
		{"a label", v.Tasks[0].Label.Conf[0], "pii:" + xssImg},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
	}
	// The pages are the embedded files: no data is rendered into them.
	for p, name := range map[string]string{"/": "index.html", "/runs/" + runA: "run.html"} {
		_, b := u.get(p)
		want, _ := fs.ReadFile(assetFS, "assets/"+name)
		if !bytes.Equal(b, want) || bytes.Contains(b, []byte(runA)) {
			t.Errorf("GET %s is not the embedded %s", p, name)
		}
		if bytes.Contains(b, []byte("<script>")) || bytes.Contains(b, []byte(" style=")) || inlineHandler.Match(b) {
			t.Errorf("GET %s has inline script, style or a handler", p)
		}
	}
	// app.js sets strings as text only.
	js, _ := fs.ReadFile(assetFS, "assets/app.js")
	for _, bad := range []string{".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "'text/html'"} {
		if bytes.Contains(js, []byte(bad)) {
			t.Errorf("app.js uses %s", bad)
		}
	}
	_, svg := u.get("/api/runs/" + runA + "/graph.svg")
	if p := svgProblems(svg); p != "" {
		t.Errorf("the picture keeps %s:\n%s", p, svg)
	}
	for _, bad := range []string{"script>", "foreignObject", "<a", "href", "<image", "<use", "style=", "evil.example", "DOCTYPE", "<img"} {
		if bytes.Contains(svg, []byte(bad)) {
			t.Errorf("the picture keeps %q:\n%s", bad, svg)
		}
	}
	for _, want := range []string{`id="cap-c3"`, `class="node cap"`, "&lt;img src=x onerror=alert(1)&gt;", `fill="url(#grad)"`, `<ellipse`} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("the picture lost %q:\n%s", want, svg)
		}
	}
}

// TestUIRunView: the run page's JSON: the task tree, each capability's
// derivation path to the manifest's grant, denials and audit entries by
// capability, flows with the kernel's reasons, the verdict on the log and
// the checkpoint that covers the run, filters on the list.
func TestUIRunView(t *testing.T) {
	u := startUI(t, Options{StateDir: twoRuns(t)})
	var v runView
	u.getJSON("/api/runs/"+runA, &v)
	if len(v.Tasks) != 2 || v.Tasks[1].Depth != 1 || v.Tasks[0].Children[0] != "t2" || strings.Join(v.Tasks[0].Caps, ",") != "c1,c2" {
		t.Errorf("tasks: %+v", v.Tasks)
	}
	c3 := v.Caps[2]
	var path []string
	for _, l := range c3.Path {
		path = append(path, l.ID+"@"+l.Holder)
	}
	if strings.Join(path, " ") != "c1@t1 c2@t1 c3@t2" || c3.Grant != "web" || !c3.Path[2].Passed {
		t.Errorf("c3's derivation: %v, grant %q", path, c3.Grant)
	}
	if strings.Join(c3.Inherited, "; ") != `c1: when request.path != "`+xssImg+`"; c2: rate 10/s` {
		t.Errorf("c3 inherits %q", c3.Inherited)
	}
	if len(v.Caps[0].Denials) != 1 || len(c3.Denials) != 1 || v.Denials[c3.Denials[0]].Errno != "EREVOKED" {
		t.Errorf("denials by capability: c1 %v, c3 %v", v.Caps[0].Denials, c3.Denials)
	}
	if len(v.Caps[0].Entries) != 3 { // its denial, its allowed call, its flow
		t.Errorf("c1's audit entries: %v", v.Caps[0].Entries)
	}
	a := v.Audit
	if !a.Available || !a.Verify.OK || a.Verify.Entries != 6 || a.Verify.Checkpoints != 2 || a.Verify.LatestSize != 6 || !a.Covered || a.Total != 4 {
		t.Errorf("audit: %+v", a)
	}
	if !strings.Contains(a.Coverage, "All 4 entries of this run (seq 0 to 3) are covered by the latest signed checkpoint (size 6)") {
		t.Errorf("coverage: %s", a.Coverage)
	}
	if v.Receipts.Shown || !strings.Contains(v.Receipts.Note, "mandate run --receipt") {
		t.Errorf("receipts: %+v", v.Receipts)
	}
	if v.Graph {
		t.Errorf("a picture without a renderer")
	}

	var last runView
	u.getJSON("/api/runs/last", &last)
	if last.Run.ID != runB {
		t.Errorf("last is %s, want %s", last.Run.ID, runB)
	}
	for q, want := range map[string]string{
		"": runB + " " + runA, "?principal=alice": runA, "?principal=carol": "", "?state=done": runB,
		"?denials=1": runA, "?denials=1&principal=bob": "", "?state=failed&principal=alice": runA,
	} {
		var rv runsView
		u.getJSON("/api/runs"+q, &rv)
		var ids []string
		for _, r := range rv.Runs {
			ids = append(ids, r.ID)
		}
		if strings.Join(ids, " ") != want || rv.Total != 2 || strings.Join(rv.Principals, ",") != "alice,bob" {
			t.Errorf("/api/runs%s: %v (total %d, principals %v), want %q", q, ids, rv.Total, rv.Principals, want)
		}
	}
	for _, p := range []string{"/api/runs/20990101T000000Z-000000", "/api/runs/..%2f..%2fetc", "/runs/bad%20id"} {
		resp := u.request("GET", p, true)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", p, resp.Status)
		}
	}
}

// TestUITamperedLog: an entry changed behind the log's back: the run page
// says the log does not verify and names the entry.
func TestUITamperedLog(t *testing.T) {
	dir := twoRuns(t)
	db, err := sql.Open("sqlite", filepath.Join(dir, AuditFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE entries SET reason = 'nothing to see' WHERE idx = 1"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	u := startUI(t, Options{StateDir: dir})
	var v runView
	u.getJSON("/api/runs/"+runA, &v)
	if vv := v.Audit.Verify; vv.OK || vv.FirstBad != 1 || vv.Problem == "" {
		t.Errorf("a tampered log: %+v", vv)
	}
}

// snapshot lists every file under dir with its size, mode and
// modification time.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, rel+" "+fi.Mode().String()+" "+fi.ModTime().Format(time.RFC3339Nano)+" "+itoa(fi.Size()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// inlineHandler matches an inline event handler attribute.
var inlineHandler = regexp.MustCompile(`<[^>]*\son[a-z]+\s*=`)

// svgProblems names the first element or attribute of an SVG that the
// allowlist does not allow, "" when there is none.
func svgProblems(b []byte) string {
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			return "a parse error: " + err.Error()
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if !svgElements[t.Name.Local] {
				return "element " + t.Name.Local
			}
			for _, a := range t.Attr {
				if a.Name.Local == "xmlns" && a.Name.Space == "" {
					continue
				}
				if a.Name.Space != "" || !svgAttrs[a.Name.Local] || !safeValue(a.Value) || strings.HasPrefix(strings.ToLower(a.Name.Local), "on") {
					return "attribute " + a.Name.Space + ":" + a.Name.Local + "=" + a.Value
				}
			}
		case xml.Directive, xml.ProcInst, xml.Comment:
			return "a directive, instruction or comment"
		}
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestUIReadOnlyStateDir: on a state directory nobody may write (a
// read-only bind mount as root), every page, the JSON, the picture and
// the event stream are served, and the directory is exactly as it was.
func TestUIReadOnlyStateDir(t *testing.T) {
	dir := twoRuns(t)
	testfs.ReadOnly(t, dir)
	before := snapshot(t, dir)
	u := startUI(t, Options{StateDir: dir, Graph: fakeGraph})
	for _, p := range uiPaths {
		if p == "/nothing-here" || p == "/api/events" {
			continue
		}
		u.get(p)
	}
	var v runView
	u.getJSON("/api/runs/"+runA, &v)
	if !v.Audit.Verify.OK || len(v.Caps) != 3 {
		t.Errorf("read-only: audit %+v, %d caps", v.Audit.Verify, len(v.Caps))
	}
	s := u.openStream()
	s.next(t, "ready", 5*time.Second)
	time.Sleep(200 * time.Millisecond) // a few polls
	u.s.Close()
	if after := snapshot(t, dir); after != before {
		t.Errorf("the state directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestUIWritesNothing: on a writable state directory, serving changes no
// file: the databases and the key are byte for byte as they were. The
// one thing that may appear is SQLite's own: a read-only connection to a
// database in WAL mode makes its -wal and -shm files (empty of changes)
// when no writer left them, as every reading command does
// (runstore.OpenReadOnly); a read-only directory gets none
// (TestUIReadOnlyStateDir).
func TestUIWritesNothing(t *testing.T) {
	dir := twoRuns(t)
	files := []string{runstore.FileName, AuditFile, "audit.key"}
	before := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		before[f] = b
	}
	u := startUI(t, Options{StateDir: dir, Graph: fakeGraph})
	for _, p := range uiPaths {
		if p != "/nothing-here" && p != "/api/events" {
			u.get(p)
		}
	}
	s := u.openStream()
	s.next(t, "ready", 5*time.Second)
	u.s.Close()
	for _, f := range files {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); !bytes.Equal(b, before[f]) {
			t.Errorf("%s changed", f)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		name := e.Name()
		if _, ok := before[name]; ok {
			continue
		}
		base, ok := strings.CutSuffix(name, "-wal")
		if !ok {
			base, ok = strings.CutSuffix(name, "-shm")
		}
		if _, db := before[base]; !ok || !db || base == "audit.key" {
			t.Errorf("serving made %s", name)
			continue
		}
		if fi, _ := e.Info(); strings.HasSuffix(name, "-wal") && fi.Size() != 0 {
			t.Errorf("%s holds %d bytes: something was written", name, fi.Size())
		}
	}
}

// TestUIEmptyStateDir: a state directory with nothing recorded (or not
// made yet) is shown empty, and its first run shows up live.
func TestUIEmptyStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	u := startUI(t, Options{StateDir: dir})
	var rv runsView
	u.getJSON("/api/runs", &rv)
	if len(rv.Runs) != 0 || rv.Note == "" {
		t.Errorf("an empty state directory: %+v", rv)
	}
	resp := u.request("GET", "/api/runs/last", true)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the last run of none: %s", resp.Status)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the UI made the state directory")
	}
	s := u.openStream()
	s.next(t, "ready", 5*time.Second)
	st, err := runstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := hostileRecord(runA, "alice", t0)
	if err := st.Begin(context.Background(), rec.Run); err != nil {
		t.Fatal(err)
	}
	ev := s.next(t, "change", 10*time.Second)
	if !strings.Contains(ev.data, runA) {
		t.Errorf("the first run's event: %s", ev.data)
	}
	u.getJSON("/api/runs", &rv)
	if len(rv.Runs) != 1 || rv.Runs[0].State != "running" {
		t.Errorf("after the first run began: %+v", rv.Runs)
	}
}
