package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mandatevm/mandate/fleet"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/natsembed"
	"github.com/mandatevm/mandate/internal/natstest"
	"github.com/mandatevm/mandate/internal/testbin"
	"github.com/mandatevm/mandate/internal/testengine"
)

// TestFleetNodePartitioned: a node cut off from NATS while its task waits
// on a request fails closed: once no heartbeat got through for lost-after
// it kills its runs (the request is abandoned and the task makes no further
// call) and exits; the fleet marks the run lost.
func TestFleetNodePartitioned(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and runs a node")
	}
	bin := testbin.Mandate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv, err := natsembed.Start(ctx, natsembed.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	target := strings.TrimPrefix(srv.ClientURL(), "nats://")

	var requests atomic.Int64
	got := make(chan struct{}, 10)
	abandoned := make(chan struct{}, 10)
	fixture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		got <- struct{}{}
		select {
		case <-r.Context().Done():
			abandoned <- struct{}{}
		case <-time.After(3 * time.Minute):
		}
		fmt.Fprint(w, "results")
	}))
	defer fixture.Close()

	manifestPath := fetchManifest(t, ctx)

	p := natstest.StartRelay(t, target)
	var logs kerneltest.Buffer
	node := exec.Command(bin, "node", "--nats", p.URL(), "--name", "node-a", "--state-dir", t.TempDir(),
		"--cache-dir", testCache(), "--engine", testengine.Name(), "--heartbeat", "300ms", "--lost-after", "3s",
		"--log-level", "info")
	node.Stderr = &logs
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- node.Wait() }()
	t.Cleanup(func() { node.Process.Kill() })

	f := connectFleet(t, srv.ClientURL(), 1)
	s, modules, err := fleet.Bundle(ctx, manifestPath, map[string]string{"origin": fixture.URL}, []byte("fetch"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Submit(ctx, s, modules); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatalf("the node never made the request\n%s", &logs)
	}
	cut := time.Now()
	p.Cut()

	select {
	case <-abandoned:
		t.Logf("the partitioned node abandoned the request %s after the cut", time.Since(cut).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatalf("the request was never abandoned\n%s", &logs)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("the node exited with %v, want 1", err)
		}
		t.Logf("the node exited %s after the cut", time.Since(cut).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatalf("the node did not stop\n%s", &logs)
	}
	if !strings.Contains(logs.String(), "killing this node's runs") {
		t.Errorf("the node's log does not say it fenced itself:\n%s", &logs)
	}
	st, err := f.Wait(ctx, s.ID, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != fleet.StateLost || st.Node != "node-a" {
		t.Errorf("%+v", st)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("the fixture saw %d requests, want the one (the task made no call after it was killed)", n)
	}
}
