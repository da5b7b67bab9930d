package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	// Every run in these tests, in-process or in a built binary, uses the
	// engine under test (wasmtime in a build with the tag).
	// (Unless the environment names one: a script's own "env" line.)
	if os.Getenv("MANDATE_ENGINE") == "" {
		os.Setenv("MANDATE_ENGINE", testengine.Name())
	}
	testscript.Main(m, map[string]func(){
		"mandate": func() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScript runs the scripts in testdata/script. Each script gets:
//
//	$ORIGIN        a loopback HTTP server: /search... -> 200 "results",
//	               /admin -> 200 "secret admin", /search/redirect -> 302 to
//	               $OTHER_ORIGIN/search
//	$OTHER_ORIGIN  a second server, on another origin
//	$WORK/reactor  a link to testdata/guests/cli-reactor (a reactor guest)
//	$WORK/guest    a link to testdata/guests/cli-guest (its input picks
//	               what it does)
//	$MANDATE_STATE_DIR  $WORK/state
//	$MANDATE_CACHE_DIR  the cache the tests share (testCache), keyed
//	               by what each entry was built from
//
// and the custom commands "exits N PROG ARGS..." (PROG exits with code N)
// and "checkgraph" (stdout is a graph in the JSON contract form).
func TestScript(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "other origin")
	}))
	t.Cleanup(other.Close) // scripts run in parallel, after TestScript returns
	mux := http.NewServeMux()
	mux.HandleFunc("/search", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "results") })
	mux.HandleFunc("/search/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/search", http.StatusFound)
	})
	mux.HandleFunc("/admin", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret admin") })
	origin := httptest.NewServer(mux)
	t.Cleanup(origin.Close)

	guests, err := filepath.Abs("testdata/guests")
	if err != nil {
		t.Fatal(err)
	}
	cache := testCache()
	goEnv := goEnv(t)

	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(e *testscript.Env) error {
			e.Setenv("ORIGIN", origin.URL)
			e.Setenv("OTHER_ORIGIN", other.URL)
			e.Setenv("MANDATE_STATE_DIR", filepath.Join(e.WorkDir, "state"))
			e.Setenv("MANDATE_CACHE_DIR", cache)
			e.Setenv("MANDATE_ENGINE", testengine.Name())
			for k, v := range goEnv {
				e.Setenv(k, v)
			}
			if err := os.Symlink(filepath.Join(guests, "cli-reactor"), filepath.Join(e.WorkDir, "reactor")); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(guests, "cli-guest"), filepath.Join(e.WorkDir, "guest"))
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":      cmdExits,
			"checkgraph": cmdCheckGraph,
		},
		// [wasmtime]: this build has the wasmtime engine (the tag).
		Condition: func(cond string) (bool, error) {
			if cond == "wasmtime" {
				ok := host.HasEngine("wasmtime")
				return ok, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

// testCache is the cache root the tests share with each other and with
// the mandate command itself ($MANDATE_CACHE_DIR, else the user cache
// directory + /mandate): every entry is keyed by what it was built from
// (the guest build key covers everything "go list -deps" reports), so
// sharing is safe, and "mandate cache prune" tidies what tests leave.
func testCache() string { return filepath.Dir(guestbuild.DefaultCacheDir()) }

// goEnv is the go command's environment, for guest builds in scripts
// (testscript gives them HOME=/no-home).
func goEnv(t *testing.T) map[string]string {
	t.Helper()
	vars := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT", "GOFLAGS", "GOPROXY", "GONOSUMDB", "GOPRIVATE"}
	out, err := exec.Command("go", append([]string{"env", "-json"}, vars...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	env := map[string]string{}
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatalf("go env: %v", err)
	}
	env["GOTOOLCHAIN"] = "local"
	for k, v := range env {
		if v == "" {
			delete(env, k)
		}
	}
	return env
}

// cmdExits runs a program and checks its exit code:
//
//	exits 2 mandate run bad.hcl
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exits")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad code %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		got = ee.ExitCode()
	default:
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited with code %d, want %d", args[1], got, want)
	}
}

// cmdCheckGraph checks that stdout is one JSON object in the graph
// contract: tasks with id, parent, principal, module, state; caps with id,
// kind, holder, parent, scope, revoked; and a run object. Arguments
// "tasks=N", "caps=N" and "denials=N" check the counts.
func cmdCheckGraph(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! checkgraph")
	}
	var g map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(ts.ReadFile("stdout")))
	if err := dec.Decode(&g); err != nil {
		ts.Fatalf("stdout is not a JSON object: %v", err)
	}
	if dec.More() {
		ts.Fatalf("stdout has data after the JSON object")
	}
	objects := func(key string, fields ...string) int {
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(g[key], &list); err != nil || list == nil {
			ts.Fatalf("%s is not a list of objects: %s", key, g[key])
		}
		for i, o := range list {
			for _, f := range fields {
				if _, ok := o[f]; !ok {
					keys := make([]string, 0, len(o))
					for k := range o {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					ts.Fatalf("%s[%d] has no %q field (fields: %v)", key, i, f, keys)
				}
			}
		}
		return len(list)
	}
	counts := map[string]int{
		"tasks":   objects("tasks", "id", "parent", "principal", "module", "state"),
		"caps":    objects("caps", "id", "kind", "holder", "parent", "scope", "revoked"),
		"denials": objects("denials", "time", "task", "cap", "op", "errno", "reason"),
	}
	var run map[string]json.RawMessage
	if err := json.Unmarshal(g["run"], &run); err != nil {
		ts.Fatalf("run is not an object: %v", err)
	}
	for _, f := range []string{"id", "manifest", "started", "ended", "exit"} {
		if _, ok := run[f]; !ok {
			ts.Fatalf("run has no %q field", f)
		}
	}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		n, err := strconv.Atoi(v)
		if _, known := counts[k]; !ok || err != nil || !known {
			ts.Fatalf("checkgraph: bad argument %q", a)
		}
		if counts[k] != n {
			ts.Fatalf("graph has %d %s, want %d", counts[k], k, n)
		}
	}
}
