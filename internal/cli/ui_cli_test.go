package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/testfs"
)

// uiProc is a running "mandate ui" process.
type uiProc struct {
	url    string // what it printed: http://127.0.0.1:PORT/PATH?token=...
	base   string // http://127.0.0.1:PORT
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

// startUIProc runs the mandate binary's ui command on state and waits
// for the URL it prints; the process is stopped with SIGINT at cleanup and
// must exit 0.
func startUIProc(t *testing.T, bin, state string, args ...string) *uiProc {
	t.Helper()
	p := &uiProc{stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"ui", "--state-dir", state}, args...)...)
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		io.Copy(io.Discard, out)
	}()
	go func() { p.done <- p.cmd.Wait() }()
	select {
	case l, ok := <-line:
		if !ok {
			t.Fatalf("mandate ui printed no URL: %s", p.stderr)
		}
		p.url = l
	case <-time.After(2 * time.Minute): // a hang guard: the URL is an event
		p.cmd.Process.Kill()
		t.Fatalf("mandate ui printed no URL within 2 minutes: %s", p.stderr)
	}
	u, err := url.Parse(p.url)
	if err != nil || u.Query().Get("token") == "" {
		t.Fatalf("mandate ui printed %q: not a URL with a token", p.url)
	}
	p.base = u.Scheme + "://" + u.Host
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-p.done:
			if err != nil {
				t.Errorf("mandate ui after SIGINT: %v\n%s", err, p.stderr)
			}
		case <-time.After(2 * time.Minute): // a hang guard
			p.cmd.Process.Kill()
			t.Errorf("mandate ui did not stop within 2 minutes of SIGINT")
		}
	})
	return p
}

// client returns an HTTP client that has traded the token for the cookie.
func (p *uiProc) client(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := c.Get(p.url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Query().Get("token") != "" {
		t.Fatalf("GET %s: %s, ended at %s", p.url, resp.Status, resp.Request.URL)
	}
	return c
}

func (p *uiProc) getJSON(t *testing.T, c *http.Client, path string, v any) {
	t.Helper()
	resp, err := c.Get(p.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// xssRun runs the ui-xss guest (testdata/guests/ui-xss) with the mandate
// binary into state and returns the run's id.
func xssRun(t *testing.T, bin, state string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("results")) }))
	defer srv.Close()
	guest, err := filepath.Abs(filepath.Join("testdata", "guests", "ui-xss"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "xss.hcl")
	hcl := fmt.Sprintf(`task "ui-xss" {
  module    = %[1]q
  principal = "mallory"
  cap "net" "web" {
    origin        = var.origin
    paths         = ["/search"]
    allow_private = true
    audit         = true
  }
  cap "spawn" "kids" {
    modules      = [%[1]q]
    max_children = 1
  }
}
`, guest)
	if err := os.WriteFile(manifest, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", manifest, "--var", "origin="+srv.URL, "--state-dir", state, "--cache-dir", testCache(),
		"--log-level", "off", "--format", "json")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("mandate run ui-xss: %v\n%s", err, &errOut)
	}
	var rep struct{ Run string }
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Run == "" {
		t.Fatalf("mandate run --format json: %v: %s", err, &out)
	}
	return rep.Run
}

// TestUICommand: mandate ui's usage errors, and a real process on a state
// directory that cannot be written: it prints a URL with the token for
// the run asked for, serves the runs through it and nothing without it,
// creates nothing, and stops on SIGINT with exit 0.
func TestUICommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ui", "--addr", "0.0.0.0:0"}, "not a loopback address"},
		{[]string{"ui", "--addr", ":0"}, "every interface"},
		{[]string{"ui", "../../etc"}, "is not a run id"},
		{[]string{"ui", "last", "more"}, `unexpected argument "more"`},
		{[]string{"ui", "--frob"}, "flag provided but not defined"},
	} {
		var o, e bytes.Buffer
		if code := Main(append(c.args, "--state-dir", t.TempDir()), nil, &o, &e); code != exitUsage || !strings.Contains(e.String(), c.want) {
			t.Errorf("mandate %v: exit %d, stderr %q; want 2 and %q", c.args, code, e.String(), c.want)
		}
	}
	var o, e bytes.Buffer
	if code := Main([]string{"ui", "--help"}, nil, &o, &e); code != 0 || !strings.HasPrefix(o.String(), "Usage: mandate ui") ||
		!strings.Contains(o.String(), "Content-Security-Policy") {
		t.Errorf("mandate ui --help: exit %d: %s", code, &o)
	}
	if testing.Short() {
		t.Skip("builds and runs a guest and the mandate binary")
	}

	f := newFetchRuns(t)
	if code, stderr := f.run(); code != 0 {
		t.Fatalf("a run: exit %d: %s", code, stderr)
	}
	testfs.ReadOnly(t, f.state)
	before := listing(t, f.state)
	p := startUIProc(t, buildMandate(t), f.state, "last")
	if !strings.Contains(p.url, "/runs/last?token=") {
		t.Errorf("mandate ui last printed %q", p.url)
	}
	resp, err := http.Get(p.base + "/api/runs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %s", resp.Status)
	}
	c := p.client(t)
	var runs struct {
		Runs []struct{ ID, State, Principal string }
	}
	p.getJSON(t, c, "/api/runs", &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].State != "done" || runs.Runs[0].Principal != "alice" {
		t.Fatalf("the runs: %+v", runs.Runs)
	}
	var run struct {
		Run   struct{ ID string }
		Caps  []struct{ ID, Name string }
		Audit struct {
			Verify  struct{ OK bool }
			Covered bool
			Total   int
		}
	}
	p.getJSON(t, c, "/api/runs/"+runs.Runs[0].ID, &run)
	if run.Run.ID != runs.Runs[0].ID || len(run.Caps) != 1 || run.Caps[0].Name != "web" || !run.Audit.Verify.OK || !run.Audit.Covered || run.Audit.Total == 0 {
		t.Errorf("the run: %+v", run)
	}
	if after := listing(t, f.state); after != before {
		t.Errorf("mandate ui changed the state directory:\n%s\n---\n%s", before, after)
	}
}

// listing is every file under dir with its size and modification time.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			lines = append(lines, fmt.Sprintf("%s %d %s", p, fi.Size(), fi.ModTime().Format(time.RFC3339Nano)))
		}
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
