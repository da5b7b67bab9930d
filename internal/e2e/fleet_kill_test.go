package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/fleet"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/natsembed"
	"github.com/mandatevm/mandate/internal/testbin"
	"github.com/mandatevm/mandate/internal/testengine"
)

// TestFleetNodeKilled: a "mandate node" process takes a run whose task is
// in the middle of a request, and is killed (SIGKILL). The run is marked
// lost with the node's name, the fixture saw the one request and no other
// (nothing re-ran it), and a second node started afterwards runs the next
// submission normally. "mandate run --nats" prints a fleet run's result as
// a local run does, and writes the receipt the node signed. Last, a run
// that charged a payment and waits on a request is killed the same way:
// lost, and the provider saw one charge and no second while a third node
// runs on.
func TestFleetNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and runs nodes")
	}
	bin := testbin.Mandate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv, err := natsembed.Start(ctx, natsembed.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()

	var requests atomic.Int64
	hold := make(chan struct{})
	defer close(hold)
	got := make(chan struct{}, 100)
	fixture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := requests.Add(1) == 1
		got <- struct{}{}
		if first { // the run the node is killed in
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, "results")
	}))
	defer fixture.Close()

	manifestPath := fetchManifest(t, ctx)

	node := func(name string) (*exec.Cmd, *kerneltest.Buffer) {
		var logs kerneltest.Buffer
		cmd := exec.Command(bin, "node", "--nats", srv.ClientURL(), "--name", name, "--state-dir", t.TempDir(),
			"--cache-dir", testCache(), "--engine", testengine.Name(), "--heartbeat", "500ms", "--lost-after", "5s", "--log-level", "debug")
		cmd.Stderr = &logs
		cmd.Env = append(os.Environ(), "FLEET_TEST_CARD="+payCard)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, &logs
	}

	f := connectFleet(t, srv.ClientURL(), 1)
	submit := func(input string) string {
		s, modules, err := fleet.Bundle(ctx, manifestPath, map[string]string{"origin": fixture.URL}, []byte(input), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Submit(ctx, s, modules); err != nil {
			t.Fatal(err)
		}
		return s.ID
	}

	a, aLogs := node("node-a")
	id := submit("fetch")
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatalf("the node never made the request\n%s", aLogs)
	}
	// The run's id is in the fleet before its task can act (the node
	// writes it as the run begins), so a node killed at the task's first
	// request still leaves the lost run's record named.
	if cur, _, err := f.State(ctx, id); err != nil || cur.RunID == "" {
		t.Fatalf("while the task makes its request: %+v, %v\n%s", cur, err, aLogs)
	}
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.Wait()
	st, err := f.Wait(ctx, id, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != fleet.StateLost || st.Node != "node-a" || st.RunID == "" {
		t.Fatalf("after the kill: %+v\n%s", st, aLogs)
	}

	b, bLogs := node("node-b")
	id2 := submit("fetch")
	st2, err := f.Wait(ctx, id2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st2.State != fleet.StateDone || st2.Node != "node-b" || st2.Exit != 0 || !strings.Contains(string(st2.Result), "results") {
		t.Fatalf("the next run: %+v\n%s", st2, bLogs)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("the fixture saw %d requests, want 2: the lost run's one and the next run's (its /admin is refused)", n)
	}

	// mandate run --nats: the result on stdout, the node on stderr; the
	// receipt the node signed, checked with the key of its audit copy.
	receipt := filepath.Join(t.TempDir(), "run.receipt")
	cmd := exec.Command(bin, "run", "--nats", srv.ClientURL(), manifestPath, "--var", "origin="+fixture.URL,
		"--input", "-", "--cache-dir", testCache(), "--receipt", receipt)
	cmd.Stdin = strings.NewReader("fetch")
	var stderr kerneltest.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "results") || !strings.Contains(stderr.String(), "on node node-b") {
		t.Errorf("mandate run --nats: %v\nstdout: %s\nstderr: %s", err, out, &stderr)
	}
	m := regexp.MustCompile(`mandate verify \S+ --key (\S+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("mandate run --nats --receipt named no key:\n%s", &stderr)
	}
	out, err = exec.Command(bin, "verify", receipt, "--key", m[1]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fetch") {
		t.Errorf("mandate verify of the fleet's receipt: %v\n%s", err, out)
	}

	// The fleet's records: the lost run and the done ones; every node's
	// copied log verifies (node-b's holds the /admin denials).
	out, err = exec.Command(bin, "runs", "--nats", srv.ClientURL()).CombinedOutput()
	if err != nil || !regexp.MustCompile(id+`\s+lost\s+node-a\s+\S+`).Match(out) || strings.Count(string(out), "done") != 2 {
		t.Errorf("mandate runs --nats: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "audit", "verify", "--nats", srv.ClientURL()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "node-a: ok: ") || !regexp.MustCompile(`node-b: ok: [1-9]\d* entries of 2 runs`).Match(out) {
		t.Errorf("mandate audit verify --nats: %v\n%s", err, out)
	}

	// A run that charged, killed before it ended: lost, and the provider
	// saw one charge, then none more while another node runs the fleet.
	provider := paytest.NewProvider()
	defer provider.Close()
	provider.RequireInstrument(payCard)
	var gets atomic.Int64
	shopHold := make(chan struct{})
	defer close(shopHold)
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		select {
		case <-shopHold:
		case <-r.Context().Done():
		}
	}))
	defer shop.Close()
	payPath := payManifest(t, ctx)
	ps, pmods, err := fleet.Bundle(ctx, payPath, map[string]string{"pay": provider.URL, "shop": shop.URL}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Submit(ctx, ps, pmods); err != nil {
		t.Fatal(err)
	}
	for gets.Load() == 0 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if err := b.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.Wait()
	node("node-c")
	pst, err := f.Wait(ctx, ps.ID, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if pst.State != fleet.StateLost || pst.Node != "node-b" {
		t.Errorf("the paying run after the kill: %+v", pst)
	}
	id3 := submit("fetch")
	if st3, err := f.Wait(ctx, id3, 5*time.Second); err != nil || st3.State != fleet.StateDone || st3.Node != "node-c" {
		t.Errorf("the run after: %+v, %v", st3, err)
	}
	if n := len(provider.Charges()); n != 1 || provider.Requests() != 1 {
		t.Errorf("the provider saw %d requests and made %d charges, want 1 and 1: the lost run was not run again", provider.Requests(), n)
	}
}

const payCard = "tok_fleet_test_4242"

// payManifest writes a manifest running fleet's pay-fetch guest
// (a charge, then a GET) with no retry, and returns its path.
func payManifest(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	wasm, err := host.BuildGuest(ctx, "../../fleet/testdata/pay-fetch", false, testCache())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pay-fetch.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../fleet/testdata/retry.hcl")
	if err != nil {
		t.Fatal(err)
	}
	m := strings.Replace(string(src), `module    = "pay-fetch"`, `module    = "pay-fetch.wasm"`, 1)
	m = strings.Replace(m, "  retry     = 1\n", "", 1)
	if !strings.Contains(m, "pay-fetch.wasm") || strings.Contains(m, "retry") && strings.Contains(m, "retry     =") {
		t.Fatal("retry.hcl changed: payManifest's edits no longer apply")
	}
	path := filepath.Join(dir, "pay.hcl")
	if err := os.WriteFile(path, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
