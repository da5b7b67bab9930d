package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/nodetest"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// This file runs the mcp kind against the reference MCP servers written
// by others (@modelcontextprotocol/server-filesystem and
// server-everything, pinned by testdata/npm/package-lock.json), over
// stdio, through a real kernel. They are installed once per lockfile
// (nodetest.Install: npm ci, never npx from the network at test time) and
// run as node node_modules/<package>/dist/index.js, their bin. Without
// Node the tests are skipped, except on CI.

// refServer returns the command that runs a reference server's bin with
// args.
func refServer(t *testing.T, pkg string, args ...string) []string {
	t.Helper()
	node, _ := nodetest.Need(t)
	src, err := filepath.Abs(filepath.Join("testdata", "npm"))
	if err != nil {
		t.Fatal(err)
	}
	dir := nodetest.Install(t, src)
	bin := filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(bin); err != nil {
		t.Fatal(err)
	}
	return append([]string{node, bin}, args...)
}

// TestFilesystemServer grants server-filesystem on a folder, reads and
// writes only under DIR/public/ (the grant's when), and labels what it
// reads as the grant's results say: an allowed read comes back labelled
// (files:alice, taint fs:public) and raises the task's label, after which
// a grant of the same server cleared for public data only is EFLOW; a
// tool not granted (move_file, edit_file), a path outside public/ and a
// path that climbs out of it with ".." are refused (EDENIED), with the
// files untouched.
func TestFilesystemServer(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pub, priv := filepath.Join(root, "public"), filepath.Join(root, "private")
	for _, d := range []string{pub, priv} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hello, secret := filepath.Join(pub, "hello.txt"), filepath.Join(priv, "secret.txt")
	if err := os.WriteFile(hello, []byte("hello from public"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("the private secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := map[string]any{"command": refServer(t, "server-filesystem", root)}
	tools := []string{"read_text_file", "write_file", "list_directory"}
	all := definitions(t, spec(base, map[string]any{"tools": []string{"*"}}))
	fields := map[string]any{
		"tools": tools,
		"pins":  pinsOf(t, all, tools...),
		"results": map[string]any{
			"read_text_file": map[string]any{"labels": []string{"files:alice"}, "taint": "fs:public"},
		},
	}
	prefix := pub + string(filepath.Separator)
	when := []string{"args.path.startsWith('" + prefix + "') && !args.path.contains('..')"}
	e := newKenv(t,
		// Cleared for what it reads: the task may write back after reading.
		grant{name: "fs", spec: spec(base, with(fields, map[string]any{"clearance": []string{"files:alice"}})), when: when},
		// The same server, cleared for public data only.
		grant{name: "fs-public", spec: spec(base, fields), when: when},
	)

	// Before reading anything, the public grant writes.
	e.mustCall("fs-public", "write_file", map[string]any{"path": filepath.Join(pub, "early.txt"), "content": "early"})

	// An allowed read, labelled as results says; reading it raises the
	// task's label.
	b, label := e.mustCall("fs", "read_text_file", map[string]any{"path": hello})
	r := decodeResult(t, b)
	if !strings.Contains(r.text(), "hello from public") {
		t.Fatalf("read: %.300q", b)
	}
	if !slices.Contains(label.Conf(), "files:alice") || !slices.Contains(label.Integ(), "fs:public") {
		t.Errorf("the read's label is %v, want files:alice and the taint fs:public", label)
	}
	if tl := e.task.Label(); !slices.Contains(tl.Conf(), "files:alice") {
		t.Errorf("the task's label after reading is %v, want files:alice", tl)
	}
	// Now the public grant is a sink the task's data may not reach.
	e.refused("fs-public", "write_file", map[string]any{"path": filepath.Join(pub, "leak.txt"), "content": "hello from public"}, abi.EFLOW)
	if _, err := os.Stat(filepath.Join(pub, "leak.txt")); err == nil {
		t.Fatal("the refused write happened")
	}

	// An allowed write.
	made := filepath.Join(pub, "made.txt")
	e.mustCall("fs", "write_file", map[string]any{"path": made, "content": "written"})
	if got, err := os.ReadFile(made); err != nil || string(got) != "written" {
		t.Fatalf("write_file: %q %v", got, err)
	}

	untouched := func() {
		t.Helper()
		if got, err := os.ReadFile(secret); err != nil || string(got) != "the private secret" {
			t.Fatalf("the private file was touched: %q %v", got, err)
		}
		if ents, _ := os.ReadDir(priv); len(ents) != 1 {
			t.Fatalf("the private folder holds %d entries", len(ents))
		}
	}
	// Outside public/: refused by the grant's when.
	e.refused("fs", "write_file", map[string]any{"path": secret, "content": "pwned"}, abi.EDENIED)
	e.refused("fs", "read_text_file", map[string]any{"path": secret}, abi.EDENIED)
	e.refused("fs", "write_file", map[string]any{"path": filepath.Join(priv, "new.txt"), "content": "pwned"}, abi.EDENIED)
	// Climbing out of public/ with "..".
	e.refused("fs", "read_text_file", map[string]any{"path": pub + "/../private/secret.txt"}, abi.EDENIED)
	// Tools not granted.
	e.refused("fs", "move_file", map[string]any{"source": secret, "destination": filepath.Join(pub, "stolen.txt")}, abi.EDENIED)
	e.refused("fs", "edit_file", map[string]any{"path": secret, "edits": []any{map[string]any{"oldText": "the", "newText": "a"}}}, abi.EDENIED)
	untouched()
	if _, err := os.Stat(filepath.Join(pub, "stolen.txt")); err == nil {
		t.Fatal("move_file moved the secret")
	}
	// The reads that were refused never reached the task: only the one
	// allowed read is a result.
	if strings.Contains(e.logs.String(), "the private secret") {
		t.Error("the private file's content is in the kernel's logs")
	}
}

// TestEverythingServer runs server-everything over stdio: an allowed call
// (echo), the tools op listing only the pinned definitions, a tool allowed
// by pattern but not pinned refused naming its digest, and a pin that
// does not match the server's definition refused naming the digest, with
// nothing sent.
func TestEverythingServer(t *testing.T) {
	base := map[string]any{"command": refServer(t, "server-everything", "stdio")}
	all := definitions(t, spec(base, map[string]any{"tools": []string{"*"}}))
	if len(all) < 5 {
		t.Fatalf("server-everything defines %d tools", len(all))
	}
	pins := pinsOf(t, all, "echo", "get-sum")
	bad := "sha256:" + strings.Repeat("0", 64)
	e := newKenv(t,
		grant{name: "every", spec: spec(base, map[string]any{"tools": []string{"*"}, "pins": pins})},
		grant{name: "badpin", spec: spec(base, map[string]any{"tools": []string{"echo"}, "pins": map[string]string{"echo": bad}})},
	)

	b, _ := e.mustCall("every", "echo", map[string]any{"message": "hello everything"})
	if got := decodeResult(t, b).text(); !strings.Contains(got, "hello everything") {
		t.Fatalf("echo: %q", got)
	}
	b, _ = e.mustCall("every", "get-sum", map[string]any{"a": 2, "b": 40})
	if got := decodeResult(t, b).text(); !strings.Contains(got, "42") {
		t.Fatalf("get-sum: %q", got)
	}

	// tools: only the pinned definitions, each with its digest.
	b, _, err := e.op("every", abi.MCPToolsOp, map[string]any{})
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	names := listedNames(t, b)
	if !slices.Equal(names, []string{"echo", "get-sum"}) {
		t.Errorf("tools lists %q, want only the pinned echo and get-sum", names)
	}

	// Allowed by "*" but not pinned: refused, naming the digest.
	envDigest := pinsOf(t, all, "get-env")["get-env"]
	err = e.refused("every", "get-env", nil, abi.EDENIED)
	if !strings.Contains(err.Error(), envDigest) {
		t.Errorf("refusal of the unpinned get-env does not name its digest %s: %v", envDigest, err)
	}
	// A pin that does not match.
	err = e.refused("badpin", "echo", map[string]any{"message": "x"}, abi.EDENIED)
	if !strings.Contains(err.Error(), pins["echo"]) {
		t.Errorf("refusal of the mismatched pin does not name the server's digest %s: %v", pins["echo"], err)
	}
	if b, _, err := e.op("badpin", abi.MCPToolsOp, map[string]any{}); err == nil {
		if names := listedNames(t, b); len(names) != 0 {
			t.Errorf("tools of the mismatched grant lists %q", names)
		}
	}
}

// listedNames reads the names out of the tools op's result: a list of
// definitions, or an object holding one under "tools".
func listedNames(t testing.TB, b []byte) []string {
	t.Helper()
	var list []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		var obj struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatalf("tools result %.300q: %v", b, err)
		}
		list = obj.Tools
	}
	var names []string
	for _, d := range list {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	return names
}

// TestEverythingEnv: server-everything's get-env reports the process's
// environment: a Node server is started with exactly the variables the
// grant's env lists, and a secret in mandate's environment is not among
// them.
func TestEverythingEnv(t *testing.T) {
	const secret = "mandate-test-secret-Nd3kQ8vX"
	t.Setenv("MANDATE_TEST_SECRET", secret)
	t.Setenv("EVERYTHING_LISTED", "listed")
	base := map[string]any{"command": refServer(t, "server-everything", "stdio"), "env": []string{"EVERYTHING_LISTED"}}
	pins := pinsOf(t, definitions(t, spec(base, map[string]any{"tools": []string{"get-env"}})), "get-env")
	e := newKenv(t, grant{name: "every", spec: spec(base, map[string]any{"tools": []string{"get-env"}, "pins": pins})})
	b, _ := e.mustCall("every", "get-env", nil)
	var env map[string]string
	if err := json.Unmarshal([]byte(decodeResult(t, b).text()), &env); err != nil {
		t.Fatalf("get-env: %.300q: %v", b, err)
	}
	want := map[string]string{"EVERYTHING_LISTED": "listed"}
	if len(env) != len(want) || env["EVERYTHING_LISTED"] != "listed" {
		t.Errorf("the server's environment is %v, want exactly %v", env, want)
	}
	if strings.Contains(string(b), secret) {
		t.Error("the secret in mandate's environment reached the server")
	}
}

// TestEverythingResourcesPrompts: the resources, read, prompts and prompt
// operations against server-everything pass through only what the grant
// names: the lists hold only granted entries, a granted resource and
// prompt are read, others are refused (EDENIED) before anything is sent.
func TestEverythingResourcesPrompts(t *testing.T) {
	base := map[string]any{"command": refServer(t, "server-everything", "stdio")}
	pins := pinsOf(t, definitions(t, spec(base, map[string]any{"tools": []string{"echo"}})), "echo")
	const doc = "demo://resource/static/document/"
	e := newKenv(t, grant{name: "every", spec: spec(base, map[string]any{
		"tools": []string{"echo"}, "pins": pins,
		"resources": []string{doc + "architecture.md"},
		"prompts":   []string{"args-prompt"},
	})})

	b, _, err := e.op("every", abi.MCPResourcesOp, map[string]any{})
	if err != nil {
		t.Fatalf("resources: %v", err)
	}
	if got := listed(t, b, "uri"); !slices.Equal(got, []string{doc + "architecture.md"}) {
		t.Errorf("resources lists %q, want only the granted one", got)
	}
	b, _, err = e.op("every", abi.MCPReadOp, map[string]any{"uri": doc + "architecture.md"})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if len(b) < 100 {
		t.Errorf("read: %.300q", b)
	}
	if _, _, err := e.op("every", abi.MCPReadOp, map[string]any{"uri": doc + "features.md"}); kindapi.ErrnoOf(err) != abi.EDENIED {
		t.Errorf("read of a resource not granted: %v, want EDENIED", err)
	}

	b, _, err = e.op("every", abi.MCPPromptsOp, map[string]any{})
	if err != nil {
		t.Fatalf("prompts: %v", err)
	}
	if got := listed(t, b, "name"); !slices.Equal(got, []string{"args-prompt"}) {
		t.Errorf("prompts lists %q, want only the granted one", got)
	}
	b, _, err = e.op("every", abi.MCPPromptOp, map[string]any{"name": "args-prompt", "arguments": map[string]string{"city": "Lisbon"}})
	if err != nil {
		t.Fatalf("prompt: %v", err)
	}
	if !strings.Contains(string(b), "Lisbon") {
		t.Errorf("prompt: %.300q", b)
	}
	if _, _, err := e.op("every", abi.MCPPromptOp, map[string]any{"name": "simple-prompt"}); kindapi.ErrnoOf(err) != abi.EDENIED {
		t.Errorf("a prompt not granted: %v, want EDENIED", err)
	}
}

// listed reads member key of each entry of a list result (a JSON array,
// or an object holding one).
func listed(t *testing.T, b []byte, key string) []string {
	t.Helper()
	var list []map[string]any
	if err := json.Unmarshal(b, &list); err != nil {
		var obj map[string][]map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatalf("list result %.300q: %v", b, err)
		}
		for _, v := range obj {
			list = append(list, v...)
		}
	}
	var out []string
	for _, m := range list {
		s, _ := m[key].(string)
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// TestEverythingStructuredFields: a field of server-everything's
// structured result labelled apart by the grant's results (fields) carries
// its own taint when the task takes that part (blob_part), without reading
// the whole; the rest carries the entry's taint. The same field mirrored
// in the text content must be labelled so too (it was not, before the
// kind labelled the text that mirrors structured content).
func TestEverythingStructuredFields(t *testing.T) {
	base := map[string]any{"command": refServer(t, "server-everything", "stdio")}
	const tool = "get-structured-content"
	pins := pinsOf(t, definitions(t, spec(base, map[string]any{"tools": []string{tool}})), tool)
	e := newKenv(t, grant{name: "every", spec: spec(base, map[string]any{"tools": []string{tool}, "pins": pins,
		"results": map[string]any{tool: map[string]any{
			"taint":  "weather:everything",
			"fields": map[string]any{"$.structuredContent.conditions": "weather:conditions"},
		}}})})
	ctx := context.Background()
	args, _ := json.Marshal(map[string]any{"tool": tool, "arguments": map[string]any{"location": "Chicago"}})
	h, err := e.task.Invoke(ctx, e.lookup("every"), abi.MCPCallOp, args)
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	part := func(path string) kindapi.Label {
		t.Helper()
		p, err := e.task.BlobPart(ctx, h, path, "")
		if err != nil {
			t.Fatalf("part %s: %v", path, err)
		}
		l, err := e.task.BlobLabel(p)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if l := part("$.structuredContent.conditions"); !slices.Contains(l.Integ(), "weather:conditions") || slices.Contains(l.Integ(), "weather:everything") {
		t.Errorf("conditions carry %v, want the field's taint weather:conditions only", l)
	}
	if l := part("$.structuredContent.temperature"); !slices.Contains(l.Integ(), "weather:everything") {
		t.Errorf("temperature carries %v, want the entry's taint weather:everything", l)
	}
	if l := e.task.Label(); !l.IsZero() {
		t.Errorf("taking parts raised the task's label to %v", l)
	}
	// server-everything, as the specification asks, also writes the
	// structured result as text in content[0]: the conditions are there
	// too, and should carry their field's taint there as well.
	if l := part("$.content[0].text"); !slices.Contains(l.Integ(), "weather:conditions") {
		t.Errorf("content[0].text mirrors structuredContent (conditions included) but carries %v, not the field's taint weather:conditions", l)
	}
}
