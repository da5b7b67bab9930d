package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/approvals"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

const hostileDetail = "<script>alert(1)</script><img src=x onerror=alert(2)>\x1b[31mred\x1b]0;title\x07\u202eevil"

// pendingApproval records an approval of runA in dir: a charge whose
// body is a megabyte and hostile.
func pendingApproval(t *testing.T, dir string) (*approvals.Store, approvals.Approval) {
	t.Helper()
	st, err := approvals.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	body := strings.Repeat("b", 1<<20) + hostileDetail
	a, err := st.Add(context.Background(), approvals.Approval{Run: runA, Waiter: "mandate run " + hostileDetail,
		Expires: time.Now().Add(time.Hour), Request: kernel.ApprovalRequest{
			Task: "t1", Principal: "alice", Module: "m", Cap: "c1", CapName: "card", Kind: "pay", Op: "charge",
			Summary: "charge 612.00 USD to " + hostileDetail,
			Details: []kindapi.Detail{{Name: "amount", Value: "612.00 USD"}, {Name: "body", Value: body}},
			Reasons: []string{"amount above approve_above 500.00 USD"}, Digest: "sha256:0123"}})
	if err != nil {
		t.Fatal(err)
	}
	return st, a
}

// post sends POST path with body from the UI's own page (cookie, Origin,
// same-origin, JSON), but for the headers hdr overrides ("" removes).
func (u *ui) post(path, body string, cookie bool, hdr ...string) (int, string) {
	u.t.Helper()
	req, err := http.NewRequest("POST", u.srv.URL+path, strings.NewReader(body))
	if err != nil {
		u.t.Fatal(err)
	}
	req.Header.Set("Origin", "http://"+u.host)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Content-Type", "application/json")
	if cookie {
		req.AddCookie(&http.Cookie{Name: u.s.guard.cookie, Value: testToken})
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestUIApprovalPage: the approval's page shows the whole effect, every
// string escaped (set as text by the page), the nonce while pending; the
// lists, the runs list's count and the run's page show it.
func TestUIApprovalPage(t *testing.T) {
	dir := twoRuns(t)
	st, a := pendingApproval(t, dir)
	u := startUI(t, Options{StateDir: dir})

	_, page := u.get("/approvals/" + a.ID)
	want, _ := fs.ReadFile(assetFS, "assets/approval.html")
	if !bytes.Equal(page, want) || bytes.Contains(page, []byte(a.ID)) || bytes.Contains(page, []byte("<script>")) {
		t.Errorf("GET /approvals/ID is not the embedded approval.html")
	}
	var v approvalView
	raw := u.getJSON("/api/approvals/"+a.ID, &v)
	escaped := kindapi.EscapeText(hostileDetail)
	if !strings.Contains(escaped, `\x1b[31m`) || !strings.Contains(escaped, `\u202e`) {
		t.Fatalf("EscapeText(%q) = %q: the test expects escapes", hostileDetail, escaped)
	}
	body := v.Details[1]
	if len(v.Details) != 2 || body.Bytes != 1<<20+len(hostileDetail) || body.Value != strings.Repeat("b", 1<<20)+escaped {
		t.Errorf("the body detail is not whole and escaped: %d bytes, ends %q", body.Bytes, body.Value[max(0, len(body.Value)-80):])
	}
	if v.Summary != "charge 612.00 USD to "+escaped || v.Waiter != "mandate run "+escaped || v.Digest != "sha256:0123" ||
		v.State != approvals.StatePending || len(v.Nonce) != 64 || v.Reasons[0] != "amount above approve_above 500.00 USD" {
		t.Errorf("the view: summary %q waiter %q digest %q state %q nonce %q", v.Summary, v.Waiter, v.Digest, v.State, v.Nonce)
	}
	if bytes.Contains(raw, []byte("<script")) || bytes.Contains(raw, []byte("\x1b")) {
		t.Error("the JSON carries markup or a raw escape")
	}

	var l approvalsView
	u.getJSON("/api/approvals", &l)
	if len(l.Pending) != 1 || l.Pending[0].ID != a.ID || len(l.Answered) != 0 {
		t.Errorf("the list: %+v", l)
	}
	var runs runsView
	u.getJSON("/api/runs", &runs)
	if runs.PendingApprovals != 1 {
		t.Errorf("the runs list counts %d pending approvals", runs.PendingApprovals)
	}
	if _, err := st.Answer(context.Background(), a.ID, kernel.Answer{Channel: kernel.ChannelCLI, By: "alice on /dev/pts/3"}, ""); err != nil {
		t.Fatal(err)
	}
	var rv runView
	u.getJSON("/api/runs/"+runA, &rv)
	if len(rv.Approvals) != 1 || rv.Approvals[0].State != approvals.StateRefused || rv.Approvals[0].Channel != kernel.ChannelCLI ||
		rv.Approvals[0].By != "alice on /dev/pts/3" {
		t.Errorf("the run's approvals: %+v", rv.Approvals)
	}
	v = approvalView{}
	u.getJSON("/api/approvals/"+a.ID, &v)
	if v.Nonce != "" || v.State != approvals.StateRefused {
		t.Errorf("answered: state %q, nonce %q", v.State, v.Nonce)
	}
	u.getJSON("/api/approvals", &l)
	if len(l.Pending) != 0 || len(l.Answered) != 1 {
		t.Errorf("the list once answered: %+v", l)
	}
}

// TestUIApprovalAnswer: a POST answers only from the UI's own page:
// cookie, Origin, same-origin, JSON, the nonce; once.
func TestUIApprovalAnswer(t *testing.T) {
	dir := twoRuns(t)
	st, a := pendingApproval(t, dir)
	u := startUI(t, Options{StateDir: dir})
	path := "/approvals/" + a.ID + "/answer"
	nonce, err := st.Nonce(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	yes := `{"nonce":"` + nonce + `","yes":true}`
	for _, c := range []struct {
		what   string
		cookie bool
		body   string
		hdr    []string
		code   int
	}{
		{"no cookie", false, yes, nil, http.StatusUnauthorized},
		{"no Origin", true, yes, []string{"Origin", ""}, http.StatusForbidden},
		{"another site's Origin", true, yes, []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"Origin null", true, yes, []string{"Origin", "null"}, http.StatusForbidden},
		{"another port", true, yes, []string{"Origin", "http://127.0.0.1:1"}, http.StatusForbidden},
		{"cross-site fetch", true, yes, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"same-site fetch", true, yes, []string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{"a form's type", true, yes, []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"text/plain", true, yes, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType},
		{"too large", true, `{"nonce":"` + nonce + `","yes":true,"pad":"` + strings.Repeat("x", 5000) + `"}`, nil, http.StatusRequestEntityTooLarge},
		{"not JSON", true, "yes please", nil, http.StatusBadRequest},
		{"no yes", true, `{"nonce":"` + nonce + `"}`, nil, http.StatusBadRequest},
		{"wrong nonce", true, `{"nonce":"` + strings.Repeat("0", 64) + `","yes":true}`, nil, http.StatusForbidden},
	} {
		if code, msg := u.post(path, c.body, c.cookie, c.hdr...); code != c.code {
			t.Errorf("%s: %d %s, want %d", c.what, code, msg, c.code)
		}
	}
	if g, _ := st.Get(context.Background(), a.ID); g.State != approvals.StatePending {
		t.Fatalf("a refused POST answered: %+v", g)
	}
	for _, m := range []string{"GET", "HEAD"} {
		resp := u.request(m, path, true)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s %s: %s, want 405", m, path, resp.Status)
		}
	}
	// A POST elsewhere is refused as before.
	if code, _ := u.post("/approvals/"+a.ID, yes, true); code != http.StatusMethodNotAllowed {
		t.Errorf("POST to the page: %d", code)
	}

	code, msg := u.post(path, yes, true, "User-Agent", "Browser\u202e"+strings.Repeat("u", 300))
	if code != http.StatusOK {
		t.Fatalf("the answer: %d %s", code, msg)
	}
	g, _ := st.Get(context.Background(), a.ID)
	if g.State != approvals.StateApproved || g.Channel != kernel.ChannelWeb || !strings.HasPrefix(g.By, "web page, client 127.0.0.1:") ||
		!strings.Contains(g.By, `Browser\u202euuu`) || len(g.By) > 300 {
		t.Errorf("answered: %+v", g)
	}
	if code, msg := u.post(path, yes, true); code != http.StatusConflict || !strings.Contains(msg, "already approved") {
		t.Errorf("the nonce again: %d %s, want 409", code, msg)
	}
	if code, _ := u.post(path, `{"nonce":"`+nonce+`","yes":false}`, true); code != http.StatusConflict {
		t.Errorf("a second answer: %d, want 409", code)
	}
	// An unknown approval.
	if code, _ := u.post("/approvals/0123456789abcdef/answer", yes, true); code != http.StatusNotFound {
		t.Errorf("an unknown approval: %d, want 404", code)
	}
}

// TestApprovalURL: the URL of an approval's page while a live mandate ui
// published its address, never with the token; none otherwise.
func TestApprovalURL(t *testing.T) {
	dir := t.TempDir()
	id := "0123456789abcdef"
	if _, ok := ApprovalURL(dir, id); ok {
		t.Error("a URL with no ui running")
	}
	unpublish, err := Publish(dir, "127.0.0.1:8765")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, UIFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("ui.json: %v, %v", fi, err)
	}
	if u, ok := ApprovalURL(dir, id); !ok || u != "http://127.0.0.1:8765/approvals/"+id {
		t.Errorf("ApprovalURL: %q, %v", u, ok)
	}
	if _, ok := ApprovalURL(dir, "../x"); ok {
		t.Error("a URL for a bad id")
	}
	unpublish()
	if _, err := os.Stat(filepath.Join(dir, UIFile)); err == nil {
		t.Error("ui.json stays after unpublish")
	}
	// A ui that died without removing it, or a file naming another host.
	for _, info := range []uiInfo{{Addr: "127.0.0.1:8765", PID: 999999999}, {Addr: "evil.example:80", PID: os.Getpid()}} {
		b, _ := json.Marshal(info)
		os.WriteFile(filepath.Join(dir, UIFile), b, 0o600)
		if u, ok := ApprovalURL(dir, id); ok {
			t.Errorf("%+v: %q", info, u)
		}
	}
}
