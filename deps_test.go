package mandate_test

import (
	"os/exec"
	"strings"
	"testing"
)

// badDeps maps a package pattern to the imports it must never have (the
// import table of docs/ARCHITECTURE.md), with why. Checked on the transitive
// non-test dependencies, so a violation cannot hide behind a helper. A key
// ending in "/" matches every package below it; one ending in "$" that
// package alone; any other that package and the packages below it.
var badDeps = map[string]map[string]string{
	"github.com/mandatevm/mandate/kernel": {
		"github.com/mandatevm/mandate/caps/":      "the kernel imports no capability kind: kinds plug in through kindapi.Kind",
		"github.com/mandatevm/mandate/sandbox/":   "the kernel imports no engine: engines plug in through sandbox.Engine",
		"github.com/tetratelabs/wazero":           "the kernel imports no engine",
		"github.com/bytecodealliance/wasmtime-go": "the kernel imports no engine",
		"github.com/mandatevm/mandate/cmd/":       "dependencies point inward",
		"github.com/mandatevm/mandate/manifest":   "policy parsing lives outside the trusted core",
		"github.com/nats-io/":                     "one kernel mediates a run on one node: the fleet dispatches runs, never calls",
		"github.com/jackc/pgx":                    "stores plug in below the kinds, not into the kernel",
	},
	"github.com/mandatevm/mandate/fleet": {
		"github.com/mandatevm/mandate/internal/cli": "the CLI runs nodes, not the reverse",
		"github.com/mandatevm/mandate/cmd/":         "dependencies point inward",
		"github.com/nats-io/nats-server":            "a node is a NATS client; the server is embedded only by natsembed",
	},
	"github.com/mandatevm/mandate/sandbox": {
		"github.com/mandatevm/mandate/kernel": "the engine interface must not depend on kernel internals",
		"github.com/tetratelabs/wazero":       "the interface package names no engine",
	},
	"github.com/mandatevm/mandate/sandbox/forward": {
		"github.com/mandatevm/mandate/kernel":     "forwarding carries host calls; the kernel that decides them is the caller's",
		"github.com/nats-io/":                     "the transport is the caller's (a fleet's NATS, a loopback)",
		"github.com/tetratelabs/wazero":           "forwarding names no engine",
		"github.com/bytecodealliance/wasmtime-go": "forwarding names no engine",
	},
	"github.com/mandatevm/mandate/sandbox/wazero": {
		"github.com/mandatevm/mandate/kernel":     "engines see only the host-call interface they are given",
		"github.com/mandatevm/mandate/caps/":      "engines know no capability kinds",
		"github.com/bytecodealliance/wasmtime-go": "one engine never pulls in the other",
	},
	"github.com/mandatevm/mandate/sandbox/wasmtime": {
		"github.com/mandatevm/mandate/kernel":         "engines see only the host-call interface they are given",
		"github.com/mandatevm/mandate/caps/":          "engines know no capability kinds",
		"github.com/tetratelabs/wazero":               "one engine never pulls in the other",
		"github.com/mandatevm/mandate/sandbox/wazero": "one engine never pulls in the other",
	},
	"github.com/mandatevm/mandate/cmd/mandate": {
		"github.com/bytecodealliance/wasmtime-go":       "the default build is pure Go: wasmtime only with the tag",
		"github.com/mandatevm/mandate/internal/fakellm": "the fake model is for tests and demos, never in the CLI",
		"github.com/goccy/go-graphviz":                  "its init compiles Graphviz at every start: internal/graphviz is the lazy copy",
		"github.com/nats-io/nats-server":                "the embedded NATS server is the build tag natsserver's: a sixth of a cold build (internal/optional)",
		"github.com/jackc/pgx":                          "PostgreSQL is the build tag postgres's: its driver is not compiled by default (internal/optional)",
	},
	"github.com/mandatevm/mandate/caps/pay": {
		"github.com/mandatevm/mandate/kernel$":  "a kind imports the kind contract (kernel/kindapi), not the kernel",
		"github.com/mandatevm/mandate/sandbox/": "a kind never sees an engine",
		"github.com/mandatevm/mandate/cmd/":     "dependencies point inward",
		"github.com/mandatevm/mandate/caps/net": "kinds are independent of each other",
	},
	"github.com/mandatevm/mandate/caps/declassify": {
		"github.com/mandatevm/mandate/kernel$":  "a kind imports the kind contract (kernel/kindapi), not the kernel",
		"github.com/mandatevm/mandate/sandbox/": "a kind never sees an engine",
		"github.com/mandatevm/mandate/caps/net": "kinds are independent of each other",
	},
	"github.com/mandatevm/mandate/constraint": {
		"github.com/mandatevm/mandate/sandbox/": "constraints are policy, not execution",
		"github.com/mandatevm/mandate/caps/":    "the compiler knows no kind; kinds declare their variables",
	},
	"github.com/mandatevm/mandate/caps/net": {
		"github.com/mandatevm/mandate/kernel$":  "a kind imports the kind contract (kernel/kindapi), not the kernel",
		"github.com/mandatevm/mandate/sandbox/": "a kind never sees an engine",
		"github.com/mandatevm/mandate/cmd/":     "dependencies point inward",
	},
	"github.com/mandatevm/mandate/caps/data": {
		"github.com/mandatevm/mandate/kernel$":  "a kind imports the kind contract (kernel/kindapi), not the kernel",
		"github.com/mandatevm/mandate/sandbox/": "a kind never sees an engine",
		"github.com/mandatevm/mandate/caps/net": "kinds are independent of each other",
	},
	"github.com/mandatevm/mandate/caps/llm": {
		"github.com/mandatevm/mandate/kernel$":          "a kind imports the kind contract (kernel/kindapi), not the kernel",
		"github.com/mandatevm/mandate/sandbox/":         "a kind never sees an engine",
		"github.com/mandatevm/mandate/cmd/":             "dependencies point inward",
		"github.com/mandatevm/mandate/caps/net":         "kinds are independent of each other",
		"github.com/mandatevm/mandate/caps/pay":         "kinds are independent of each other",
		"github.com/mandatevm/mandate/internal/fakellm": "the fake model is for tests and demos",
	},
	"github.com/mandatevm/mandate/caps/mcp": {
		"github.com/mandatevm/mandate/kernel$":           "a kind imports the kind contract (kernel/kindapi), not the kernel",
		"github.com/mandatevm/mandate/sandbox/":          "a kind never sees an engine",
		"github.com/mandatevm/mandate/cmd/":              "dependencies point inward",
		"github.com/mandatevm/mandate/host":              "a kind knows no host",
		"github.com/mandatevm/mandate/caps/net":          "kinds are independent of each other",
		"github.com/mandatevm/mandate/caps/llm":          "kinds are independent of each other",
		"github.com/mandatevm/mandate/internal/mcpserve": "the kind is a client of servers; serving is the host's",
	},
	// The labelling of answers by entry (net's responses, mcp's results):
	// below the kinds, so it knows none of them.
	"github.com/mandatevm/mandate/caps/internal/labelrule": {
		"github.com/mandatevm/mandate/kernel$":  "a kind imports the kind contract (kernel/kindapi), not the kernel",
		"github.com/mandatevm/mandate/sandbox/": "a kind never sees an engine",
		"github.com/mandatevm/mandate/caps/net": "the rules know no kind: the kinds import them",
		"github.com/mandatevm/mandate/caps/mcp": "the rules know no kind: the kinds import them",
	},
	"github.com/mandatevm/mandate/caps/spawn": {
		"github.com/mandatevm/mandate/kernel$":  "a kind imports the kind contract (kernel/kindapi), not the kernel",
		"github.com/mandatevm/mandate/caps/net": "kinds are independent of each other",
	},
	// The dialing shell of the kinds that call an HTTP service (llm, pay):
	// below them, so it knows none of them.
	"github.com/mandatevm/mandate/caps/internal/httpservice": {
		"github.com/mandatevm/mandate/kernel$":          "a kind imports the kind contract (kernel/kindapi), not the kernel",
		"github.com/mandatevm/mandate/sandbox/":         "a kind never sees an engine",
		"github.com/mandatevm/mandate/cmd/":             "dependencies point inward",
		"github.com/mandatevm/mandate/caps/net":         "the shell knows no kind: the kinds import it",
		"github.com/mandatevm/mandate/caps/pay":         "the shell knows no kind: the kinds import it",
		"github.com/mandatevm/mandate/caps/llm":         "the shell knows no kind: the kinds import it",
		"github.com/mandatevm/mandate/internal/fakellm": "the fake model is for tests and demos",
	},
	"github.com/mandatevm/mandate/kernel/kindapi": {
		"github.com/mandatevm/mandate/kernel$":    "the contract is below the kernel: the kernel imports it",
		"github.com/mandatevm/mandate/caps/":      "the contract names no kind",
		"github.com/mandatevm/mandate/sandbox/":   "a kind never sees an engine",
		"github.com/mandatevm/mandate/sandbox":    "a kind never sees an engine",
		"github.com/mandatevm/mandate/manifest":   "policy parsing lives outside the trusted core",
		"github.com/mandatevm/mandate/constraint": "constraints plug into the kernel, not into kinds",
		"github.com/mandatevm/mandate/internal/":  "the contract stands alone",
		"github.com/mandatevm/mandate/audit":      "records are the kernel's and the CLI's",
		"github.com/tetratelabs/wazero":           "no engine",
	},
	"github.com/mandatevm/mandate/internal/webui": {
		"github.com/mandatevm/mandate/sandbox/":     "the UI only reads records: it runs nothing",
		"github.com/mandatevm/mandate/caps/":        "the UI reads scopes as JSON, not kinds",
		"github.com/mandatevm/mandate/host":         "the UI never starts a run",
		"github.com/mandatevm/mandate/internal/cli": "the CLI serves the UI, not the reverse",
		"github.com/mandatevm/mandate/cmd/":         "dependencies point inward",
	},
	"github.com/mandatevm/mandate/host": {
		"github.com/mandatevm/mandate/internal/cli":      "the CLI runs on the host API, not the reverse",
		"github.com/mandatevm/mandate/cmd/":              "dependencies point inward",
		"github.com/mandatevm/mandate/internal/fakellm":  "the fake model is for tests and demos",
		"github.com/bytecodealliance/wasmtime-go":        "the default build is pure Go: wasmtime only with the tag",
		"github.com/mandatevm/mandate/internal/graphviz": "running tasks draws no pictures",
	},
	// The copy of go-graphviz (internal/graphviz/README.md): SVG only, and
	// the lazy copy rather than the module, whose init functions compile
	// Graphviz in every binary that links it.
	"github.com/mandatevm/mandate/internal/graphviz": {
		"github.com/fogleman/gg":              "SVG only: the PNG/JPG renderer and its libraries were removed",
		"github.com/golang/freetype":          "SVG only: the PNG/JPG renderer and its libraries were removed",
		"github.com/disintegration/imaging":   "SVG only: the PNG/JPG renderer and its libraries were removed",
		"github.com/flopp/go-findfont":        "SVG only: the PNG/JPG renderer and its libraries were removed",
		"golang.org/x/image":                  "SVG only: the PNG/JPG renderer and its libraries were removed",
		"github.com/goccy/go-graphviz":        "the lazy copy, never the module: its init compiles Graphviz at every start",
		"github.com/mandatevm/mandate/kernel": "a copy of upstream knows nothing of Mandate",
	},
	"github.com/mandatevm/mandate/internal/graphview": {
		"github.com/mandatevm/mandate/sandbox/":     "drawing a record runs no guest",
		"github.com/mandatevm/mandate/caps/":        "records hold scopes as the kinds described them, not kinds",
		"github.com/mandatevm/mandate/internal/cli": "the CLI and the UI use graphview, not the reverse",
		"github.com/mandatevm/mandate/host":         "a picture of a record needs no host",
		"github.com/goccy/go-graphviz":              "the lazy copy (internal/graphviz), never the module",
	},
	"github.com/mandatevm/mandate/internal/approvals": {
		"github.com/mandatevm/mandate/sandbox/":       "a mailbox for a person's answers runs nothing",
		"github.com/mandatevm/mandate/caps/":          "an approval holds the effect as the kind showed it, not the kind",
		"github.com/mandatevm/mandate/host":           "the host is given an Approver; the store starts no run",
		"github.com/mandatevm/mandate/internal/cli":   "the CLI uses the store, not the reverse",
		"github.com/mandatevm/mandate/internal/webui": "the UI uses the store, not the reverse",
	},
	"github.com/mandatevm/mandate/internal/mcpclients": {
		"github.com/mandatevm/mandate/sandbox/":       "a clients' label store runs nothing",
		"github.com/mandatevm/mandate/host":           "sessions raise the store; the store starts none",
		"github.com/mandatevm/mandate/internal/cli":   "the CLI uses the store, not the reverse",
		"github.com/mandatevm/mandate/internal/webui": "the UI uses the store, not the reverse",
	},
	"github.com/mandatevm/mandate/runstore": {
		"github.com/mandatevm/mandate/sandbox/":     "records describe runs; they never run anything",
		"github.com/mandatevm/mandate/caps/":        "records hold scopes as JSON, not kinds",
		"github.com/mandatevm/mandate/internal/cli": "the CLI uses the store, not the reverse",
		"github.com/mandatevm/mandate/cmd/":         "dependencies point inward",
	},
}

