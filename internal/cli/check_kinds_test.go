package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// fakeKind is a kind the CLI knows nothing of: mandate check reports it
// from its Info and Describe alone.
type fakeKind struct {
	name     string
	ops      []string
	describe func(s *fakeScope) kindapi.Description
}

// fakeScope is a fake grant: its spec's string fields.
type fakeScope struct{ spec map[string]string }

func (s *fakeScope) MarshalJSON() ([]byte, error)  { return json.Marshal(s.spec) }
func (s *fakeScope) Contains(o kindapi.Scope) bool { return false }

func (k *fakeKind) Name() string { return k.name }
func (k *fakeKind) Info() kindapi.Info {
	return kindapi.Info{Ops: k.ops}
}
func (k *fakeKind) Grant(_ kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	s := &fakeScope{}
	if err := json.Unmarshal(spec, &s.spec); err != nil {
		return nil, err
	}
	return s, nil
}
func (k *fakeKind) Narrow(kindapi.Scope, []byte) (kindapi.Scope, error) {
	return nil, kindapi.ErrDenied
}
func (k *fakeKind) Prepare(*kindapi.Call) (kindapi.Op, error) { return kindapi.Op{}, kindapi.ErrDenied }
func (k *fakeKind) Describe(sc kindapi.Scope) kindapi.Description {
	s, err := kindapi.ScopeAs[*fakeScope](sc, k.name)
	if err != nil || k.describe == nil {
		return kindapi.Description{}
	}
	return k.describe(s)
}

// TestCheckAsksTheKinds: kinds registered only here, with a sink, a
// reach, a label, the spawn operation, the privilege to declassify, or
// none of these, appear in the report with no change to the CLI.
func TestCheckAsksTheKinds(t *testing.T) {
	var seen []kindapi.Seed
	vault := &fakeKind{name: "vault", ops: []string{"get"}, describe: func(s *fakeScope) kindapi.Description {
		path := s.spec["path"]
		return kindapi.Description{
			Fields:  []kindapi.Detail{{Name: "path", Value: path}},
			Sink:    &kindapi.Sink{Clearance: kindapi.NewLabel([]string{"secret:alice"}, nil), RefusesTainted: true},
			Reaches: []string{"vault:" + path},
			Reach: func(principal string, seeds []kindapi.Seed) kindapi.Reach {
				seen = seeds
				return kindapi.Reach{Known: true, Tags: []string{"secret:" + principal},
					ByField: map[string][]string{"value": {"secret:" + principal}},
					Summary: fmt.Sprintf("path %s, %d seed(s)", path, len(seeds)), Note: "what the vault holds"}
			},
		}
	}}
	lens := &fakeKind{name: "lens", ops: []string{"look"}, describe: func(s *fakeScope) kindapi.Description {
		return kindapi.Description{Label: kindapi.NewLabel([]string{"seen:" + s.spec["at"]}, []string{"lens"}), Reaches: []string{s.spec["at"]}}
	}}
	fork := &fakeKind{name: "fork", ops: []string{kindapi.OpSpawn}, describe: func(s *fakeScope) kindapi.Description {
		return kindapi.Description{Fields: []kindapi.Detail{{Name: "modules", Value: s.spec["modules"]}}}
	}}
	scrub := &fakeKind{name: "scrub", ops: []string{"scrub"}, describe: func(s *fakeScope) kindapi.Description {
		return kindapi.Description{Fields: []kindapi.Detail{{Name: "drop", Value: s.spec["drop"]}}}
	}}
	clock := &fakeKind{name: "clock", ops: []string{"now"}, describe: func(s *fakeScope) kindapi.Description {
		// A value a manifest author or guest could have written: shown
		// escaped in the text form.
		return kindapi.Description{Fields: []kindapi.Detail{{Name: "zone", Value: s.spec["zone"] + "\x1b[2J\u202e"}}}
	}}
	m := loadCheckManifest(t, `
  principal = "alice"
  seed "records" { file = "records.json" }
  cap "vault" "secrets" {
    path     = "kv/team"
    audit    = true
    rate     = "5/m"
    max_uses = 3
  }
  cap "lens" "eye" {
    at = "window"
  }
  cap "fork" "kids" {
    modules = "helper"
  }
  cap "scrub" "clean" {
    drop = "secret:alice"
  }
  cap "clock" "now" {
    zone = "UTC"
  }
  cap "net" "public" {
    origin = "https://public.example"
  }`)
	r := checkWith(t, m, []kindapi.Kind{vault, lens, fork, scrub, clock}, "scrub")

	if len(seen) != 1 || seen[0].Collection != "records" || !bytes.Contains(seen[0].Records, []byte(`"a1"`)) {
		t.Errorf("the vault's Reach got seeds %+v, want the manifest's one", seen)
	}
	wantTags(t, "could_hold", r.CouldHold, "secret:alice", "seen:window")
	if len(r.Sources) != 2 {
		t.Fatalf("sources = %+v", r.Sources)
	}
	src := r.Sources[0]
	if src.Cap != "secrets" || src.Kind != "vault" || src.Summary != "path kv/team, 1 seed(s)" || src.Note != "what the vault holds" || src.Unknown {
		t.Errorf("vault source = %+v", src)
	}
	wantTags(t, "vault tags", src.Tags, "secret:alice")
	wantTags(t, "vault value field", src.LabelledFields["value"], "secret:alice")
	if want := (checkKernel{Audit: true, Rate: "5/m", MaxUses: 3}); !slices.Equal(src.Fields, []kindapi.Detail{{Name: "path", Value: "kv/team"}}) || src.Kernel.Audit != want.Audit || src.Kernel.Rate != want.Rate || src.Kernel.MaxUses != want.MaxUses {
		t.Errorf("vault source fields %v, kernel %+v", src.Fields, src.Kernel)
	}
	if l := r.Sources[1]; l.Kind != "lens" || l.Summary != "window" || !strings.Contains(l.Note, "every response") {
		t.Errorf("lens source = %+v", l)
	}
	wantTags(t, "lens tags", r.Sources[1].Tags, "seen:window")

	if len(r.Sinks) != 2 {
		t.Fatalf("sinks = %+v", r.Sinks)
	}
	vs, pub := r.Sinks[0], r.Sinks[1]
	if vs.Kind != "vault" || vs.AcceptsUntrusted || !slices.Equal(vs.Reaches, []string{"vault:kv/team"}) || vs.Kernel.Rate != "5/m" {
		t.Errorf("vault sink = %+v", vs)
	}
	wantTags(t, "vault sink clearance", vs.Clearance, "secret:alice")
	wantTags(t, "vault sink blocked_by", vs.BlockedBy, "seen:window")
	wantTags(t, "public blocked_by", pub.BlockedBy, "secret:alice", "seen:window")

	if len(r.Spawn) != 1 || r.Spawn[0].Kind != "fork" || !slices.Equal(r.Spawn[0].Fields, []kindapi.Detail{{Name: "modules", Value: "helper"}}) {
		t.Errorf("spawn = %+v", r.Spawn)
	}
	if len(r.Declassify) != 1 || r.Declassify[0].Kind != "scrub" || r.Declassify[0].Fields[0].Value != "secret:alice" {
		t.Errorf("declassify = %+v", r.Declassify)
	}
	if len(r.Other) != 1 || r.Other[0].Kind != "clock" || r.Other[0].Cap != "now" {
		t.Errorf("other = %+v", r.Other)
	}

	var out bytes.Buffer
	writeCheckText(&out, m, r)
	text := out.String()
	for _, line := range []string{
		`  vault "secrets": path kv/team, 1 seed(s) [audit] [rate 5/m] [max_uses 3]`,
		`    what the vault holds: {secret:alice}`,
		`    value: {secret:alice}`,
		`  lens "eye": window`,
		`    every response carries these labels: {seen:window}`,
		`  vault "secrets": vault:kv/team, clearance {secret:alice}, accepts_untrusted false [audit] [rate 5/m] [max_uses 3]`,
		`    grant: path=kv/team`,
		`  fork "kids": modules=helper`,
		`  scrub "clean": drop=secret:alice`,
		`  clock "now": zone=UTC\x1b[2J\u202e`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("text has no line %q:\n%s", line, text)
		}
	}
	if strings.ContainsAny(text, "\x1b\u202e") {
		t.Errorf("text carries a control or bidi character:\n%q", text)
	}
}

