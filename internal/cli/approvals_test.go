//go:build linux

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"golang.org/x/sys/unix"
)

// payWait is a "mandate run --approve wait" of a manifest whose one task
// (testdata/guests/pay-child) charges 612.00 USD on a card whose
// approve_above is 500 USD, against a loopback provider: the run waits
// for a person's answer.
type payWait struct {
	state, id string
	pay       *paytest.Provider
	cmd       *exec.Cmd
	stdout    bytes.Buffer
	stderr    *watchWriter
	done      chan struct{} // closed when the process ended
}

func startPayWait(t *testing.T, bin, state string) *payWait {
	t.Helper()
	guest, err := filepath.Abs(filepath.Join("..", "..", "testdata", "guests", "pay-child"))
	if err != nil {
		t.Fatal(err)
	}
	p := &payWait{state: state, pay: paytest.NewProvider(), done: make(chan struct{})}
	t.Cleanup(p.pay.Close)
	dir := t.TempDir()
	man := filepath.Join(dir, "pay.hcl")
	hcl := fmt.Sprintf(`task "pay" {
  module    = %q
  principal = "alice"
  cap "pay" "card" {
    provider      = var.pay
    allow_private = true
    instrument    = { env = "APPROVALS_TEST_CARD" }
    payees        = ["airline.example"]
    currency      = "USD"
    max_amount    = "800 USD"
    approve_above = "500 USD"
  }
}
`, guest)
	in := filepath.Join(dir, "in.json")
	if err := os.WriteFile(man, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, []byte(`{"Key":"k1","Amount":"612.00"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	asked := make(chan struct{})
	var once sync.Once
	p.stderr = &watchWriter{pattern: "mandate approvals yes ", fire: func() { once.Do(func() { close(asked) }) }}
	p.cmd = exec.Command(bin, "run", man, "--var", "pay="+p.pay.URL, "--input", in, "--approve", "wait",
		"--state-dir", state, "--cache-dir", testCache(), "--format", "json")
	p.cmd.Env = append(os.Environ(), "APPROVALS_TEST_CARD=tok_test")
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no terminal: it cannot be asked there
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case <-asked:
	case <-p.done:
		t.Fatalf("mandate run ended before asking: %v\n%s", p.cmd.ProcessState, p.stderr)
	case <-time.After(3 * time.Minute):
		t.Fatalf("mandate run did not ask within 3 minutes:\n%s", p.stderr)
	}
	m := regexp.MustCompile(`mandate approvals yes ([0-9a-f]{16})`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no approval id in:\n%s", p.stderr)
	}
	p.id = m[1]
	return p
}

// wait waits for the run to end and returns its JSON report.
func (p *payWait) wait(t *testing.T) (report struct{ Run, State, Result string }) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("mandate run still waits after the answer:\n%s", p.stderr)
	}
	if err := json.Unmarshal(p.stdout.Bytes(), &report); err != nil {
		t.Fatalf("the run's report: %v: %s\n%s", err, &p.stdout, p.stderr)
	}
	return report
}

// pending reports whether the run still waits.
func (p *payWait) pending() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// mandateCmd runs the binary without a controlling terminal and returns
// its exit code, stdout and stderr.
func mandateCmd(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// openPTY opens a pseudo-terminal pair: the master and the slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("opening the slave: %v", err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// answerInPTY runs "mandate args..." in a new session whose controlling
// terminal is a pseudo-terminal, types typed once prompt appears on it,
// and returns the exit code and what the terminal showed.
func answerInPTY(t *testing.T, bin, prompt, typed string, args ...string) (int, string) {
	t.Helper()
	master, slave := openPTY(t)
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child holds it
	var mu sync.Mutex
	var shown bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		typedOnce := false
		for {
			n, err := master.Read(buf)
			mu.Lock()
			shown.Write(buf[:n])
			ready := !typedOnce && strings.Contains(shown.String(), prompt)
			mu.Unlock()
			if ready {
				typedOnce = true
				master.Write([]byte(typed))
			}
			if err != nil {
				return // EIO once the child and its terminal are gone
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("mandate %v did not end; the terminal shows:\n%s", args, &shown)
	}
	master.SetReadDeadline(time.Now().Add(2 * time.Second))
	<-read
	mu.Lock()
	defer mu.Unlock()
	return cmd.ProcessState.ExitCode(), shown.String()
}

// TestApprovalsCLI: a run waiting for a person (--approve wait) is
// approved by "mandate approvals yes" in a terminal, once, and then the
// one charge goes through; without a terminal the yes is refused and the
// run still waits. A second run is refused by "mandate approvals no",
// which needs no terminal; the audit log records both answers.
func TestApprovalsCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest and the mandate binary")
	}
	bin := buildMandate(t)
	state := t.TempDir()
	p := startPayWait(t, bin, state)
	sd := []string{"--state-dir", state}

	code, out, errOut := mandateCmd(t, bin, append([]string{"approvals"}, sd...)...)
	if code != 0 || !strings.Contains(out, p.id+"  pending") || !strings.Contains(out, "charge 612.00 USD") {
		t.Errorf("mandate approvals: exit %d: %s%s", code, out, errOut)
	}
	code, out, _ = mandateCmd(t, bin, append([]string{"approvals", "show", p.id}, sd...)...)
	if code != 0 || !strings.Contains(out, "above approve_above 500.00 USD") || !strings.Contains(out, "effect    sha256:") {
		t.Errorf("mandate approvals show: exit %d: %s", code, out)
	}

	// No terminal: no yes.
	code, _, errOut = mandateCmd(t, bin, append([]string{"approvals", "yes", p.id}, sd...)...)
	if code != exitTaskFailed || !strings.Contains(errOut, "no terminal to confirm the yes on") {
		t.Errorf("yes without a terminal: exit %d: %s", code, errOut)
	}
	// A terminal where the person says no to the question: still pending.
	code, shown := answerInPTY(t, bin, "Approve? [y/N]", "n\n", append([]string{"approvals", "yes", p.id}, sd...)...)
	if code != exitTaskFailed || !strings.Contains(shown, "still pending") {
		t.Errorf("answering n at the prompt: exit %d:\n%s", code, shown)
	}
	if !p.pending() || len(p.pay.Charges()) != 0 {
		t.Fatalf("the run did not wait for a yes:\n%s", p.stderr)
	}

	code, shown = answerInPTY(t, bin, "Approve? [y/N]", "y\n", append([]string{"approvals", "yes", p.id}, sd...)...)
	if code != 0 || !strings.Contains(shown, "charge 612.00 USD to airline.example") || !strings.Contains(shown, "effect: sha256:") ||
		!strings.Contains(shown, "approved "+p.id) {
		t.Fatalf("mandate approvals yes in a terminal: exit %d:\n%s", code, shown)
	}
	rep := p.wait(t)
	if rep.State != "done" || rep.Result != "ESUCCESS" {
		t.Errorf("the run: %+v\n%s", rep, p.stderr)
	}
	if ch := p.pay.Charges(); len(ch) != 1 || ch[0].AmountMinor != 61200 || ch[0].Currency != "USD" {
		t.Errorf("charges: %+v", ch)
	}
	code, _, errOut = mandateCmd(t, bin, append([]string{"approvals", "no", p.id}, sd...)...)
	if code != exitTaskFailed || !strings.Contains(errOut, "approved at") || !strings.Contains(errOut, "on channel cli") {
		t.Errorf("a second answer: exit %d: %s", code, errOut)
	}
	_, out, _ = mandateCmd(t, bin, append([]string{"audit", "--run", rep.Run, "--format", "json"}, sd...)...)
	if !strings.Contains(out, "answered: yes, by channel cli (user ") {
		t.Errorf("the audit log of the approved run:\n%s", out)
	}

	// A refusal.
	q := startPayWait(t, bin, state)
	code, _, errOut = mandateCmd(t, bin, append([]string{"approvals", "no", q.id}, sd...)...)
	if code != 0 || !strings.Contains(errOut, "refused "+q.id) {
		t.Errorf("mandate approvals no: exit %d: %s", code, errOut)
	}
	rep = q.wait(t)
	if rep.Result != "EAPPROVAL" || len(q.pay.Charges()) != 0 {
		t.Errorf("the refused run: %+v, charges %+v", rep, q.pay.Charges())
	}
	_, out, _ = mandateCmd(t, bin, append([]string{"audit", "--run", rep.Run, "--format", "json"}, sd...)...)
	if !strings.Contains(out, "answered: no, by channel cli") {
		t.Errorf("the audit log of the refused run:\n%s", out)
	}
	code, out, _ = mandateCmd(t, bin, append([]string{"approvals", "--all", "--json"}, sd...)...)
	var all []struct{ ID, State, Run, Channel string }
	if err := json.Unmarshal([]byte(out), &all); code != 0 || err != nil || len(all) != 2 || all[0].State != "refused" || all[1].State != "approved" ||
		all[1].Run == "" || all[0].Channel != "cli" {
		t.Errorf("mandate approvals --all --json: exit %d, %v: %s", code, err, out)
	}
}

// TestApprovalsUsage: usage errors and answers to unknown approvals.
func TestApprovalsUsage(t *testing.T) {
	state := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"approvals", "frob"}, exitUsage, `unknown subcommand "frob"`},
		{[]string{"approvals", "yes"}, exitUsage, "missing the approval's ID"},
		{[]string{"approvals", "yes", "../x"}, exitUsage, "not an approval ID"},
		{[]string{"approvals", "no", "0123456789abcdef", "--all"}, exitUsage, "--all and --json are for list and show"},
		{[]string{"approvals", "no", "0123456789abcdef"}, exitTaskFailed, "none was asked"},
		{[]string{"approvals"}, exitOK, "no approval was asked"},
	} {
		var o, e bytes.Buffer
		env := &env{stdout: &o, stderr: &e, getenv: func(string) string { return "" }, ctx: context.Background()}
		if code := env.main(append(c.args, "--state-dir", state)); code != c.code || !strings.Contains(e.String(), c.want) {
			t.Errorf("mandate %v: exit %d, stderr %q; want %d and %q", c.args, code, e.String(), c.code, c.want)
		}
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("reading made files: %v", entries)
	}
}

// TestApprovalsBrowser: a run waits for a charge above approve_above
// (--approve wait) while mandate ui runs on the same state directory; the
// run prints the approval page's URL (without the token), the person's
// browser (holding the UI's cookie) opens it and clicks Approve: exactly
// one charge reaches the provider, of the amount the page showed. A POST
// from another origin, even with the cookie and the nonce, is refused.
func TestApprovalsBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a guest, the mandate binary and a browser")
	}
	chrome := chromium(t)
	out := outputDir(t)
	bin := buildMandate(t)
	state := t.TempDir()
	ui := startUIProc(t, bin, state)
	p := startPayWait(t, bin, state)
	m := regexp.MustCompile(`answer on the page (http://\S+)`).FindStringSubmatch(p.stderr.String())
	if m == nil || m[1] != ui.base+"/approvals/"+p.id {
		t.Fatalf("the run did not print the page's URL %s/approvals/%s:\n%s", ui.base, p.id, p.stderr)
	}
	pageURL := m[1]
	if strings.Contains(pageURL, "token") {
		t.Errorf("the URL carries the token: %s", pageURL)
	}
	// Without the cookie, nothing.
	resp, err := http.Get(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the page without the cookie: %s", resp.Status)
	}

	// Another origin, with the cookie and the right nonce: refused.
	c := ui.client(t)
	var v struct{ Nonce, State string }
	ui.getJSON(t, c, "/api/approvals/"+p.id, &v)
	if v.State != "pending" || v.Nonce == "" {
		t.Fatalf("the approval: %+v", v)
	}
	for _, origin := range []string{"http://evil.example", "null", ""} {
		req, _ := http.NewRequest("POST", pageURL+"/answer", strings.NewReader(`{"nonce":"`+v.Nonce+`","yes":true}`))
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a POST with Origin %q: %s, want 403", origin, resp.Status)
		}
	}
	if !p.pending() || len(p.pay.Charges()) != 0 {
		t.Fatal("a cross-origin POST answered the approval")
	}

	ctx := browser(t, chrome)
	step(t, ctx, "the UI's URL (the cookie)", chromedp.Navigate(ui.url), chromedp.WaitVisible(chromedp.CSS(`#approvals-link a`)))
	if n := eval[string](t, ctx, `document.querySelector('#approvals-link').textContent`); !strings.Contains(n, "1 approval waits") {
		t.Errorf("the runs list says %q", n)
	}
	step(t, ctx, "the approval's page", chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.CSS(`#approve`)))
	summary := eval[string](t, ctx, `document.querySelector('#summary').textContent`)
	details := eval[string](t, ctx, `document.querySelector('#details').textContent`)
	if summary != "charge 612.00 USD to airline.example" || !strings.Contains(details, "612.00") || !strings.Contains(details, "airline.example") {
		t.Errorf("the page shows %q, details %q", summary, details)
	}
	shot(t, ctx, out, "approval.png")
	step(t, ctx, "Approve", chromedp.Click(chromedp.CSS(`#approve`)),
		waitJS(`document.querySelector('#answer-text') && document.querySelector('#answer-text').textContent.includes('on web')`))
	if r := eval[string](t, ctx, `document.querySelector('#answer-result').textContent`); r != "Approved." {
		t.Errorf("after the click: %q", r)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#approve').length`); n != 0 {
		t.Error("the buttons stay once answered")
	}
	if a := eval[[]string](t, ctx, `window.__alerts.concat(window.__csp)`); len(a) != 0 {
		t.Errorf("alerts or CSP violations: %q", a)
	}
	shot(t, ctx, out, "approved.png")
	rep := p.wait(t)
	if rep.Result != "ESUCCESS" {
		t.Errorf("the run: %+v\n%s", rep, p.stderr)
	}
	if ch := p.pay.Charges(); len(ch) != 1 || ch[0].AmountMinor != 61200 || ch[0].Payee != "airline.example" {
		t.Errorf("charges: %+v, want one of 612.00 USD", ch)
	}
	_, log, _ := mandateCmd(t, bin, "audit", "--run", rep.Run, "--format", "json", "--state-dir", state)
	if !strings.Contains(log, "answered: yes, by channel web (web page, client 127.0.0.1:") {
		t.Errorf("the audit log:\n%s", log)
	}
	// The run's page lists the answer.
	step(t, ctx, "the run's page", chromedp.Navigate(ui.base+"/runs/"+rep.Run), chromedp.WaitVisible(chromedp.CSS(`#approvals table`)))
	if row := eval[string](t, ctx, `document.querySelector('#approvals tbody tr').textContent`); !strings.Contains(row, "approved") || !strings.Contains(row, "on web") {
		t.Errorf("the run's approvals: %q", row)
	}
}
