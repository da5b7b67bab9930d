package tools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/scaffold"
	"github.com/mandatevm/mandate/internal/testbin"
)

// TestNewEveryLangAndCap writes a tool for every language and capability
// kind with the built mandate, outside the checkout, with no network and an
// empty module cache, builds it, and runs the test the scaffold wrote
// (its fixture, then mandate run): the story each tells holds in each
// language. C and Rust need their toolchains (CI installs them).
func TestNewEveryLangAndCap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds nine tools")
	}
	bin := testbin.Mandate(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command for the tools' tests")
	}
	toolchain := map[string]error{}
	_, toolchain["c"] = guestbuild.CToolchain(context.Background())
	_, _, toolchain["rust"] = guestbuild.RustToolchain(context.Background())
	work := t.TempDir()
	env := append(os.Environ(), "MANDATE="+bin, "GOPROXY=off", "GOMODCACHE="+filepath.Join(work, "modcache"),
		"GOFLAGS=-modcacherw", "HOME="+filepath.Join(work, "home"), "MANDATE_CACHE_DIR="+testCache(), "GOWORK=")
	for _, lang := range scaffold.Langs {
		for _, kind := range scaffold.Caps {
			t.Run(lang+"-"+kind, func(t *testing.T) {
				if err := toolchain[lang]; err != nil {
					if os.Getenv("CI") == "true" {
						t.Fatalf("CI installs the %s toolchain: %v", lang, err)
					}
					t.Skipf("no %s toolchain: %v", lang, err)
				}
				name := lang + "tool" + kind
				run := func(dir string, prog string, args ...string) string {
					t.Helper()
					// Each step's own limit, under go test's: a hang
					// names the step.
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
					defer cancel()
					cmd := exec.CommandContext(ctx, prog, args...)
					cmd.Dir, cmd.Env = dir, env
					out, err := cmd.CombinedOutput()
					if ctx.Err() != nil {
						err = fmt.Errorf("not done in 10 minutes: %w", ctx.Err())
					}
					if err != nil {
						t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
					}
					return string(out)
				}
				run(work, bin, "new", name, "--lang", lang, "--cap", kind)
				dir := filepath.Join(work, name)
				if out := run(dir, bin, "build", "."); !strings.Contains(out, "sha256:") {
					t.Errorf("mandate build: %s", out)
				}
				out := run(filepath.Join(dir, "tooltest"), goBin, "test", "-count=1", "-v", ".")
				if !strings.Contains(out, "--- PASS: TestTool") {
					t.Errorf("the tool's test did not pass:\n%s", out)
				}
			})
		}
	}
}
