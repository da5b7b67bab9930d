package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/manifest"
)

const checkRecords = `[
  {"id": "a1", "owner": "alice", "fields": {"plan": "gold", "passport": "X1", "ssn": "1"},
   "labels": {"passport": ["pii:$owner"], "ssn": ["ssn:$owner"]}},
  {"id": "b1", "owner": "bob", "fields": {"plan": "silver", "passport": "X2", "ssn": "2"},
   "labels": {"passport": ["pii:$owner"], "ssn": ["ssn:$owner"]}},
  {"id": "d1", "owner": "dave", "fields": {"plan": "gold", "passport": "X3"},
   "labels": {"passport": ["pii:$owner"], "plan": ["financial:$owner"]}}
]`

const checkPeople = `[
  {"id": "p-alice", "owner": "alice", "fields": {"manager": "carol"}},
  {"id": "p-bob", "owner": "bob", "fields": {"manager": "erin"}},
  {"id": "p-dave", "owner": "dave", "fields": {"manager": ["carol", "erin"]}}
]`

// checkTestManifest writes a manifest whose task body is body (plus the
// seed files) to a temporary directory and analyses it.
func checkTestManifest(t *testing.T, body string) *checkReport {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"m.wasm":       "not read",
		"records.json": checkRecords,
		"people.json":  checkPeople,
		"m.hcl":        "task \"t\" {\n  module = \"m.wasm\"\n" + body + "\n}\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := manifest.Load(filepath.Join(dir, "m.hcl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkGrants(m); err != nil {
		t.Fatal(err)
	}
	r, err := checkManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantTags(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

const checkSinks = `
  cap "net" "public" {
    origin = "https://public.example"
  }
  cap "net" "cleared" {
    origin            = "https://cleared.example"
    clearance         = ["pii:alice", "pii:dave"]
    accepts_untrusted = false
  }
`

func TestCheckOwn(t *testing.T) {
	r := checkTestManifest(t, `
  principal = "alice"
  seed "records" { file = "records.json" }
  cap "data" "r" {
    collection = "records"
    records    = "own"
    fields     = ["plan", "passport"]
  }`+checkSinks)
	wantTags(t, "could_hold", r.CouldHold, "pii:alice")
	if r.Task.Bounded || r.Unknown {
		t.Errorf("bounded %v, unknown %v; want neither", r.Task.Bounded, r.Unknown)
	}
	if len(r.Sinks) != 2 {
		t.Fatalf("sinks = %+v", r.Sinks)
	}
	pub, cl := r.Sinks[0], r.Sinks[1]
	wantTags(t, "public could_receive", pub.CouldReceive)
	wantTags(t, "public blocked_by", pub.BlockedBy, "pii:alice")
	if pub.Safe || pub.Verdict != "after reading {pii:alice}, the task can no longer use this sink" {
		t.Errorf("public sink: safe %v, verdict %q", pub.Safe, pub.Verdict)
	}
	wantTags(t, "cleared could_receive", cl.CouldReceive, "pii:alice")
	if !cl.Safe || !strings.HasPrefix(cl.Verdict, "safe: ") {
		t.Errorf("cleared sink: safe %v, verdict %q", cl.Safe, cl.Verdict)
	}
	if cl.AcceptsUntrusted == nil || *cl.AcceptsUntrusted {
		t.Errorf("cleared sink accepts_untrusted = %v, want false", cl.AcceptsUntrusted)
	}
}

func TestCheckStarFields(t *testing.T) {
	r := checkTestManifest(t, `
  principal = "alice"
  seed "records" { file = "records.json" }
  cap "data" "r" {
    collection = "records"
    records    = "own"
    fields     = ["*"]
  }`)
	wantTags(t, "could_hold", r.CouldHold, "pii:alice", "ssn:alice")
}

func TestCheckOwners(t *testing.T) {
	r := checkTestManifest(t, `
  principal = "alice"
  seed "records" { file = "records.json" }
  cap "data" "r" {
    collection = "records"
    records    = { owners = ["bob", "dave"] }
    fields     = ["plan", "ssn"]
  }
  cap "data" "ids" {
    collection = "records"
    records    = { ids = ["a1"] }
    fields     = ["plan"]
  }`)
	wantTags(t, "could_hold", r.CouldHold, "financial:dave", "ssn:bob")
	wantTags(t, "ids tags", r.Sources[1].Tags)
}

func TestCheckRelation(t *testing.T) {
	r := checkTestManifest(t, `
  principal = "carol"
  seed "records" { file = "records.json" }
  seed "people" {
    file      = "people.json"
    relations = { manager = "manager_of" }
  }
  cap "data" "r" {
    collection = "records"
    records    = { relation = "manager_of" }
    fields     = ["passport"]
  }`+checkSinks)
	wantTags(t, "could_hold", r.CouldHold, "pii:alice", "pii:dave")
	if !r.Sinks[1].Safe {
		t.Errorf("cleared sink: %+v, want safe", r.Sinks[1])
	}
}

func TestCheckRelationUndeclared(t *testing.T) {
	r := checkTestManifest(t, `
  principal = "carol"
  seed "records" { file = "records.json" }
  cap "data" "r" {
    collection = "records"
    records    = { relation = "manager_of" }
    fields     = ["passport"]
  }`)
	wantTags(t, "could_hold", r.CouldHold, "pii:alice", "pii:bob", "pii:dave")
	if !strings.Contains(r.Sources[0].Note, "over-approximation") {
		t.Errorf("note = %q, want it to say over-approximation", r.Sources[0].Note)
	}
}

func TestCheckClearance(t *testing.T) {
	r := checkTestManifest(t, `
  principal = "carol"
  clearance = ["pii:alice"]
  seed "records" { file = "records.json" }
  cap "data" "r" {
    collection = "records"
    records    = { owners = ["alice", "bob"] }
    fields     = ["passport"]
  }
  cap "net" "news" {
    origin = "https://news.example"
    labels = ["paywalled"]
  }`+checkSinks)
	if !r.Task.Bounded {
		t.Error("task not bounded")
	}
	wantTags(t, "clearance", r.Task.Clearance, "pii:alice")
	wantTags(t, "could_hold", r.CouldHold, "pii:alice")
	wantTags(t, "above clearance", r.Sources[0].AboveClearance, "pii:bob")
	wantTags(t, "net labels above clearance", r.Sources[1].AboveClearance, "paywalled")
	if !r.Sinks[2].Safe {
		t.Errorf("cleared sink: %+v, want safe", r.Sinks[2])
	}
}

func TestCheckNoSeed(t *testing.T) {
	body := `
  principal = "alice"
  cap "data" "r" {
    collection = "records"
    records    = "own"
    fields     = ["*"]
  }
  cap "net" "labelled" {
    origin = "https://x.example"
    labels = ["secret:x"]
  }
  cap "pay" "card" {
    provider   = "https://pay.example"
    instrument = { env = "SURELY_UNSET_CARD_TOKEN" }
    payees     = ["shop.example"]
    currency   = "USD"
    clearance  = ["secret:x"]
  }
  cap "spawn" "kids" {
    modules = ["m.wasm"]
  }`
	r := checkTestManifest(t, body)
	if !r.Unknown || !r.Sources[0].Unknown || r.Sources[0].Note != "unknown (no seed data)" {
		t.Errorf("report: unknown %v, source %+v", r.Unknown, r.Sources[0])
	}
	wantTags(t, "could_hold", r.CouldHold, "secret:x")
	// pay is cleared for everything known, but the unseeded data is unknown.
	pay := r.Sinks[1]
	if pay.Kind != "pay" || pay.Safe || !strings.HasPrefix(pay.Verdict, "unknown") {
		t.Errorf("pay sink = %+v", pay)
	}
	if len(r.Spawn) != 1 || !slices.Equal(r.Spawn[0].Modules, []string{"m.wasm"}) {
		t.Errorf("spawn = %+v", r.Spawn)
	}

	// A bounded clearance bounds unseeded data.
	r = checkTestManifest(t, "clearance = [\"secret:x\"]\n"+body)
	if r.Unknown || !r.Sinks[1].Safe {
		t.Errorf("bounded: unknown %v, pay sink %+v", r.Unknown, r.Sinks[1])
	}
}

func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.wasm"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "records.json"), []byte(checkRecords), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "m.hcl"), []byte(`task "t" {
  module    = "m.wasm"
  principal = "alice"
  seed "records" { file = "records.json" }
  cap "data" "r" {
    collection = "records"
    records    = "own"
    fields     = ["passport"]
  }
  cap "net" "web" {
    origin = var.origin
  }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "spawn.hcl"), []byte(`task "t" {
  module    = "m.wasm"
  principal = "alice"
  cap "spawn" "kids" {
    modules = ["missing"]
  }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	m := filepath.Join(dir, "m.hcl")
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(args, strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, _ := run("check", m, "--var", "origin=https://web.example", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var r checkReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	wantTags(t, "could_hold", r.CouldHold, "pii:alice")
	if len(r.Sinks) != 1 || r.Sinks[0].Origin != "https://web.example" || r.Sinks[0].Safe {
		t.Errorf("sinks = %+v", r.Sinks)
	}

	if code, _, stderr := run("check", m); code != 2 || !strings.Contains(stderr, `variable "origin" is not set`) {
		t.Errorf("without the var: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run("check", m, "--var", "origin=x", "--format", "yaml"); code != 2 || !strings.Contains(stderr, "unknown format") {
		t.Errorf("bad format: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run("check", filepath.Join(dir, "spawn.hcl")); code != 2 || !strings.Contains(stderr, "module missing") {
		t.Errorf("missing spawn module: exit %d, stderr %q", code, stderr)
	}
}