// stdOnly lists packages that may import only the standard library and
// the listed module packages.
var stdOnly = map[string][]string{
	"github.com/mandatevm/mandate/guest-sdk/abi": nil,
	"github.com/mandatevm/mandate/guest-sdk":     {"github.com/mandatevm/mandate/guest-sdk/abi"},
	"github.com/mandatevm/mandate/guest-sdk/net": {
		"github.com/mandatevm/mandate/guest-sdk", "github.com/mandatevm/mandate/guest-sdk/abi",
	},
	"github.com/mandatevm/mandate/guest-sdk/llm": {
		"github.com/mandatevm/mandate/guest-sdk", "github.com/mandatevm/mandate/guest-sdk/abi",
	},
	// The agent loop runs inside guests: what it imports is in every
	// agent's module.
	"github.com/mandatevm/mandate/guest-sdk/agent": {
		"github.com/mandatevm/mandate/guest-sdk", "github.com/mandatevm/mandate/guest-sdk/abi",
		"github.com/mandatevm/mandate/guest-sdk/llm",
	},
	"github.com/mandatevm/mandate/sandbox": {"github.com/mandatevm/mandate/guest-sdk/abi"},
	// The egress guard every dialing kind shares: small enough to audit
	// alone.
	"github.com/mandatevm/mandate/internal/egress": nil,
}

