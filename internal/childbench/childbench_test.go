package childbench

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/testbin"
	"github.com/mandatevm/mandate/internal/testengine"
)

// setup is one guest build's run directory: its module, its manifest and
// the inputs.
type setup struct {
	bin, dir, cache, state string
}

func guestDir(tb testing.TB) string {
	d, err := filepath.Abs(filepath.Join("..", "..", "testdata", "guests", "spawn-bench"))
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// prepare writes the module (built by how: "mandate" or "plain"), its
// manifest, whose spawn capability allows the module itself, and the
// inputs, into a directory of its own.
func prepare(tb testing.TB, bin, how, cache string) *setup {
	tb.Helper()
	dir := tb.TempDir()
	wasm := filepath.Join(dir, "guest.wasm")
	var cmd *exec.Cmd
	switch how {
	case "mandate":
		cmd = exec.Command(bin, "build", guestDir(tb), "-o", wasm, "--cache-dir", cache)
	case "plain":
		cmd = exec.Command("go", "build", "-trimpath", "-o", wasm, ".")
		cmd.Dir = guestDir(tb)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("%s build: %v\n%s", how, err, out)
	}
	manifest := `task "childbench" {
  module    = "guest.wasm"
  principal = "bench"
  limits {
    timeout = "10m"
  }
  cap "spawn" "spawner" {
    modules      = ["guest.wasm"]
    max_children = 1024
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "childbench.hcl"), []byte(manifest), 0o644); err != nil {
		tb.Fatal(err)
	}
	return &setup{bin: bin, dir: dir, cache: cache, state: filepath.Join(dir, "state")}
}

// run runs the manifest with n children and returns the process's CPU
// time.
func (s *setup) run(tb testing.TB, n int) time.Duration {
	tb.Helper()
	in := filepath.Join(s.dir, "n"+strconv.Itoa(n))
	if err := os.WriteFile(in, []byte(strconv.Itoa(n)), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(s.bin, "run", filepath.Join(s.dir, "childbench.hcl"), "--input", in,
		"--engine", testengine.Name(), "--cache-dir", s.cache, "--state-dir", s.state, "--log-level", "off")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		tb.Fatalf("mandate run (%d children): %v\n%s", n, err, errb.Bytes())
	}
	if got := out.String(); got != strconv.Itoa(n) {
		tb.Fatalf("mandate run (%d children): result %q", n, got)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// BenchmarkChild reports us/child, the CPU of one child (see the package
// documentation), for the guest built by "mandate build" and by a plain
// go build, and the CPU of a whole run with none (ms/run0).
func BenchmarkChild(b *testing.B) {
	bin := testbin.Mandate(b)
	cache := b.TempDir()
	for _, how := range []string{"mandate", "plain"} {
		b.Run(how, func(b *testing.B) {
			s := prepare(b, bin, how, cache)
			// Warm: the module compiled and cached (and its snapshot
			// taken, when it gets one) before anything is measured.
			s.run(b, 1)
			s.run(b, 1)
			var zero, full time.Duration
			b.ResetTimer()
			for range b.N {
				zero += s.run(b, 0)
				full += s.run(b, Children)
			}
			b.StopTimer()
			per := float64(full-zero) / float64(b.N) / Children
			b.ReportMetric(per/float64(time.Microsecond), "us/child")
			b.ReportMetric(float64(zero)/float64(b.N)/float64(time.Millisecond), "ms/run0")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkRunFolder reports the CPU of a whole warm "mandate run" of a
// manifest naming a Go guest's folder (ms/folder: the guest's build key,
// then the cached module) and of one naming the same module's .wasm file
// (ms/wasm), the two interleaved, and their difference (ms/more).
func BenchmarkRunFolder(b *testing.B) {
	bin := testbin.Mandate(b)
	cache, dir := b.TempDir(), b.TempDir()
	guest := filepath.Join("..", "..", "testdata", "guests", "main-entry")
	guest, err := filepath.Abs(guest)
	if err != nil {
		b.Fatal(err)
	}
	wasm := filepath.Join(dir, "guest.wasm")
	if out, err := exec.Command(bin, "build", guest, "-o", wasm, "--cache-dir", cache).CombinedOutput(); err != nil {
		b.Fatalf("mandate build: %v\n%s", err, out)
	}
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, []byte("ok"), 0o644); err != nil {
		b.Fatal(err)
	}
	manifest := func(name, module string) string {
		p := filepath.Join(dir, name+".hcl")
		src := "task \"fold\" {\n  module    = " + strconv.Quote(module) + "\n  principal = \"bench\"\n}\n"
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
		return p
	}
	folder, file := manifest("folder", guest), manifest("wasm", "guest.wasm")
	run := func(m string) time.Duration {
		cmd := exec.Command(bin, "run", m, "--input", in, "--engine", testengine.Name(),
			"--cache-dir", cache, "--state-dir", filepath.Join(dir, "state"), "--log-level", "off")
		out, err := cmd.Output()
		if err != nil || string(out) != "ok init ran" {
			b.Fatalf("mandate run %s: %v, %q", m, err, out)
		}
		// The process's rusage includes the go commands it waited for.
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	run(folder)
	run(file)
	var f, w time.Duration
	b.ResetTimer()
	for range b.N {
		f += run(folder)
		w += run(file)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Millisecond) }
	b.ReportMetric(ms(f), "ms/folder")
	b.ReportMetric(ms(w), "ms/wasm")
	b.ReportMetric(ms(f-w), "ms/more")
	b.ReportMetric(0, "ns/op")
}