// describeSecret is what the environment holds for every secret a spec
// names: it must never appear in a description.
const describeSecret = "s3cr3t-value-never-described"

// describeSpecs sets, for each kind host.Kinds registers, every grant field
// the kind documents to a value that is not its default. A new kind adds
// its row.
var describeSpecs = map[string]string{
	"net": `{"origin":"https://api.example","methods":["GET","POST"],"paths":["/v1"],
		"max_request_bytes":"2MiB","max_response_bytes":"1MiB","timeout":"5s","max_redirects":2,
		"allow_private":true,"clearance":["pii:alice"],"accepts_untrusted":false,"labels":["paywalled"],
		"headers":[{"name":"X-Api-Key","env":"DESCRIBE_SECRET","prefix":"Key "}]}`,
	"data": `{"collection":"benefits","records":{"owners":["alice","bob"]},"fields":["plan","dental"],"ops":["read","query"]}`,
	"pay": `{"provider":"https://pay.example/v1","allow_private":true,"instrument":{"env":"DESCRIBE_SECRET"},
		"timeout":"10s","payees":["airline.example","hotel.example"],"currency":"EUR","max_amount":"800",
		"expires":"2099-01-01T00:00:00Z","approve_above":"500","clearance":["pii:alice"]}`,
	"spawn": `{"modules":["sha256:` + strings.Repeat("ab", 32) + `"],"max_depth":2,"max_children":3,
		"max_memory":"32MiB","max_timeout":"20s"}`,
	"declassify": `{"drop":["pii:alice"],"project":["fields.nationality"]}`,
	"llm": `{"endpoint":"http://127.0.0.1:8080/v1","models":["local-8b","local-70b"],"api_key":{"env":"DESCRIBE_SECRET"},
		"max_tokens":512,"timeout":"45s","allow_private":true,"clearance":["pii:alice"],"endorse_schema":true,
		"max_request_bytes":"2MiB","max_response_bytes":"1MiB"}`,
	"mcp": `{"url":"http://127.0.0.1:8081/mcp","allow_private":true,
		"headers":[{"name":"Authorization","env":"DESCRIBE_SECRET","prefix":"Bearer "}],
		"tools":["search","read_*"],"pins":{"search":"sha256:` + strings.Repeat("ab", 32) + `"},
		"results":{"read_*":{"labels":["pii:alice"],"taint":"files:read"},"search":{"taint":"web:search"}},
		"clearance":["pii:alice"],"accepts_untrusted":false,"refuses_taints":["web:*"],
		"resources":["file:///data/*"],"prompts":["summarise"],"costs":{"search":5},
		"timeout":"45s","max_request_bytes":"2MiB","max_response_bytes":"1MiB","max_tools":16}`,
}

