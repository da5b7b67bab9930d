// Package testbin builds the mandate command for tests that run it as a
// process, once per test binary, with the engine under test
// (internal/testengine).
package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/internal/testengine"
)

var (
	once sync.Once
	bin  string
	err  error
)

// Mandate builds cmd/mandate (with the engine under test) once per test
// binary and returns its path. One place per engine, rebuilt by every test
// binary (the go build cache makes that a link) and replaced by a rename:
// test runs leave one binary behind, not one each, and a binary another
// test process runs is never written over.
func Mandate(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir := filepath.Join(os.TempDir(), "mandate-test-bin", checkout(), testengine.Name())
		if err = os.MkdirAll(dir, 0o755); err != nil {
			return
		}
		var tmp *os.File
		if tmp, err = os.CreateTemp(dir, "mandate-*.tmp"); err != nil {
			return
		}
		tmp.Close()
		defer os.Remove(tmp.Name())
		args := append([]string{"build", "-o", tmp.Name()}, testengine.BuildFlags()...)
		build := exec.Command("go", append(args, "github.com/mandatevm/mandate/cmd/mandate")...)
		if out, berr := build.CombinedOutput(); berr != nil {
			err = fmt.Errorf("go build: %v\n%s", berr, out)
			return
		}
		bin = filepath.Join(dir, "mandate")
		err = os.Rename(tmp.Name(), bin)
	})
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// checkout names the source tree these tests were built from (a hash of
// its directory), so that test runs of two checkouts of the repository on
// one machine (git worktrees) never run each other's binary.
func checkout() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "unknown"
	}
	sum := sha256.Sum256([]byte(filepath.Dir(file)))
	return hex.EncodeToString(sum[:6])
}
