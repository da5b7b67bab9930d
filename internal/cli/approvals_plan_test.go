//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/pay/paytest"
)

// idWatcher collects stderr and sends each new approval id it shows
// ("mandate approvals yes ID").
type idWatcher struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen map[string]bool
	ids  chan string
}

var approvalYesID = regexp.MustCompile(`mandate approvals yes ([0-9a-f]{16})`)

func (w *idWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for _, m := range approvalYesID.FindAllStringSubmatch(w.buf.String(), -1) {
		if !w.seen[m[1]] {
			w.seen[m[1]] = true
			w.ids <- m[1]
		}
	}
	return len(p), nil
}

func (w *idWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestApprovalsPlanCLI: a task's plan (testdata/guests/plan-pay: two
// charges on a card with approve_plans) waits for a person as one
// approval; "mandate approvals show" shows every item whole, and one
// "mandate approvals yes" in a terminal allows both charges, made without
// another question. A third charge, not in the plan, is asked about on
// its own; "mandate approvals no" refuses it. The audit log says which
// plan item allowed each charge.
func TestApprovalsPlanCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest and the mandate binary")
	}
	bin := buildMandate(t)
	state := t.TempDir()
	sd := []string{"--state-dir", state}
	guest, err := filepath.Abs(filepath.Join("..", "..", "testdata", "guests", "plan-pay"))
	if err != nil {
		t.Fatal(err)
	}
	pay := paytest.NewProvider()
	t.Cleanup(pay.Close)
	dir := t.TempDir()
	man := filepath.Join(dir, "bills.hcl")
	hcl := fmt.Sprintf(`task "bills" {
  module    = %q
  principal = "alice"
  cap "pay" "card" {
    provider      = var.pay
    allow_private = true
    instrument    = { env = "APPROVALS_TEST_CARD" }
    payees        = ["gym.example", "power.example"]
    currency      = "USD"
    max_amount    = "500 USD"
    approve_above = "50 USD"
    approve_plans = true
    audit         = true
  }
}
`, guest)
	in := filepath.Join(dir, "in.json")
	script := `{"plan":[{"Payee":"power.example","Amount":"84.20","Key":"bill-power"},{"Payee":"gym.example","Amount":"60.00","Key":"bill-gym"}],
 "do":[{"Payee":"gym.example","Amount":"60.00","Key":"bill-gym"},{"Payee":"power.example","Amount":"84.20","Key":"bill-power"},
       {"Payee":"gym.example","Amount":"99.00","Key":"extra"}]}`
	if err := os.WriteFile(man, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	w := &idWatcher{seen: map[string]bool{}, ids: make(chan string, 4)}
	var stdout bytes.Buffer
	cmd := exec.Command(bin, "run", man, "--var", "pay="+pay.URL, "--input", in, "--approve", "wait",
		"--state-dir", state, "--cache-dir", testCache(), "--format", "json")
	cmd.Env = append(os.Environ(), "APPROVALS_TEST_CARD=tok_test")
	cmd.Stdout, cmd.Stderr = &stdout, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})
	next := func(what string) string {
		t.Helper()
		select {
		case id := <-w.ids:
			return id
		case <-done:
			t.Fatalf("mandate run ended before asking about %s: %v\n%s", what, cmd.ProcessState, w)
		case <-time.After(3 * time.Minute):
			t.Fatalf("mandate run did not ask about %s within 3 minutes:\n%s", what, w)
		}
		return ""
	}

	planID := next("the plan")
	code, out, errOut := mandateCmd(t, bin, append([]string{"approvals", "show", planID}, sd...)...)
	for _, want := range []string{"asks to   carry out plan 1: 2 effects, each at most once", "with      plan \"plan 1\"",
		"--- item 1 (", "charge 84.20 USD to power.example, with pay \"card\"", "--- item 1 idempotency_key",
		"charge 60.00 USD to gym.example, with pay \"card\"", "--- item 2 amount", "one yes allows each item below once"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("mandate approvals show of the plan: exit %d, lacks %q:\n%s%s", code, want, out, errOut)
		}
	}
	code, shown := answerInPTY(t, bin, "Approve? [y/N]", "y\n", append([]string{"approvals", "yes", planID}, sd...)...)
	if code != 0 || !strings.Contains(shown, "item 2: charge 60.00 USD to gym.example") || !strings.Contains(shown, "approved "+planID) {
		t.Fatalf("mandate approvals yes of the plan: exit %d:\n%s", code, shown)
	}

	// Both planned charges go through; the extra one is asked about.
	extraID := next("the charge outside the plan")
	code, out, _ = mandateCmd(t, bin, append([]string{"approvals", "show", extraID}, sd...)...)
	if code != 0 || !strings.Contains(out, "charge 99.00 USD to gym.example") || !strings.Contains(out, "not an item of the task's approved plan") {
		t.Errorf("mandate approvals show of the extra charge: exit %d:\n%s", code, out)
	}
	if code, _, errOut := mandateCmd(t, bin, append([]string{"approvals", "no", extraID}, sd...)...); code != 0 {
		t.Fatalf("mandate approvals no: exit %d: %s", code, errOut)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("mandate run still waits after the answers:\n%s", w)
	}
	var rep struct{ Run, State, Result string }
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the run's report: %v: %s\n%s", err, &stdout, w)
	}
	if rep.State != "done" || !strings.Contains(rep.Result, `"do":["ESUCCESS","ESUCCESS","EAPPROVAL"]`) {
		t.Errorf("the run: %+v\n%s", rep, w)
	}
	var charged []string
	for _, c := range pay.Charges() {
		charged = append(charged, fmt.Sprintf("%s %d", c.Payee, c.AmountMinor))
	}
	if strings.Join(charged, ", ") != "gym.example 6000, power.example 8420" {
		t.Errorf("charged %v", charged)
	}
	_, out, _ = mandateCmd(t, bin, append([]string{"audit", "--run", rep.Run, "--format", "json"}, sd...)...)
	for _, want := range []string{"allowed by plan 1 item 2", "allowed by plan 1 item 1", "answered: yes, by channel cli", "answered: no, by channel cli"} {
		if !strings.Contains(out, want) {
			t.Errorf("the audit log lacks %q:\n%s", want, out)
		}
	}
}