// describeWant are values that must read in readable units.
var describeWant = map[string]map[string]string{
	"net":   {"max_request_bytes": "2 MiB", "max_response_bytes": "1 MiB", "timeout": "5s", "max_redirects": "2", "accepts_untrusted": "false", "headers": "X-Api-Key (set by the kernel)"},
	"data":  {"collection": "benefits", "records": "owners alice, bob", "fields": "dental, plan"},
	"pay":   {"max_amount": "800.00 EUR", "approve_above": "500.00 EUR", "timeout": "10s", "currency": "EUR", "instrument": "env:DESCRIBE_SECRET"},
	"spawn": {"max_depth": "2", "max_children": "3", "max_memory": "32 MiB", "max_timeout": "20s"},
	"llm": {"endpoint": "http://127.0.0.1:8080", "models": "local-70b, local-8b", "api_key": "env:DESCRIBE_SECRET (set by the kernel)",
		"max_tokens": "512", "timeout": "45s", "max_request_bytes": "2 MiB", "max_response_bytes": "1 MiB", "endorse_schema": "true"},
	"mcp": {"url": "http://127.0.0.1:8081/mcp", "upstream": "http://127.0.0.1:8081/mcp", "headers": "Authorization from env:DESCRIBE_SECRET (set by the kernel)",
		"timeout": "45s", "max_request_bytes": "2 MiB", "max_response_bytes": "1 MiB", "max_tools": "16", "costs": "search=5"},
}

// TestKindsDescribeEveryField: every kind a run registers describes every
// field of its grant, secrets by their source only.
func TestKindsDescribeEveryField(t *testing.T) {
	ks, closeKinds := host.Kinds("")
	defer closeKinds()
	gc := kindapi.GrantContext{Dir: t.TempDir(), LookupEnv: func(name string) (string, bool) {
		return describeSecret, name == "DESCRIBE_SECRET"
	}}
	registered := map[string]bool{}
	for _, k := range ks {
		registered[k.Name()] = true
		spec, ok := describeSpecs[k.Name()]
		if !ok {
			t.Errorf("kind %q has no row in describeSpecs: add a spec setting every field it documents", k.Name())
			continue
		}
		t.Run(k.Name(), func(t *testing.T) {
			var fields map[string]json.RawMessage
			if err := json.Unmarshal([]byte(spec), &fields); err != nil {
				t.Fatal(err)
			}
			s, err := k.Grant(gc, []byte(spec))
			if err != nil {
				t.Fatalf("grant %s: %v", spec, err)
			}
			d := k.Describe(s)
			got := map[string]string{}
			for _, f := range d.Fields {
				if _, dup := got[f.Name]; dup {
					t.Errorf("field %q described twice", f.Name)
				}
				got[f.Name] = f.Value
			}
			for name := range fields {
				if _, ok := got[name]; !ok {
					t.Errorf("Describe has no field %q (fields %v)", name, d.Fields)
				}
			}
			for name, want := range describeWant[k.Name()] {
				if got[name] != want {
					t.Errorf("field %s = %q, want %q", name, got[name], want)
				}
			}

			// Nothing of the description carries a secret.
			all := fmt.Sprintf("%v %v %v", d.Fields, d.Reaches, d.Label)
			if d.Sink != nil {
				all += fmt.Sprintf(" %v %v", d.Sink.Clearance, d.Sink.RefusesTainted)
			}
			if d.Reach != nil {
				all += fmt.Sprintf(" %+v", d.Reach("alice", nil))
			}
			if b, err := json.Marshal(s); err != nil {
				t.Error(err)
			} else {
				all += string(b)
			}
			if strings.Contains(all, describeSecret) {
				t.Errorf("the description shows the secret: %s", all)
			}
		})
	}
	for name := range describeSpecs {
		if !registered[name] {
			t.Errorf("describeSpecs has a row for %q, which kindsFor does not register", name)
		}
	}
}
