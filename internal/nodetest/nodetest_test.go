package nodetest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/nodetest"
)

// TestEnvCache: npm's cache is never the user's ~/.npm.
func TestEnvCache(t *testing.T) {
	t.Setenv("npm_config_cache", "")
	var cache string
	for _, kv := range nodetest.Env() {
		if v, ok := strings.CutPrefix(kv, "npm_config_cache="); ok && v != "" {
			cache = v
		}
	}
	if !strings.HasPrefix(cache, os.TempDir()) {
		t.Fatalf("npm cache %q, want a folder of %s", cache, os.TempDir())
	}
}

// TestInstall installs a project with no dependencies twice: the second
// time is the first one's folder, and node runs a script beside it.
func TestInstall(t *testing.T) {
	node, _ := nodetest.Need(t)
	src := t.TempDir()
	pkg := `{"name":"nodetest-empty","version":"1.0.0","private":true}`
	lock := `{"name":"nodetest-empty","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"nodetest-empty","version":"1.0.0"}}}`
	if err := os.WriteFile(filepath.Join(src, "package.json"), []byte(pkg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "package-lock.json"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := nodetest.Install(t, src)
	if again := nodetest.Install(t, src); again != dir {
		t.Fatalf("second install in %s, first in %s", again, dir)
	}
	if !strings.HasPrefix(dir, os.TempDir()) {
		t.Fatalf("installed in %s, not under %s", dir, os.TempDir())
	}
	out, err := exec.Command(node, "-e", "process.stdout.write(require(process.argv[1]+'/package.json').name)", dir).CombinedOutput()
	if err != nil || string(out) != "nodetest-empty" {
		t.Fatalf("node: %v %q", err, out)
	}
}
