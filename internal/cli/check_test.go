package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
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
	return checkWith(t, loadCheckManifest(t, body), nil)
}

// loadCheckManifest writes a manifest whose task body is body (plus the
// seed files, records.json, people.json and records.csv) to a temporary
// directory and loads it.
func loadCheckManifest(t *testing.T, body string) *manifest.Manifest {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"m.wasm":       "not read",
		"records.json": checkRecords,
		"people.json":  checkPeople,
		"records.csv":  "id,owner,plan,passport[pii:$owner]\na1,alice,gold,X1\nb1,bob,silver,X2\n",
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
	return m
}

// checkWith analyses m with the CLI's kinds and extra.
func checkWith(t *testing.T, m *manifest.Manifest, extra []kindapi.Kind, extraDeclassifiers ...string) *checkReport {
	t.Helper()
	ks, closeKinds := host.Kinds("")
	defer closeKinds()
	g, err := checkGrants(m, append(ks, extra...), append(host.Declassifiers(), extraDeclassifiers...))
	if err != nil {
		t.Fatal(err)
	}
	r, err := checkManifest(m, g)
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
	if cl.AcceptsUntrusted || !pub.AcceptsUntrusted {
		t.Errorf("accepts_untrusted: public %v, cleared %v; want true, false", pub.AcceptsUntrusted, cl.AcceptsUntrusted)
	}
	wantTags(t, "public reaches", pub.Reaches, "https://public.example/")
	wantTags(t, "cleared clearance", cl.Clearance, "pii:alice", "pii:dave")
	if !slices.Contains(cl.Fields, kindapi.Detail{Name: "accepts_untrusted", Value: "false"}) {
		t.Errorf("cleared sink fields = %v", cl.Fields)
	}
	src := r.Sources[0]
	if src.Kind != "data" || src.Summary != "collection records, records own, fields passport, plan" || src.Unknown {
		t.Errorf("source = %+v", src)
	}
	if !reflect.DeepEqual(src.LabelledFields, map[string][]string{"passport": {"pii:alice"}}) {
		t.Errorf("labelled fields = %v", src.LabelledFields)
	}
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
	if len(r.Spawn) != 1 || !slices.Contains(r.Spawn[0].Fields, kindapi.Detail{Name: "modules", Value: "m.wasm"}) {
		t.Errorf("spawn = %+v", r.Spawn)
	}
	for _, f := range pay.Fields {
		if strings.Contains(f.Value, "placeholder") {
			t.Errorf("pay field %v shows the placeholder secret", f)
		}
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
	if len(r.Sinks) != 1 || !slices.Equal(r.Sinks[0].Reaches, []string{"https://web.example/"}) || r.Sinks[0].Safe {
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

// TestCheckCSVSeed: a CSV seed file is read as mandate run imports it.
func TestCheckCSVSeed(t *testing.T) {
	r := checkTestManifest(t, `
  principal = "bob"
  seed "records" { file = "records.csv" }
  cap "data" "r" {
    collection = "records"
    records    = "own"
    fields     = ["*"]
  }`)
	wantTags(t, "could_hold", r.CouldHold, "pii:bob")
}

// TestCheckKernelAttributes: the kernel's own attributes of every cap
// block are in the report, a budget in the kind's unit.
func TestCheckKernelAttributes(t *testing.T) {
	m := loadCheckManifest(t, `
  principal = "alice"
  cap "pay" "card" {
    provider     = "https://pay.example"
    instrument   = { env = "SURELY_UNSET_CARD_TOKEN" }
    payees       = ["shop.example"]
    currency     = "USD"
    audit        = true
    rate         = "10/s"
    max_uses     = 1
    budget       = "100"
    when         = "charge.payee != ''"
    approve_when = ["true", "false"]
  }
  cap "spawn" "kids" {
    modules = ["m.wasm"]
  }`)
	r := checkWith(t, m, nil)
	want := checkKernel{Audit: true, Rate: "10/s", MaxUses: 1, Budget: "100.00 USD",
		When: []string{"charge.payee != ''"}, ApproveWhen: []string{"true", "false"}}
	if len(r.Sinks) != 1 || !reflect.DeepEqual(r.Sinks[0].Kernel, want) {
		t.Errorf("sinks = %+v, want kernel %+v", r.Sinks, want)
	}
	if len(r.Spawn) != 1 || !reflect.DeepEqual(r.Spawn[0].Kernel, checkKernel{}) {
		t.Errorf("spawn = %+v, want no kernel attributes", r.Spawn)
	}
	b, err := json.Marshal(r.Sinks[0].Kernel)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `{"audit":true,"rate":"10/s","max_uses":1,"budget":"100.00 USD","when":["charge.payee != ''"],"approve_when":["true","false"]}` {
		t.Errorf("kernel JSON = %s", got)
	}
	var out bytes.Buffer
	writeCheckText(&out, m, r)
	if line := `  pay "card": https://pay.example, clearance {}, accepts_untrusted true [audit] [rate 10/s] [max_uses 1] [budget 100.00 USD] [when charge.payee != ''] [approve_when true || false]`; !strings.Contains(out.String(), line+"\n") {
		t.Errorf("text:\n%s\nwant the line\n%s", out.String(), line)
	}
}

// TestCheckPerFieldLabels: mandate check shows a net cap's labels by path
// and field, lists the confidentiality they add among what the task could
// hold, and names the taints a sink refuses.
func TestCheckPerFieldLabels(t *testing.T) {
	m := loadCheckManifest(t, `
  principal = "alice"
  cap "net" "bank" {
    origin = "https://bank.example"
    paths  = ["/transactions"]
    responses = {
      "/transactions" = {
        taint  = "bank:tx"
        labels = ["pii:alice"]
        fields = { "$.transactions[*].sender" = "bank:transactions.sender" }
      }
    }
  }
  cap "net" "pay" {
    origin         = "https://pay.example"
    methods        = ["POST"]
    clearance      = ["pii:alice"]
    refuses_taints = ["web:*", "bank:tx"]
  }`)
	r := checkWith(t, m, nil)
	wantTags(t, "could_hold", r.CouldHold, "pii:alice")
	if len(r.Sources) != 1 || !slices.Contains(r.Sources[0].Fields, kindapi.Detail{Name: "responses",
		Value: "/transactions: taint bank:tx, labels pii:alice; $.transactions[*].sender: taint bank:transactions.sender"}) {
		t.Errorf("sources = %+v", r.Sources)
	}
	var pay *checkSink
	for i := range r.Sinks {
		if r.Sinks[i].Cap == "pay" {
			pay = &r.Sinks[i]
		}
	}
	if pay == nil {
		t.Fatalf("sinks = %+v", r.Sinks)
	}
	wantTags(t, "pay refuses_taints", pay.RefusesTaints, "bank:tx", "web:*")
	var out bytes.Buffer
	writeCheckText(&out, m, r)
	for _, line := range []string{
		`  net "pay": https://pay.example/, clearance {pii:alice}, accepts_untrusted true, refuses_taints {bank:tx,web:*}`,
		` responses="/transactions: taint bank:tx, labels pii:alice; $.transactions[*].sender: taint bank:transactions.sender"`,
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("text:\n%s\nwant a line with\n%s", out.String(), line)
		}
	}
	b, _ := json.Marshal(pay)
	if !strings.Contains(string(b), `"refuses_taints":["bank:tx","web:*"]`) {
		t.Errorf("sink JSON %s", b)
	}
}

// TestCheckHistory: a constraint reading uses compiles in mandate check as
// in mandate run, is shown, and marks the capability as keeping a history;
// one that would not compile in mandate run is a manifest error here too.
func TestCheckHistory(t *testing.T) {
	m := loadCheckManifest(t, `
  principal = "alice"
  cap "net" "bank" {
    origin   = "https://bank.example"
    methods  = ["POST"]
    max_uses = 64
    when     = ["!uses.exists(u, u.request.body.recipient == request.body.recipient)",
                "sum(uses.map(u, double(u.request.body.amount))) + double(request.body.amount) <= 100.0"]
  }
  cap "net" "plain" {
    origin = "https://plain.example"
    when   = "request.method == 'GET'"
  }`)
	r := checkWith(t, m, nil)
	if len(r.Sinks) != 2 {
		t.Fatalf("sinks = %+v, want 2", r.Sinks)
	}
	if got := r.Sinks[0].Kernel; got.History != kernel.MaxHistory || len(got.When) != 2 {
		t.Errorf("bank: kernel %+v, want history %d and both whens", got, kernel.MaxHistory)
	}
	if got := r.Sinks[1].Kernel.History; got != 0 {
		t.Errorf("plain: history %d, want none", got)
	}
	var out bytes.Buffer
	writeCheckText(&out, m, r)
	if line := `[max_uses 64] [when !uses.exists(u, u.request.body.recipient == request.body.recipient) && sum(uses.map(u, double(u.request.body.amount))) + double(request.body.amount) <= 100.0] [history 64]`; !strings.Contains(out.String(), line+"\n") {
		t.Errorf("text:\n%s\nwant a line ending\n%s", out.String(), line)
	}
	for _, bad := range []string{
		`sum(uses.map(u, u.request.body.amount)) <= 100`, // the elements' type is unknown
		`uses.exists(u, u.request.body.to == args.to)`,   // net has no args
	} {
		m := loadCheckManifest(t, fmt.Sprintf(`
  principal = "alice"
  cap "net" "bank" {
    origin = "https://bank.example"
    when   = %q
  }`, bad))
		ks, closeKinds := host.Kinds("")
		_, err := checkGrants(m, ks, host.Declassifiers())
		closeKinds()
		if err == nil || !strings.Contains(err.Error(), `cap "net" "bank": when`) {
			t.Errorf("when %s: %v, want a positioned manifest error", bad, err)
		}
	}
}

// TestCheckRetry: mandate check says whether a fleet node would run a
// retry manifest again, naming each capability that is not repeatable;
// the charges' keys count as derived from the run, as on a node.
func TestCheckRetry(t *testing.T) {
	const caps = `
  cap "net" "read" {
    origin  = "https://shop.example"
    methods = ["GET"]
  }
  cap "pay" "card" {
    provider   = "https://pay.example"
    instrument = { env = "CHECK_TEST_CARD" }
    payees     = ["shop.example"]
    currency   = "USD"
  }
`
	r := checkTestManifest(t, "  principal = \"alice\"\n  retry = 2\n"+caps)
	if r.Task.Retry != 2 || len(r.Task.NotRepeatable) != 0 {
		t.Errorf("repeatable caps: %+v", r.Task)
	}
	r = checkTestManifest(t, "  principal = \"alice\"\n  retry = 1\n"+caps+`
  cap "net" "order" {
    origin  = "https://shop.example"
    methods = ["POST"]
  }
  cap "data" "notes" {
    collection = "records"
    records    = "own"
    fields     = ["plan"]
    ops        = ["read", "write"]
  }
`)
	want := []string{"order (net): it allows POST, which a server may perform twice", "notes (data): it allows write, and a write done twice may differ from one"}
	if !slices.Equal(r.Task.NotRepeatable, want) {
		t.Errorf("not repeatable: %q, want %q", r.Task.NotRepeatable, want)
	}
	var out strings.Builder
	writeCheckText(&out, &manifest.Manifest{Path: "m.hcl"}, r)
	if !strings.Contains(out.String(), "retry: a fleet node refuses this run") || !strings.Contains(out.String(), "order (net): it allows POST") {
		t.Errorf("text:\n%s", out.String())
	}
	if r := checkTestManifest(t, "  principal = \"alice\"\n"+caps); r.Task.Retry != 0 || r.Task.NotRepeatable != nil {
		t.Errorf("no retry: %+v", r.Task)
	}
}
