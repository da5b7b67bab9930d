package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/testengine"
)

// needRust skips when no rustc with the wasm32-wasi std is installed,
// except under CI=true, which installs one (.ci/run) and so fails.
func needRust(tb testing.TB) {
	tb.Helper()
	if _, _, err := guestbuild.RustToolchain(context.Background()); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("CI=true and %v", err)
		}
		tb.Skipf("skipping the Rust quickstart: %v", err)
	}
}

// TestQuickstartRust runs the walkthrough with the Rust guest
// (guest-rust, quickstart-rust.hcl): the same five attempts, the same
// lines, the same checks as TestQuickstart.
func TestQuickstartRust(t *testing.T) {
	needRust(t)
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	var out, errs bytes.Buffer
	if err := runManifest(context.Background(), &out, &errs, t.TempDir(), "quickstart-rust.hcl"); err != nil {
		t.Fatalf("quickstart: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errs)
	}
	if got := strings.Count(out.String(), "denied"); got < 4 {
		t.Errorf("output says denied %d times, want one per refused call (4)\n%s", got, &out)
	}
	if !strings.Contains(out.String(), "[revoked]") {
		t.Errorf("graph does not show the revoked capability:\n%s", &out)
	}
}

// TestQuickstartRustSameLines checks the Rust guest's result is the Go
// guest's, line for line, but for the origins' addresses (each run
// starts its own servers).
func TestQuickstartRustSameLines(t *testing.T) {
	needRust(t)
	goOut := quickstartResult(t, "quickstart.hcl")
	rustOut := quickstartResult(t, "quickstart-rust.hcl")
	t.Logf("Rust guest:\n%s", rustOut)
	if goOut != rustOut {
		t.Errorf("the guests' results differ:\nGo:\n%s\nRust:\n%s", goOut, rustOut)
	}
}

// quickstartResult is the result the guest of manifest printed, with the
// servers' addresses replaced by ORIGIN and EVIL.
func quickstartResult(t *testing.T, manifest string) string {
	t.Helper()
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	var out, errs bytes.Buffer
	if err := runManifest(context.Background(), &out, &errs, t.TempDir(), manifest); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", manifest, err, &out, &errs)
	}
	s := out.String()
	var flights, evil string
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "== flights origin (granted): "); ok {
			flights = v
		}
		if v, ok := strings.CutPrefix(line, "== evil origin (not granted): "); ok {
			evil = v
		}
	}
	// The result is what the run printed between its header and the graph.
	_, s, _ = strings.Cut(s, "later runs use the cache)\n")
	s, _, _ = strings.Cut(s, "\n== mandate graph")
	return strings.NewReplacer(flights, "ORIGIN", evil, "EVIL").Replace(s)
}