func deps(t *testing.T, env []string, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	var ds []string
	for _, l := range strings.Fields(string(out)) {
		if l != pkg {
			ds = append(ds, l)
		}
	}
	return ds
}

func TestImportTable(t *testing.T) {
	for pkg, bad := range badDeps {
		var env []string
		if strings.HasSuffix(pkg, "/sandbox/wasmtime") {
			env = []string{"GOFLAGS=-tags=wasmtime"} // all its files but doc.go are tagged
		}
		for _, d := range deps(t, env, pkg) {
			for prefix, why := range bad {
				var hit bool
				switch {
				case strings.HasSuffix(prefix, "/"):
					hit = strings.HasPrefix(d, prefix)
				case strings.HasSuffix(prefix, "$"):
					hit = d == strings.TrimSuffix(prefix, "$")
				default:
					hit = d == prefix || strings.HasPrefix(d, prefix+"/")
				}
				if hit {
					t.Errorf("%s imports %s: %s", pkg, d, why)
				}
			}
		}
	}
	wasm := []string{"GOOS=wasip1", "GOARCH=wasm"}
	for pkg, allowed := range stdOnly {
		env := []string(nil)
		if strings.Contains(pkg, "guest-sdk") {
			env = wasm // the guest SDK must build for guests
		}
		for _, d := range deps(t, env, pkg) {
			ok := false
			for _, a := range allowed {
				ok = ok || d == a
			}
			if !ok {
				t.Errorf("%s must import only the standard library (and %v), but imports %s", pkg, allowed, d)
			}
		}
	}
}

// TestGuestSDKBuildsForWasm builds the guest SDK for GOOS=wasip1.
func TestGuestSDKBuildsForWasm(t *testing.T) {
	cmd := exec.Command("go", "build", "./guest-sdk/...")
	cmd.Env = append(cmd.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=wasip1 go build ./guest-sdk/...: %v\n%s", err, out)
	}
}
