package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// The MCP conformance suite (@modelcontextprotocol/conformance), run
// against "mandate mcp serve --http" serving the suite's reference test
// tools (testdata/guests/mcp-conformance), each call a task like any
// other. internal/mcpserve/CONFORMANCE.md is the table of what passes and
// why the rest fails; the test checks the suite's verdicts against it, so
// a scenario that regresses fails the test, and so does one that starts
// passing while the table says it fails (update the table).

// conformanceSuite is the suite, pinned, run by npx (it needs Node 22;
// npx brings it).
var conformanceSuite = []string{"-y", "-p", "node@22", "-p", "@modelcontextprotocol/conformance@0.1.16", "--", "conformance"}

// conformanceTools are the reference test server's tools the guest
// implements: tool name, the guest's entry, and the description.
var conformanceTools = []struct{ name, entry, desc, schema string }{
	{"test_simple_text", "simple_text", "Returns simple text content.", ""},
	{"test_error_handling", "error_handling", "Always fails: a tool error.", ""},
	{"test_tool_with_progress", "progress", "Runs 3.3 s; the server sends progress every second.", ""},
	{"test_tool_with_logging", "logging", "Writes three lines to its stderr, 50 ms apart.", ""},
	{"test_image_content", "image_content", "Returns the reference server's image content, as JSON.", ""},
	{"test_audio_content", "audio_content", "Returns the reference server's audio content, as JSON.", ""},
	{"test_embedded_resource", "embedded_resource", "Returns the reference server's embedded resource, as JSON.", ""},
	{"test_multiple_content_types", "multiple_content_types", "Returns the reference server's mixed content, as JSON.", ""},
	{"json_schema_2020_12_tool", "json_schema", "Tool with JSON Schema 2020-12 features", `{
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
      "address": {
        "type": "object",
        "properties": { "street": { "type": "string" }, "city": { "type": "string" } }
      }
    },
    "properties": {
      "name": { "type": "string" },
      "address": { "$ref": "#/$defs/address" }
    },
    "additionalProperties": false
  }`},
}

// conformancePolicy writes the policy serving the conformance tools.
func conformancePolicy(t *testing.T) (dir, policy string) {
	t.Helper()
	dir = t.TempDir()
	guest, err := filepath.Abs(filepath.Join("..", "..", "testdata", "guests", "mcp-conformance"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("session {\n  principal = \"conformance\"\n}\n")
	for _, tool := range conformanceTools {
		b.WriteString("tool \"" + tool.name + "\" {\n")
		b.WriteString("  module      = \"" + filepath.ToSlash(guest) + "\"\n")
		b.WriteString("  entry       = \"" + tool.entry + "\"\n")
		b.WriteString("  description = \"" + tool.desc + "\"\n")
		if tool.schema != "" {
			b.WriteString("  input_schema = <<JSON\n  " + tool.schema + "\nJSON\n")
		}
		b.WriteString("}\n")
	}
	policy = filepath.Join(dir, "conformance.hcl")
	if err := os.WriteFile(policy, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, policy
}

// conformanceTable reads CONFORMANCE.md's table: scenario -> "pass" or
// "fail".
func conformanceTable(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "mcpserve", "CONFORMANCE.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z0-9-]+)` \\| (pass|fail) \\|")
	table := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			table[m[1]] = m[2]
		}
	}
	if len(table) == 0 {
		t.Fatal("CONFORMANCE.md: no table rows")
	}
	return table
}

// conformanceCheck is one check of a scenario's checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, INFO
	ErrorMessage string `json:"errorMessage"`
}

// TestMCPConformance runs every server scenario of the suite (one run:
// the suite's first run downloads it and Node 22, ~20 s) against
// "mandate mcp serve --http" and checks each verdict against
// CONFORMANCE.md.
func TestMCPConformance(t *testing.T) {
	needNode(t)
	table := conformanceTable(t)
	dir, policy := conformancePolicy(t)
	srv := startMCPHTTP(t, policy, "--state-dir", filepath.Join(dir, "state"), "--log-level", "info")
	results := filepath.Join(dir, "results")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npx", append(conformanceSuite, "server", "--url", srv.url, "--suite", "all", "-o", results)...)
	cmd.Dir, cmd.Env = dir, npmEnv()
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run() // exits 1 while any scenario fails: the verdicts are in results
	t.Logf("conformance server --suite all: %v (%v)", time.Since(start).Round(time.Millisecond), err)
	log := srv.stop(t)

	ents, rerr := os.ReadDir(results)
	if rerr != nil || len(ents) == 0 {
		t.Fatalf("the suite left no results (%v, %v):\n%s", err, rerr, &out)
	}
	// Result folders are server-SCENARIO-TIMESTAMP.
	stamp := regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T[0-9-]+Z$`)
	got := map[string]string{}
	why := map[string]string{}
	for _, e := range ents {
		name := stamp.ReplaceAllString(strings.TrimPrefix(e.Name(), "server-"), "")
		b, err := os.ReadFile(filepath.Join(results, e.Name(), "checks.json"))
		if err != nil {
			t.Errorf("scenario %s: %v", name, err)
			continue
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Errorf("scenario %s: checks.json: %v", name, err)
			continue
		}
		// As the suite counts: a scenario passes when no check failed.
		got[name] = "pass"
		for _, c := range checks {
			switch c.Status {
			case "FAILURE":
				got[name] = "fail"
				why[name] += c.ID + ": " + c.ErrorMessage + "; "
			case "WARNING":
				t.Logf("scenario %s: warning: %s: %s", name, c.ID, c.ErrorMessage)
			}
		}
	}
	var names []string
	for name := range got {
		names = append(names, name)
	}
	for name := range table {
		if _, ok := got[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	passed := 0
	for _, name := range names {
		g, w := got[name], table[name]
		if g == "pass" {
			passed++
		}
		switch {
		case g == "":
			t.Errorf("scenario %s: in CONFORMANCE.md, but the suite did not run it", name)
		case w == "":
			t.Errorf("scenario %s: %s, and not in CONFORMANCE.md: add it %s", name, g, why[name])
		case w == "pass" && g == "fail":
			t.Errorf("scenario %s regressed: it passed, now %s", name, why[name])
		case w == "fail" && g == "pass":
			t.Errorf("scenario %s passes now: CONFORMANCE.md says it fails; update the table", name)
		}
	}
	t.Logf("%d of %d scenarios pass", passed, len(got))
	if t.Failed() {
		t.Logf("the suite's output:\n%s", &out)
		t.Logf("the server's log:\n%s", log)
	}
}
