// Package nodetest is what tests that run Node.js programs share: finding
// node and npm (a skip without them, a failure on CI), npm's environment
// (its cache never the user's ~/.npm), and a project's packages installed
// once per lockfile (npm ci into a folder of os.TempDir() keyed by the
// lockfile's digest).
//
// internal/cli's tests of "mandate mcp serve" keep their own copy of
// these helpers (needNode, npmEnv, nodeProject) for now.
package nodetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Need returns the paths of node and npm. Without them (or under
// -short) the test is skipped, except on CI (CI=true), where .ci/run
// installs them: there a missing one fails the test.
func Need(t testing.TB) (node, npm string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs Node.js programs")
	}
	var missing []string
	for _, name := range []string{"node", "npm"} {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
			continue
		}
		switch name {
		case "node":
			node = p
		case "npm":
			npm = p
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("%s not on PATH: the test runs Node.js programs", strings.Join(missing, ", "))
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (on CI, .ci/run installs Node.js)", msg)
		}
		t.Skip(msg)
	}
	return node, npm
}

// Env is the environment of npm and npx: this process's, with the npm
// cache at $npm_config_cache when set (.ci/run sets it), else a folder of
// os.TempDir(), never the user's ~/.npm; no update notifier, funding or
// audit messages.
func Env() []string {
	env := os.Environ()
	if os.Getenv("npm_config_cache") == "" {
		env = append(env, "npm_config_cache="+filepath.Join(Root(), "cache"))
	}
	return append(env, "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
}

// Root is the folder under os.TempDir() that holds the npm cache (unless
// $npm_config_cache says otherwise) and the installed projects.
func Root() string { return filepath.Join(os.TempDir(), "mandate-test-npm") }

type install struct {
	once sync.Once
	dir  string
	err  error
}

var installs sync.Map // lockfile digest -> *install

// Install installs the packages that lockDir's package-lock.json pins
// (npm ci, with lockDir's package.json) into a folder of os.TempDir()
// named by the lockfile's digest, once per digest (in this process, and
// across processes: a folder already there is used as it is), and returns
// that folder: the parent of its node_modules. A failed install fails the
// test.
func Install(t testing.TB, lockDir string) string {
	t.Helper()
	_, npm := Need(t)
	lock, err := os.ReadFile(filepath.Join(lockDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(filepath.Join(lockDir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	h.Write(lock)
	h.Write([]byte{0})
	h.Write(pkg)
	key := hex.EncodeToString(h.Sum(nil)[:8])
	v, _ := installs.LoadOrStore(key, &install{})
	in := v.(*install)
	in.once.Do(func() { in.dir, in.err = installOnce(t, npm, key, pkg, lock) })
	if in.err != nil {
		t.Fatal(in.err)
	}
	return in.dir
}

// done marks a folder whose npm ci finished.
const done = ".mandate-installed"

func installOnce(t testing.TB, npm, key string, pkg, lock []byte) (string, error) {
	root := Root()
	dir := filepath.Join(root, "modules-"+key)
	if _, err := os.Stat(filepath.Join(dir, done)); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, "install-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "package.json"), pkg, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "package-lock.json"), lock, 0o644); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel", "error")
	cmd.Dir, cmd.Env = tmp, Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci in %s: %v\n%s", tmp, err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, done), nil, 0o644); err != nil {
		return "", err
	}
	t.Logf("npm ci: %v", time.Since(start).Round(time.Millisecond))
	// Another test process may have won the race: its folder is as good.
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, done)); serr != nil {
			return "", err
		}
	}
	return dir, nil
}
