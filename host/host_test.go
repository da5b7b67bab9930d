package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/runstore"
	"github.com/mandatevm/mandate/sandbox"
)

// testCache is the cache root the whole suite shares (built guests and
// compiled modules).
func testCache() string { return filepath.Dir(guestbuild.DefaultCacheDir()) }

// leafModule is the smallest command a task can run: one memory page and
// an empty _start.
func leafModule() []byte {
	body := []byte{0x00, 0x0b} // no locals; end
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x00})), // type 0: () -> ()
		wasmasm.Section(3, wasmasm.Vec([]byte{0x00})),             // func 0: type 0
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),              // memory 0: min 1 page
		wasmasm.Section(7, wasmasm.Vec(
			append(wasmasm.Name("memory"), 0x02, 0x00),
			append(wasmasm.Name("_start"), 0x00, 0x00))),
		wasmasm.Section(10, wasmasm.Vec(wasmasm.Cat(wasmasm.Uleb(uint64(len(body))), body))),
	)
}

// tree is a host and a manifest whose task (testdata/guests/spawn-tree)
// spawns fan mids of itself, each spawning n leaves.
type tree struct {
	h     *host.Host
	m     *manifest.Manifest
	input func(fan, n int) []byte
}

func newTree(tb testing.TB, state string) *tree {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	guest, err := filepath.Abs(filepath.Join("..", "testdata", "guests", "spawn-tree"))
	if err != nil {
		tb.Fatal(err)
	}
	wasm, err := host.BuildGuest(ctx, guest, false, testCache())
	if err != nil {
		tb.Fatal(err)
	}
	leaf := filepath.Join(dir, "leaf.wasm")
	if err := os.WriteFile(leaf, leafModule(), 0o644); err != nil {
		tb.Fatal(err)
	}
	src := fmt.Sprintf(`task "tree" {
  module    = %q
  principal = "alice"
  limits {
    timeout = "1h"
  }
  cap "spawn" "spawner" {
    modules      = [%q, "leaf.wasm"]
    max_depth    = 2
    max_children = 1024
  }
}
`, guest, guest)
	m, err := manifest.Parse([]byte(src), filepath.Join(dir, "tree.hcl"), dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	h, err := host.Open(ctx, host.Options{StateDir: state, CacheDir: testCache()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	self, leafDigest := sandbox.Digest(wasm), sandbox.Digest(leafModule())
	return &tree{h: h, m: m, input: func(fan, n int) []byte {
		b, _ := json.Marshal(map[string]any{"mode": "root", "self": self, "leaf": leafDigest, "fan": fan, "n": n})
		return b
	}}
}

type treeReport struct {
	Spawned   int    `json:"spawned"`
	Failed    int    `json:"failed"`
	LastError string `json:"last_error"`
}

// TestRunEventsAndForgetting: a run through the host API streams its
// events (started, spawned, ended, done), forgets its children once they
// are recorded, and its record has every task all the same.
func TestRunEventsAndForgetting(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	state := t.TempDir()
	tr := newTree(t, state)
	all, stopAll := tr.h.Subscribe(4096)
	defer stopAll()
	r, err := tr.h.Start(context.Background(), host.RunSpec{Manifest: tr.m, Input: tr.input(3, 300)})
	if err != nil {
		t.Fatal(err)
	}
	events, stop := r.Subscribe(4096)
	defer stop()
	out, err := r.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Err != nil || out.Exit != host.ExitOK {
		t.Fatalf("run: exit %d, %v", out.Exit, out.Err)
	}
	var rep treeReport
	if err := json.Unmarshal(out.Result, &rep); err != nil || rep.Spawned != 903 || rep.Failed != 0 {
		t.Fatalf("result %s: %+v, %v", out.Result, rep, err)
	}
	// 1 root, 3 mids, 900 leaves: all recorded, none kept in memory.
	if n := len(out.Record.Tasks); n != 904 {
		t.Errorf("the record has %d tasks, want 904", n)
	}
	stored, err := tr.h.Store().Get(context.Background(), r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Tasks) != 904 || len(stored.Caps) != 1+3 || stored.Run.State != string(kernel.TaskDone) {
		t.Errorf("the stored run: %d tasks, %d caps, state %s; want 904, 4 (the grant, one passed to each mid), done",
			len(stored.Tasks), len(stored.Caps), stored.Run.State)
	}
	if n := len(r.Kernel().Tasks()); n > 904-256 {
		t.Errorf("the kernel still holds %d tasks: it forgot almost none", n)
	}
	counts := map[host.EventKind]int{}
	var last host.Event
	for e := range events {
		counts[e.Kind]++
		if e.Run != r.ID() {
			t.Fatalf("an event of run %q on run %s's stream", e.Run, r.ID())
		}
		last = e
	}
	if counts[host.EventSpawned] != 903 || counts[host.EventEnded] != 904 || counts[host.EventDone] != 1 || last.Kind != host.EventDone {
		t.Errorf("events %v, last %v; want 903 spawned, 904 ended, one done last", counts, last.Kind)
	}
	if n := len(all); n == 0 {
		t.Error("the host's subscription saw nothing")
	}
	if e := <-all; e.Kind != host.EventStarted {
		t.Errorf("the host's first event is %v, want started", e.Kind)
	}
}

// TestRefusedIsRecorded: a run refused before its task ran is recorded as
// refused, with why, and Start says so.
func TestRefusedIsRecorded(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	leaf := filepath.Join(dir, "leaf.wasm")
	if err := os.WriteFile(leaf, leafModule(), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse([]byte(`task "t" {
  module    = "leaf.wasm"
  principal = "alice"
  cap "net" "web" {
    origin = "https://a.example"
  }
}
`), filepath.Join(dir, "t.hcl"), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(context.Background(), host.Options{StateDir: state, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// A module the engine cannot compile: refused after the run began.
	if err := os.WriteFile(leaf, []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = h.Start(context.Background(), host.RunSpec{Manifest: m})
	var re *host.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("start: %v, want a RefusedError", err)
	}
	got, err := h.Store().Get(context.Background(), re.Record.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Run.State != runstore.StateRefused || !strings.Contains(got.Run.Error, "leaf.wasm") || got.Run.Exit != host.ExitUsage {
		t.Errorf("recorded: %+v", got.Run)
	}
}

// BenchmarkSoak runs 100,000 short tasks in one run of one process (a
// root, 100 mids, 1,000 leaves each), and reports the heap and RSS after
// the first 10,000 and at the end: a kernel that forgets what it recorded
// stays the same size.
//
//	go test ./host/ -run '^$' -bench Soak -benchtime 1x
func BenchmarkSoak(b *testing.B) {
	for range b.N {
		soak(b, 100, 1000)
	}
}

func soak(b *testing.B, fan, n int) {
	tr := newTree(b, b.TempDir())
	events, stop := tr.h.Subscribe(1 << 16)
	defer stop()
	start := time.Now()
	r, err := tr.h.Start(context.Background(), host.RunSpec{Manifest: tr.m, Input: tr.input(fan, n)})
	if err != nil {
		b.Fatal(err)
	}
	type sample struct {
		tasks      int
		heap, rss  uint64
		kernelSize int
		at         time.Duration
	}
	var samples []sample
	ended, mids := 0, 0
	measure := func() {
		debug.FreeOSMemory() // a collection, and the freed memory returned: RSS is what is in use
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		samples = append(samples, sample{ended, ms.HeapAlloc, rss(), len(r.Kernel().Tasks()), time.Since(start)})
	}
	// Measured as a mid ends, when the same guests are alive each time
	// (the root, and the next mid starting): first after 10,000 tasks,
	// then as the last but one ends (99,100 with the defaults). The live
	// guests' own memory (a Go guest's linear memory is megabytes) is in
	// both.
	for e := range events {
		switch {
		case e.Kind == host.EventEnded && e.Parent == r.Task().ID():
			ended++
			mids++
			if len(samples) == 0 && ended >= 10_000 || mids == fan-1 {
				measure()
			}
		case e.Kind == host.EventEnded:
			ended++
		}
		ended += e.Dropped
		if e.Kind == host.EventDone && e.Run == r.ID() {
			break
		}
	}
	out, err := r.Wait(context.Background())
	if err != nil || out.Err != nil {
		b.Fatalf("run: %v %v", err, out.Err)
	}
	var rep treeReport
	_ = json.Unmarshal(out.Result, &rep)
	elapsed := time.Since(start)
	b.ReportMetric(float64(rep.Spawned)/elapsed.Seconds(), "tasks/s")
	for _, s := range samples {
		b.Logf("after %d tasks (%v): heap %.1f MiB, RSS %.1f MiB, kernel holds %d tasks",
			s.tasks, s.at.Round(time.Millisecond), float64(s.heap)/(1<<20), float64(s.rss)/(1<<20), s.kernelSize)
	}
	if len(samples) == 2 {
		b.ReportMetric(float64(samples[1].heap)/float64(samples[0].heap), "heap-end/heap-10k")
		b.ReportMetric(float64(samples[1].rss)/float64(samples[0].rss), "rss-end/rss-10k")
	}
	b.Logf("spawned %d, failed %d (%s), recorded %d tasks", rep.Spawned, rep.Failed, rep.LastError, len(out.Record.Tasks))
}

// rss is the process's resident set in bytes (Linux), 0 elsewhere.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res uint64
	if _, err := fmt.Sscan(string(b), &size, &res); err != nil {
		return 0
	}
	return res * uint64(os.Getpagesize())
}
