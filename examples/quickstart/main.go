// Command quickstart shows Mandate end to end on one machine, with nothing
// to install or start:
//
//	go run ./examples/quickstart
//
// It starts two HTTP servers on loopback, a flights site (the origin the
// task is granted) and an "evil" collector (never granted), builds the Go
// guest in ./guest to WebAssembly, and runs it with `mandate run` under
// quickstart.hcl. The guest makes one allowed fetch and four attempts the
// kernel refuses: another origin, a path outside its prefix, a widening
// narrowing, and a capability used after it was revoked. Then `mandate
// graph` prints the capability graph of the run.
//
// It exits non-zero if anything did not happen as described, so its test
// (and CI) checks the walkthrough stays true.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/mandatevm/mandate/internal/cli"
	"github.com/mandatevm/mandate/internal/exampledir"
)

// token is the flights site's API key. The kernel reads it from the host
// environment and attaches it to requests; it never enters the guest.
const token = "quickstart-demo-token-9f8e7d"

func main() {
	stateDir := flag.String("state-dir", "", "where to record the run (default: mandate's state dir)")
	flag.Parse()
	if err := quickstart(context.Background(), os.Stdout, os.Stderr, *stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func quickstart(ctx context.Context, stdout, stderr io.Writer, stateDir string) error {
	return runManifest(ctx, stdout, stderr, stateDir, "quickstart.hcl")
}

// runManifest is the walkthrough with manifest (quickstart.hcl, or
// quickstart-rust.hcl for the Rust guest).
func runManifest(ctx context.Context, stdout, stderr io.Writer, stateDir, manifest string) error {
	dir, err := exampledir.Find("quickstart.hcl", "examples/quickstart")
	if err != nil {
		return err
	}

	flights := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "missing API key", http.StatusUnauthorized)
			return
		}
		switch {
		case strings.HasPrefix(r.URL.Path, "/search"):
			fmt.Fprintf(w, "3 flights %s -> %s (API key accepted)\n", r.URL.Query().Get("from"), r.URL.Query().Get("to"))
		default:
			fmt.Fprintln(w, "admin console")
		}
	}))
	defer flights.Close()
	var stolen atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
	}))
	defer evil.Close()

	fmt.Fprintf(stdout, "== flights origin (granted): %s\n== evil origin (not granted): %s\n\n", flights.URL, evil.URL)
	os.Setenv("QUICKSTART_FLIGHTS_TOKEN", token)

	common := []string{}
	if stateDir != "" {
		common = append(common, "--state-dir", stateDir)
	}
	fmt.Fprintf(stdout, "== mandate run %s --var origin=%s --input - --log-level warn\n", filepath.Join(dir, manifest), flights.URL)
	fmt.Fprintln(stdout, "   (first run builds the guest to WebAssembly and compiles it; later runs use the cache)")
	var result bytes.Buffer
	args := append([]string{"run", filepath.Join(dir, manifest),
		"--var", "origin=" + flights.URL, "--input", "-", "--log-level", "warn"}, common...)
	code := cli.Main(args, strings.NewReader(evil.URL), io.MultiWriter(stdout, &result), stderr)
	if code != 0 {
		return fmt.Errorf("mandate run exited %d", code)
	}

	fmt.Fprintf(stdout, "\n== mandate graph\n")
	if code := cli.Main(append([]string{"graph"}, common...), nil, stdout, stderr); code != 0 {
		return fmt.Errorf("mandate graph exited %d", code)
	}

	// Check the story the output tells.
	out := result.String()
	for _, want := range []string{
		"allowed  GET /search -> 200",
		"denied   GET " + evil.URL,
		"denied   GET /search/../admin",
		"denied   derive methods [GET POST]",
		"allowed  derive paths [/search/oneway]",
		"allowed  GET /search/oneway with the narrowed capability",
		"denied   GET /search/oneway after revocation: EREVOKED",
	} {
		if !strings.Contains(out, want) {
			return fmt.Errorf("the run's result lacks %q", want)
		}
	}
	if strings.Contains(out, token) {
		return fmt.Errorf("the API key reached the guest")
	}
	if n := stolen.Load(); n != 0 {
		return fmt.Errorf("the evil origin received %d requests", n)
	}
	fmt.Fprintf(stdout, "\n== the evil origin received %d requests; the guest never saw the API key\n", stolen.Load())
	fmt.Fprintln(stdout, "== next: `go run ./cmd/mandate graph --format dot`, or read examples/quickstart/README.md")
	return nil
}
