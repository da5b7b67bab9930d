package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	goparser "go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// policyDir makes a directory with what the test policies name: a .wasm
// module, a guest directory and a seed file.
func policyDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"tools/benefits", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"guest.wasm", "data/benefits.json"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writePolicy puts a policy in a fresh policyDir and returns its path.
func writePolicy(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(policyDir(t), "mcp.hcl")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const fullPolicy = `# Alice's benefits desk, served over MCP.
session {
  principal = "alice"
  clearance = ["pii:alice"]
  limits {
    timeout = "8h"
    blobs   = "16MiB"
  }
  seed "benefits" {
    file      = "data/benefits.json"
    relations = { manager = "manager_of" }
  }
}

tool "my_benefits" {
  module      = "tools/benefits"
  digest      = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  description = "Your own benefits record"
  input_schema = {
    type       = "object"
    properties = { year = { type = "integer", minimum = 2000 }, note = { type = "string", description = "<free text> & more" } }
    required   = ["year"]
  }
  limits {
    memory  = "64MiB"
    timeout = "30s"
  }
  cap "data" "benefits" {
    collection = "benefits"
    records    = "own"
    fields     = ["plan", "dental"]
    ops        = ["read"]
    audit      = true
    max_uses   = 3
  }
  cap "net" "docs" {
    origin = var.origin
    when   = "request.method == 'GET'"
  }
}

tool "search.flights-v2" {
  module       = "guest.wasm"
  entry        = "run"
  description  = <<EOT
Search flights.
	Returns a reference to the results.
EOT
  input_schema = "{\"type\": \"object\", \"required\": [\"from\"], \"properties\": {\"from\": {\"type\": \"string\"}}, \"additionalProperties\": false}"
  result       = "reference"
  cap "data" "benefits" {
    collection = "benefits"
    records    = "own"
    fields     = ["*"]
  }
}
`

func TestLoadPolicy(t *testing.T) {
	p := writePolicy(t, fullPolicy)
	pol, err := LoadPolicy(p, map[string]string{"origin": "https://docs.example"})
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs(filepath.Dir(p))
	if pol.Path != p || pol.Dir != dir {
		t.Errorf("Path, Dir = %q, %q", pol.Path, pol.Dir)
	}

	s := pol.Session
	if s.Principal != "alice" {
		t.Errorf("principal %q", s.Principal)
	}
	if want := kindapi.NewLabel([]string{"pii:alice"}, nil); s.Clearance == nil || !reflect.DeepEqual(*s.Clearance, want) {
		t.Errorf("clearance %v, want %v", s.Clearance, want)
	}
	if want := (kernel.Limits{Timeout: 8 * time.Hour, MaxBlobBytes: 16 << 20}); s.Limits() != want {
		t.Errorf("session limits %+v, want %+v", s.Limits(), want)
	}
	if len(s.Seeds) != 1 || s.Seeds[0].Collection != "benefits" || s.Seeds[0].File != filepath.Join(dir, "data/benefits.json") ||
		!reflect.DeepEqual(s.Seeds[0].Relations, map[string]string{"manager": "manager_of"}) {
		t.Errorf("seeds %+v", s.Seeds)
	}

	if len(pol.Tools) != 2 {
		t.Fatalf("%d tools, want 2", len(pol.Tools))
	}
	a, b := pol.Tools[0], pol.Tools[1]
	if pol.Tool("my_benefits") != a || pol.Tool("search.flights-v2") != b || pol.Tool("nope") != nil {
		t.Error("Tool does not find the tools by name")
	}

	wantDir, _ := filepath.EvalSymlinks(filepath.Join(dir, "tools/benefits"))
	if a.Name != "my_benefits" || a.Description != "Your own benefits record" || a.ModulePath != wantDir || !a.ModuleIsDir ||
		a.Digest != "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" || a.Entry != "" || a.Result != ResultValue {
		t.Errorf("tool a: %+v", a)
	}
	wantSchema := `{"properties":{"note":{"description":"<free text> & more","type":"string"},"year":{"minimum":2000,"type":"integer"}},"required":["year"],"type":"object"}`
	if string(a.InputSchema) != wantSchema {
		t.Errorf("tool a schema:\n got %s\nwant %s", a.InputSchema, wantSchema)
	}
	if want := (kernel.Limits{Memory: 64 << 20, Timeout: 30 * time.Second}); a.Limits() != want {
		t.Errorf("tool a limits %+v, want %+v", a.Limits(), want)
	}
	if len(a.Caps) != 2 {
		t.Fatalf("tool a: %d caps, want 2", len(a.Caps))
	}
	c := a.Caps[0]
	if c.Kind != "data" || c.Name != "benefits" || !c.Audit || c.MaxUses != 3 ||
		string(c.Spec) != `{"collection":"benefits","fields":["plan","dental"],"ops":["read"],"records":"own"}` {
		t.Errorf("cap data: %+v spec %s", c, c.Spec)
	}
	c = a.Caps[1]
	if c.Kind != "net" || c.Name != "docs" || string(c.Spec) != `{"origin":"https://docs.example"}` ||
		!reflect.DeepEqual(c.When, []string{"request.method == 'GET'"}) {
		t.Errorf("cap net: %+v spec %s", c, c.Spec)
	}

	wantWasm, _ := filepath.EvalSymlinks(filepath.Join(dir, "guest.wasm"))
	if b.Name != "search.flights-v2" || b.ModulePath != wantWasm || b.ModuleIsDir || b.Digest != "" || b.Entry != "run" ||
		b.Result != ResultReference || b.Description != "Search flights.\n\tReturns a reference to the results.\n" {
		t.Errorf("tool b: %+v", b)
	}
	wantSchema = `{"additionalProperties":false,"properties":{"from":{"type":"string"}},"required":["from"],"type":"object"}`
	if string(b.InputSchema) != wantSchema {
		t.Errorf("tool b schema:\n got %s\nwant %s", b.InputSchema, wantSchema)
	}
	if b.Limits() != (kernel.Limits{}) || len(b.Caps) != 1 || b.Caps[0].Name != "benefits" {
		t.Errorf("tool b: limits %+v caps %+v", b.Limits(), b.Caps)
	}
}

// The smallest policy: a principal and one tool, with every default.
func TestLoadPolicyDefaults(t *testing.T) {
	p := writePolicy(t, "session {\n  principal = \"bob\"\n}\ntool \"t\" {\n  module = \"guest.wasm\"\n  description = \"T\"\n}\n")
	pol, err := LoadPolicy(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := pol.Session
	if s.Principal != "bob" || s.Clearance != nil || len(s.Seeds) != 0 || s.Limits() != (kernel.Limits{}) || s.LabelTTL != 0 {
		t.Errorf("session %+v", s)
	}
	tl := pol.Tools[0]
	if string(tl.InputSchema) != `{"type":"object"}` || tl.Result != ResultValue || tl.Approval != ApprovalPerson || len(tl.Caps) != 0 || tl.Limits() != (kernel.Limits{}) {
		t.Errorf("tool %+v", tl)
	}
	// input_schema = null is unset.
	p = writePolicy(t, "session {\n  principal = \"bob\"\n}\ntool \"t\" {\n  module = \"guest.wasm\"\n  description = \"T\"\n  input_schema = null\n}\n")
	if pol, err = LoadPolicy(p, nil); err != nil || string(pol.Tools[0].InputSchema) != `{"type":"object"}` {
		t.Errorf("input_schema = null: %v", err)
	}
	p = writePolicy(t, "session {\n  principal = \"bob\"\n  label_ttl = \"36h\"\n}\ntool \"t\" {\n  module = \"guest.wasm\"\n  description = \"T\"\n}\n")
	if pol, err = LoadPolicy(p, nil); err != nil || pol.Session.LabelTTL != 36*time.Hour {
		t.Errorf("label_ttl = \"36h\": %v %v", pol.Session.LabelTTL, err)
	}
	p = writePolicy(t, "session {\n  principal = \"bob\"\n}\ntool \"t\" {\n  module = \"guest.wasm\"\n  description = \"T\"\n  responses = { taint = \"mail:status\", labels = [] }\n  cap \"net\" \"mail\" {}\n}\n")
	if pol, err = LoadPolicy(p, nil); err != nil || pol.Tools[0].Responses == nil || pol.Tools[0].Responses.Taint != "mail:status" {
		t.Errorf("responses: %v %+v", err, pol)
	}
	p = writePolicy(t, "session {\n  principal = \"bob\"\n}\ntool \"t\" {\n  upstream = \"read_text_file\"\n  cap \"mcp\" \"fs\" {\n    command = [\"server\"]\n  }\n}\n")
	if pol, err = LoadPolicy(p, nil); err != nil || pol.Tools[0].Upstream != "read_text_file" || pol.Tools[0].ModulePath != "" || len(pol.Tools[0].Caps) != 1 {
		t.Errorf("upstream: %v %+v", err, pol)
	}
	p = writePolicy(t, "session {\n  principal = \"bob\"\n}\ntool \"t\" {\n  module = \"guest.wasm\"\n  description = \"T\"\n  approval = \"client\"\n}\n")
	if pol, err = LoadPolicy(p, nil); err != nil || pol.Tools[0].Approval != ApprovalClient {
		t.Errorf("approval = \"client\": %v", err)
	}
}

func TestLoadPolicyErrors(t *testing.T) {
	const session = "session {\n  principal = \"p\"\n}\n" // lines 1-3
	const tool = "tool \"t\" {\n  module = \"guest.wasm\"\n  description = \"d\"\n}\n"
	// toolWith is session and a tool whose line 5 onwards is body.
	toolWith := func(body string) string {
		return session + "tool \"t\" {\n" + body + "}\n"
	}
	const md = "  module = \"guest.wasm\"\n  description = \"d\"\n" // lines 5-6
	tests := []struct {
		name string
		src  string
		want string // ":LINE,COL: message" fragment
	}{
		{"syntax", "session {\n  principal = \n}\n", ":2,"},
		{"empty file", "", "no session block"},
		{"missing session", tool, ":1,1: no session block: a policy holds one"},
		{"two sessions", session + "session {\n  principal = \"q\"\n}\n" + tool, ":4,1: only one session block is allowed; the first is at "},
		{"session label", "session \"s\" {\n  principal = \"p\"\n}\n" + tool, ":1,9: Extraneous label for session"},
		{"no tools", session, ":1,1: no tool block: a policy offers one or more tools"},
		{"duplicate tool", session + tool + tool, `:8,6: duplicate tool name "t"; the first is at `},
		{"tool name with a space", session + "tool \"my tool\" {\n" + md + "}\n", `:4,6: tool name "my tool" must be 1 to 64 of the characters A-Z a-z 0-9 _ . -`},
		{"tool name with a control character", session + "tool \"a\\u0007b\" {\n" + md + "}\n", `:4,6: tool name "a\ab" must be`},
		{"tool name with a newline", session + "tool \"a\\nb\" {\n" + md + "}\n", `:4,6: tool name "a\nb" must be`},
		{"tool name not ASCII", session + "tool \"café\" {\n" + md + "}\n", `:4,6: tool name "café" must be`},
		{"empty tool name", session + "tool \"\" {\n" + md + "}\n", `:4,6: tool name "" must be`},
		{"long tool name", session + "tool \"" + strings.Repeat("a", 65) + "\" {\n" + md + "}\n", `:4,6: tool name "aaaa`},
		{"tool without a label", session + "tool {\n" + md + "}\n", `:4,6: Missing name for tool`},
		{"missing principal", "session {\n}\n" + tool, `:1,9: Missing required argument: The argument "principal" is required`},
		{"empty principal", "session {\n  principal = \" \"\n}\n" + tool, `:2,15: principal must not be empty`},
		{"session clearance", "session {\n  principal = \"p\"\n  clearance = 5\n}\n" + tool, `:3,15: clearance must be a list of confidentiality tags`},
		{"session limits", "session {\n  principal = \"p\"\n  limits {\n    timeout = \"forever\"\n  }\n}\n" + tool, `:4,15: timeout "forever" is not a duration`},
		{"label_ttl not a duration", "session {\n  principal = \"p\"\n  label_ttl = \"a day\"\n}\n" + tool, `:3,15: label_ttl "a day" is not a duration (examples: "24h"`},
		{"label_ttl not positive", "session {\n  principal = \"p\"\n  label_ttl = \"0s\"\n}\n" + tool, `:3,15: label_ttl "0s" must be positive`},
		{"label_ttl a number", "session {\n  principal = \"p\"\n  label_ttl = 24\n}\n" + tool, `:3,15: label_ttl must be a string`},
		{"session seed file", "session {\n  principal = \"p\"\n  seed \"c\" {\n    file = \"nope.json\"\n  }\n}\n" + tool, `:4,12: seed file: `},
		{"session module", "session {\n  principal = \"p\"\n  module = \"guest.wasm\"\n}\n" + tool, `:3,3: Unsupported argument: An argument named "module" is not expected here`},
		{"session cap", "session {\n  principal = \"p\"\n  cap \"net\" \"x\" {}\n}\n" + tool, `:3,3: Unsupported block type: Blocks of type "cap" are not expected here`},
		{"responses with a data cap", toolWith(md + "  responses = { labels = [] }\n  cap \"data\" \"d\" {}\n"), `:7,15: responses on a tool whose cap "data" "d" could bring data of its own`},
		{"responses with a labelled net cap", toolWith(md + "  responses = { labels = [] }\n  cap \"net\" \"n\" {\n    labels = [\"pii:x\"]\n  }\n"), `:7,15: responses on a tool whose cap "net" "n" could bring data of its own`},
		{"responses unknown field", toolWith(md + "  responses = { fields = {} }\n"), `:7,15: responses must be an object`},
		{"responses bad taint", toolWith(md + "  responses = { taint = \"web:*\" }\n"), `:7,15: responses: a taint`},
		{"approval mode", toolWith(md + "  approval = \"model\"\n"), `:7,14: approval "model" is not who answers approvals: "person" (the default`},
		{"client approval of a payment", toolWith(md + "  approval = \"client\"\n  cap \"pay\" \"card\" {}\n"), `:7,14: approval = "client" with the pay capability "card": a payment is approved by the person, never by the client`},
		{"missing module", toolWith("  description = \"d\"\n"), `:4,10: Missing required argument: The argument "module" is required`},
		{"module missing", toolWith("  module = \"nope\"\n  description = \"d\"\n"), `:5,12: module "nope": no such file or directory`},
		{"bad digest", toolWith(md + "  digest = \"sha256:00\"\n"), `:7,12: digest "sha256:00" is not of the form`},
		{"missing description", toolWith("  module = \"guest.wasm\"\n"), `:4,10: Missing required argument: The argument "description" is required`},
		{"empty description", toolWith("  module = \"guest.wasm\"\n  description = \"  \"\n"), `:6,17: description must not be empty`},
		{"description not a string", toolWith("  module = \"guest.wasm\"\n  description = [\"d\"]\n"), `:6,17: description must be a string, not tuple`},
		{"description with a control character", toolWith("  module = \"guest.wasm\"\n  description = \"ring\\u0007\"\n"), `:6,17: description holds the unprintable character U+0007`},
		{"description with a bidi override", toolWith("  module = \"guest.wasm\"\n  description = \"a\\u202Eb\"\n"), `:6,17: description holds the unprintable character U+202E`},
		{"long description", toolWith("  module = \"guest.wasm\"\n  description = \"" + strings.Repeat("d", MaxDescription+1) + "\"\n"), `:6,17: description is 8193 bytes, more than 8192`},
		{"input_schema a list", toolWith(md + "  input_schema = [\"object\"]\n"), `:7,18: input_schema must be a JSON Schema object, such as { type = "object" }, or a string holding one, not tuple`},
		{"input_schema a number", toolWith(md + "  input_schema = 5\n"), `:7,18: input_schema must be a JSON Schema object`},
		{"input_schema type not object", toolWith(md + "  input_schema = { type = \"string\" }\n"), `:7,18: input_schema must have "type": "object" (a tool's arguments are an object), not "string"`},
		{"input_schema without type", toolWith(md + "  input_schema = { properties = {} }\n"), `:7,18: input_schema must have "type": "object" (a tool's arguments are an object), not no type`},
		{"input_schema type a list", toolWith(md + "  input_schema = { type = [\"object\"] }\n"), `:7,18: input_schema must have "type": "object" (a tool's arguments are an object), not a list`},
		{"input_schema properties a list", toolWith(md + "  input_schema = { type = \"object\", properties = [] }\n"), `:7,18: input_schema "properties" must be an object, not a list`},
		{"input_schema required a string", toolWith(md + "  input_schema = { type = \"object\", required = \"a\" }\n"), `:7,18: input_schema "required" must be a list of property names, not a string`},
		{"input_schema required numbers", toolWith(md + "  input_schema = { type = \"object\", required = [1] }\n"), `:7,18: input_schema "required" must be a list of property names, not holding a number`},
		{"input_schema invalid JSON", toolWith(md + "  input_schema = \"{\\\"type\\\": \\\"object\\\",}\"\n"), `:7,18: input_schema is not valid JSON: invalid character '}'`},
		{"input_schema JSON trailing data", toolWith(md + "  input_schema = \"{\\\"type\\\": \\\"object\\\"} {}\"\n"), `:7,18: input_schema is not valid JSON: invalid character '{' after top-level value`},
		{"input_schema JSON not an object", toolWith(md + "  input_schema = \"[1, 2]\"\n"), `:7,18: input_schema must be a JSON object, not a list`},
		{"input_schema JSON type not object", toolWith(md + "  input_schema = \"{\\\"type\\\": \\\"array\\\"}\"\n"), `:7,18: input_schema must have "type": "object" (a tool's arguments are an object), not "array"`},
		{"input_schema number out of range", toolWith(md + "  input_schema = \"{\\\"type\\\": \\\"object\\\", \\\"maximum\\\": 1e400}\"\n"), `:7,18: input_schema holds the number 1e400, out of range`},
		{"input_schema empty string", toolWith(md + "  input_schema = \"\"\n"), `:7,18: input_schema is not valid JSON: unexpected end of JSON input`},
		{"unknown attribute", toolWith(md + "  results = \"value\"\n"), `:7,3: Unsupported argument: An argument named "results" is not expected here`},
		{"tool principal", toolWith(md + "  principal = \"mallory\"\n"), `:7,3: Unsupported argument: An argument named "principal" is not expected here`},
		{"tool seed", toolWith(md + "  seed \"c\" {\n    file = \"data/benefits.json\"\n  }\n"), `:7,3: Unsupported block type: Blocks of type "seed" are not expected here`},
		{"unknown result mode", toolWith(md + "  result = \"blob\"\n"), `:7,12: result "blob" is not a result mode: "value" (the default) or "reference"`},
		{"result not a string", toolWith(md + "  result = true\n"), `:7,12: result must be a string, not bool`},
		{"tool limits", toolWith(md + "  limits {\n    memory = \"5GiB\"\n  }\n"), `:8,14: memory = 5368709120 bytes is out of range`},
		{"two tool limits", toolWith(md + "  limits {}\n  limits {}\n"), `:8,3: only one limits block is allowed`},
		{"unknown top-level block", session + tool + "job \"x\" {}\n", `:8,1: Unsupported block type: Blocks of type "job" are not expected here`},
		{"top-level attribute", "principal = \"p\"\n" + session + tool, `:1,1: Unsupported argument`},
		{"task block in a policy", session + tool + "task \"t\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n}\n", `:8,1: a task block does not belong in a policy, which holds one session block and tool blocks (a task manifest is run with mandate run)`},
		{"a task manifest", "task \"t\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n}\n", `:1,1: this is a task manifest (a task block), not a policy: use mandate run`},
		{"cap unknown kernel attribute", toolWith(md + "  cap \"net\" \"x\" {\n    label = \"pii\"\n  }\n"), `:8,5: label is reserved for the kernel and not supported yet`},
		{"cap bad rate", toolWith(md + "  cap \"net\" \"x\" {\n    rate = \"10/fortnight\"\n  }\n"), `:8,12: rate "10/fortnight": unknown unit "fortnight"`},
		{"cap audit not bool", toolWith(md + "  cap \"net\" \"x\" {\n    audit = \"yes\"\n  }\n"), `:8,13: audit must be true or false, not "yes"`},
		{"cap max_uses zero", toolWith(md + "  cap \"net\" \"x\" {\n    max_uses = 0\n  }\n"), `:8,16: max_uses must be a whole number of at least 1`},
		{"cap when not CEL", toolWith(md + "  cap \"net\" \"x\" {\n    approve_when = 5\n  }\n"), `:8,20: approve_when must be a CEL expression or a list of them`},
		{"cap nested block", toolWith(md + "  cap \"net\" \"x\" {\n    headers {}\n  }\n"), `:8,5: Unexpected "headers" block`},
		{"cap duplicate name", toolWith(md + "  cap \"net\" \"x\" {}\n  cap \"data\" \"x\" {}\n"), `:8,14: duplicate capability name "x"; the first is at `},
		{"upstream tool without a cap", toolWith("  upstream = \"read_file\"\n"), `:5,14: an upstream tool holds exactly one capability, a cap "mcp" block naming its server (it has 0)`},
		{"upstream tool with two caps", toolWith("  upstream = \"read_file\"\n  cap \"mcp\" \"a\" {}\n  cap \"mcp\" \"b\" {}\n"), `:5,14: an upstream tool holds exactly one capability`},
		{"upstream tool with a net cap", toolWith("  upstream = \"read_file\"\n  cap \"net\" \"a\" {}\n"), `:6,7: an upstream tool's capability is a cap "mcp" block, not "net"`},
		{"upstream tool with a module", toolWith("  upstream = \"read_file\"\n" + md + "  cap \"mcp\" \"a\" {}\n"), `Unsupported argument: An argument named "module" is not expected here`},
		{"upstream tool with an input_schema", toolWith("  upstream = \"read_file\"\n  input_schema = { type = \"object\" }\n  cap \"mcp\" \"a\" {}\n"), `:6,3: Unsupported argument: An argument named "input_schema" is not expected here`},
		{"upstream name with a space", toolWith("  upstream = \"read file\"\n  cap \"mcp\" \"a\" {}\n"), `:5,14: upstream "read file" is not a tool name`},
		{"upstream empty", toolWith("  upstream = \"\"\n  cap \"mcp\" \"a\" {}\n"), `:5,14: upstream must not be empty`},
		{"cap empty name", toolWith(md + "  cap \"net\" \"\" {}\n"), `:7,13: capability name must be 1 to 256 bytes`},
		{"unset var", toolWith(md + "  cap \"net\" \"x\" {\n    origin = var.origin\n  }\n"), `:8,14: variable "origin" is not set: pass --var origin=VALUE`},
		{"unset var in input_schema", toolWith(md + "  input_schema = { type = var.kind }\n"), `:7,27: variable "kind" is not set`},
		{"function call", toolWith("  module = \"guest.wasm\"\n  description = upper(\"d\")\n"), `:6,17: Function calls not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writePolicy(t, tt.src)
			_, err := LoadPolicy(p, nil)
			if err == nil {
				t.Fatalf("got no error, want %q", tt.want)
			}
			var me *Error
			if !errors.As(err, &me) {
				t.Fatalf("got %T %v, want *Error", err, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, p+":") {
				t.Errorf("got %q, want it to start with %q", msg, p+":")
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("got %q, want it to contain %q", msg, tt.want)
			}
		})
	}
}

// A cap with the same name in two tools is fine: each tool's calls get
// their own capability table.
func TestPolicyCapNamesPerTool(t *testing.T) {
	src := "session {\n  principal = \"p\"\n}\n"
	for _, n := range []string{"a", "b"} {
		src += fmt.Sprintf("tool %q {\n  module = \"guest.wasm\"\n  description = \"d\"\n  cap \"net\" \"web\" {}\n}\n", n)
	}
	pol, err := LoadPolicy(writePolicy(t, src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pol.Tools) != 2 || pol.Tools[0].Caps[0].Name != "web" || pol.Tools[1].Caps[0].Name != "web" {
		t.Errorf("tools %+v", pol.Tools)
	}
}

// Every problem is reported at once, in every block.
func TestLoadPolicyReportsEveryProblem(t *testing.T) {
	src := "session {\n  principal = 1\n}\n" +
		"tool \"a b\" {\n  module = \"guest.wasm\"\n  description = \"\"\n}\n" +
		"tool \"c\" {\n  module = \"nope\"\n  description = \"d\"\n  result = \"x\"\n}\n" +
		"tool \"c\" {\n  module = \"guest.wasm\"\n  description = \"d\"\n}\n"
	p := writePolicy(t, src)
	_, err := LoadPolicy(p, nil)
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		p + ":2,15: principal must be a string, not number",
		p + `:4,6: tool name "a b" must be`,
		p + ":6,17: description must not be empty",
		p + `:9,12: module "nope": no such file or directory`,
		p + `:11,12: result "x" is not a result mode`,
		p + `:13,6: duplicate tool name "c"`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: got %q, want %q...", i+1, lines[i], w)
		}
	}
}

// A policy given to Load, and a task manifest given to LoadPolicy, are
// refused with the command that takes them.
func TestPolicyOrManifest(t *testing.T) {
	p := writePolicy(t, fullPolicy)
	_, err := Load(p, map[string]string{"origin": "x"})
	if err == nil || err.Error() != p+":2,1: this is a policy (session and tool blocks), not a task manifest: use mandate mcp serve" {
		t.Errorf("Load(policy) = %v", err)
	}
	p = writePolicy(t, "tool \"t\" {}\n")
	if _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), p+":1,1: this is a policy") {
		t.Errorf("Load(a tool block) = %v", err)
	}
	// A task manifest with a stray session block is a task manifest with
	// an unsupported block.
	p = write(t, "task \"t\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n}\nsession {}\n")
	if _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), p+":5,1: Unsupported block type") {
		t.Errorf("Load(task and session) = %v", err)
	}

	p = write(t, full)
	_, err = LoadPolicy(p, map[string]string{"origin": "x"})
	if err == nil || err.Error() != p+":1,1: this is a task manifest (a task block), not a policy: use mandate run" {
		t.Errorf("LoadPolicy(manifest) = %v", err)
	}
}

func TestToolGrants(t *testing.T) {
	k := fakeGranter{"net": fakeKind{"net"}}
	env := kindapi.GrantContext{LookupEnv: func(n string) (string, bool) { return "tok", n == "TOKEN" }}
	head := "session {\n  principal = \"p\"\n}\ntool \"t\" {\n  module = \"guest.wasm\"\n  description = \"d\"\n" // lines 1-6
	pol, err := LoadPolicy(writePolicy(t, head+"  cap \"net\" \"a\" {\n    origin = \"https://a.example\"\n    audit = true\n    max_uses = 2\n  }\n  cap \"net\" \"b\" {\n    headers = [{ env = \"TOKEN\" }]\n  }\n}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	grants, err := pol.Tools[0].GrantsWith(k, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(grants) != 2 || grants[0].Name != "a" || grants[0].Kind != "net" || !grants[0].Audit || grants[0].Allowance.MaxUses != 2 ||
		grants[1].Name != "b" || grants[1].Audit {
		t.Errorf("grants %+v", grants)
	}
	if _, err := pol.Tools[0].Grants(fakeGranter{}); err == nil || !strings.Contains(err.Error(), ":7,7: unknown capability kind \"net\"") {
		t.Errorf("Grants with no kinds: %v", err)
	}

	for _, tt := range []struct{ name, cap, want string }{
		{"field error", "  cap \"net\" \"x\" {\n    origin = \"http://a@b\"\n  }\n", `:8,14: cap "net" "x": origin: userinfo is not allowed`},
		{"nested field error", "  cap \"net\" \"x\" {\n    headers = [{ env = \"NOPE\" }]\n  }\n", `:8,15: cap "net" "x": headers[0].env: variable NOPE is not set`},
		{"other error", "  cap \"net\" \"x\" {\n    origin = \"boom\"\n  }\n", `:7,3: cap "net" "x": boom`},
		{"constraint", "  cap \"net\" \"x\" {\n    when = \"bad\"\n  }\n", `:8,12: cap "net" "x": syntax error`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := writePolicy(t, head+tt.cap+"}\n")
			pol, err := LoadPolicy(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = pol.Tools[0].GrantsWith(k, env)
			if err == nil || !strings.Contains(err.Error(), p+tt.want) {
				t.Errorf("got %v, want %q", err, p+tt.want)
			}
		})
	}
}

// The real kinds take a tool's cap blocks as they take a task's.
func TestToolGrantsRealKinds(t *testing.T) {
	p := writePolicy(t, fullPolicy)
	pol, err := LoadPolicy(p, map[string]string{"origin": "https://docs.example"})
	if err != nil {
		t.Fatal(err)
	}
	g := newKindsGranter()
	for _, tl := range pol.Tools {
		grants, err := tl.GrantsWith(g, kindapi.GrantContext{})
		if err != nil {
			t.Fatalf("tool %s: %v", tl.Name, err)
		}
		if len(grants) != len(tl.Caps) {
			t.Fatalf("tool %s: %d grants for %d caps", tl.Name, len(grants), len(tl.Caps))
		}
	}
}

func TestToolCheckDigestAndModuleError(t *testing.T) {
	p := writePolicy(t, fullPolicy)
	pol, err := LoadPolicy(p, map[string]string{"origin": "x"})
	if err != nil {
		t.Fatal(err)
	}
	a, b := pol.Tools[0], pol.Tools[1]
	if err := a.CheckDigest(a.Digest); err != nil {
		t.Errorf("matching digest: %v", err)
	}
	if err := b.CheckDigest("sha256:ff"); err != nil {
		t.Errorf("unpinned: %v", err)
	}
	err = a.CheckDigest("sha256:ff")
	if err == nil || err.Error() != p+":17,17: module tools/benefits has digest sha256:ff, but the policy pins sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
		t.Errorf("CheckDigest: %v", err)
	}
	if err := b.ModuleError(errors.New("not a module")); err == nil || err.Error() != p+":43,18: module guest.wasm: not a module" {
		t.Errorf("ModuleError: %v", err)
	}
	if err := b.Error(errors.New("busy")); err == nil || err.Error() != p+`:42,1: tool "search.flights-v2": busy` {
		t.Errorf("Error: %v", err)
	}
	if err := pol.Session.Seeds[0].Error(errors.New("bad record")); err == nil || !strings.HasPrefix(err.Error(), p+`:9,3: seed "benefits": bad record`) {
		t.Errorf("Seed.Error: %v", err)
	}
}

// TestPolicyGrammarIsComplete: PolicyGrammar names every block and
// attribute LoadPolicy accepts (the schemas and the kernel's cap
// attributes), and the package doc's Policies section holds it, line for
// line.
func TestPolicyGrammarIsComplete(t *testing.T) {
	named := func(name string, block bool) bool {
		pat := `(?m)^\s*` + regexp.QuoteMeta(name) + `\s*=`
		if block {
			pat = `(?m)^\s*` + regexp.QuoteMeta(name) + `\s*("[^"]*"\s*)*\{`
		}
		return regexp.MustCompile(pat).MatchString(PolicyGrammar)
	}
	for _, s := range []*hcl.BodySchema{policyRootSchema, sessionSchema, toolSchema, upstreamToolSchema, seedSchema, limitsSchema} {
		for _, a := range s.Attributes {
			if !named(a.Name, false) {
				t.Errorf("PolicyGrammar does not name attribute %q", a.Name)
			}
		}
		for _, b := range s.Blocks {
			if !named(b.Type, true) {
				t.Errorf("PolicyGrammar does not name block %q", b.Type)
			}
		}
	}
	for a := range kernelAttrs {
		if !named(a, false) {
			t.Errorf("PolicyGrammar does not name the kernel's cap attribute %q", a)
		}
	}
	for _, m := range []string{ResultValue, ResultReference, ApprovalPerson, ApprovalClient} {
		if !strings.Contains(PolicyGrammar, `"`+m+`"`) {
			t.Errorf("PolicyGrammar does not name the result mode %q", m)
		}
	}

	f, err := goparser.ParseFile(token.NewFileSet(), "doc.go", nil, goparser.ParseComments|goparser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	var want strings.Builder
	for _, l := range strings.Split(strings.TrimRight(PolicyGrammar, "\n"), "\n") {
		if l != "" {
			want.WriteString("\t" + l)
		}
		want.WriteString("\n")
	}
	i := strings.Index(doc, "# Policies\n")
	if i < 0 || !strings.Contains(doc[i:], want.String()) {
		t.Errorf("the package doc's Policies section does not hold PolicyGrammar; want it to hold:\n%s", want.String())
	}
}

// PolicyGrammar, with its placeholders filled in, is a valid policy.
func TestPolicyGrammarParses(t *testing.T) {
	dir := policyDir(t)
	src := strings.ReplaceAll(PolicyGrammar, "...                       # every other attribute is the kind's grant spec", "")
	src = strings.ReplaceAll(src, `"sha256:<hex>"`, `"sha256:`+strings.Repeat("0", 64)+`"`)
	src = strings.Replace(src, `tool "NAME"`, `tool "benefits"`, 1)
	src = strings.Replace(src, `tool "NAME"`, `tool "reports"`, 1)
	src = strings.ReplaceAll(src, `cap "KIND" "NAME"`, `cap "pay" "card"`)
	pol, err := ParsePolicy([]byte(src), "grammar.hcl", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pol.Tools) != 2 || pol.Tools[1].Upstream != "read_text_file" || pol.Session.Principal != "alice" || pol.Session.Limits().Timeout != 8*time.Hour ||
		string(pol.Tools[0].InputSchema) != `{"properties":{"year":{"type":"integer"}},"required":["year"],"type":"object"}` {
		t.Errorf("got %+v, tool %+v", pol, pol.Tools[0])
	}
}

// FuzzParsePolicy: a policy is a user's file. Parsing never panics; a
// failure is an *Error with a message; parsing is deterministic; a policy
// that parses is valid (a principal, one or more tools with distinct
// valid names, printable descriptions, canonical object input schemas, a
// known result mode, limits within bounds, and cap blocks as valid as a
// task's), and granting its tools with the real kinds never panics and
// fails only with a positioned *Error.
func FuzzParsePolicy(f *testing.F) {
	f.Add(fullPolicy, "https://docs.example")
	for _, s := range []string{
		``, `session {}`, `tool "" {}`, "task \"a\" {\n module = \"guest.wasm\"\n principal = \"p\"\n}\n",
		"session {\n principal = \"p\"\n}\ntool \"t\" {\n module = \"guest.wasm\"\n description = \"d\"\n}\n",
		"session {\n principal = var.origin\n clearance = []\n limits {\n timeout = \"1h\"\n }\n seed \"c\" {\n file = \"data/benefits.json\"\n }\n}\ntool \"t\" {\n module = \"tools/benefits\"\n description = var.origin\n input_schema = var.origin\n result = \"reference\"\n}\n",
		"session {\n principal = \"p\"\n}\nsession {\n principal = \"q\"\n}\ntool \"a b\" {\n module = \"guest.wasm\"\n description = \"\\u0000\"\n}\ntool \"a b\" {}\n",
		"session {\n principal = \"p\"\n}\ntool \"t\" {\n module = \"guest.wasm\"\n description = \"d\"\n input_schema = { type = \"object\", properties = { a = { type = \"string\" } }, required = [\"a\"] }\n cap \"net\" \"web\" {\n origin = \"https://a.example\"\n when = \"request.method == 'GET'\"\n max_uses = 1\n }\n cap \"net\" \"web\" {}\n}\n",
		"session {\n principal = \"p\"\n}\ntool \"t\" {\n module = \"guest.wasm\"\n description = \"d\"\n input_schema = \"{\\\"type\\\":\\\"object\\\",\\\"x\\\":1e400}\"\n cap \"pay\" \"card\" {\n provider = \"https://pay.example\"\n instrument = { env = \"T\" }\n payees = [\"a.example\"]\n currency = \"USD\"\n budget = \"10\"\n }\n}\n",
		"session {\n principal = \"p\"\n}\ntool \"t\" {\n module = \"guest.wasm\"\n description = \"d\"\n input_schema = \"[]\"\n result = \"blob\"\n limits {\n memory = 0\n }\n cap \"x\" \"\" {\n label = 1\n }\n}\ntask \"x\" {}\n",
	} {
		f.Add(s, "https://a.example")
	}
	dir := policyDir(f)
	g := newKindsGranter()
	gc := kindapi.GrantContext{Dir: dir, LookupEnv: func(string) (string, bool) { return "a-token", true }}
	f.Fuzz(func(t *testing.T, src, v string) {
		if len(src) > MaxSize {
			return
		}
		vars := map[string]string{"origin": v}
		pol, err := ParsePolicy([]byte(src), "fuzz.hcl", dir, vars)
		pol2, err2 := ParsePolicy([]byte(src), "fuzz.hcl", dir, vars)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) || !reflect.DeepEqual(pol, pol2) {
			t.Fatalf("ParsePolicy(%q) is not deterministic: %v then %v", src, err, err2)
		}
		if err != nil {
			var me *Error
			if !errors.As(err, &me) || err.Error() == "" || err.Error() == "manifest: unknown error" {
				t.Fatalf("ParsePolicy(%q): error %T %q", src, err, err)
			}
			return
		}
		if strings.TrimSpace(pol.Session.Principal) == "" || len(pol.Tools) == 0 {
			t.Fatalf("ParsePolicy(%q) = %+v: no principal or no tools", src, pol)
		}
		checkLimits := func(l kernel.Limits) {
			if l.Memory > MaxMemory || l.MaxOutput > MaxOutput || l.MaxBlobBytes > MaxBlobBytes || l.Timeout < 0 || l.MaxHandles < 0 || l.MaxHandles > kernel.MaxHandles {
				t.Fatalf("ParsePolicy(%q): limits %+v out of bounds", src, l)
			}
		}
		checkLimits(pol.Session.Limits())
		names := map[string]bool{}
		for _, tl := range pol.Tools {
			if !regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`).MatchString(tl.Name) || names[tl.Name] {
				t.Fatalf("ParsePolicy(%q): tool name %q", src, tl.Name)
			}
			names[tl.Name] = true
			if strings.TrimSpace(tl.Description) == "" || checkDescription(tl.Description) != nil || tl.ModulePath == "" {
				t.Fatalf("ParsePolicy(%q): tool %q description %q module %q", src, tl.Name, tl.Description, tl.ModulePath)
			}
			if tl.Result != ResultValue && tl.Result != ResultReference {
				t.Fatalf("ParsePolicy(%q): tool %q result %q", src, tl.Name, tl.Result)
			}
			var schema map[string]any
			if err := json.Unmarshal(tl.InputSchema, &schema); err != nil || schema["type"] != "object" {
				t.Fatalf("ParsePolicy(%q): tool %q schema %s: %v", src, tl.Name, tl.InputSchema, err)
			}
			if again, err := canonicalSchema(tl.InputSchema); err != nil || string(again) != string(tl.InputSchema) {
				t.Fatalf("ParsePolicy(%q): tool %q schema %s is not canonical: %s, %v", src, tl.Name, tl.InputSchema, again, err)
			}
			checkLimits(tl.Limits())
			seen := map[string]bool{}
			for _, c := range tl.Caps {
				if c.Kind == "" || c.Name == "" || len(c.Name) > abi.MaxNameLen || seen[c.Name] {
					t.Fatalf("ParsePolicy(%q): cap %q %q", src, c.Kind, c.Name)
				}
				seen[c.Name] = true
				var spec map[string]json.RawMessage
				if err := json.Unmarshal(c.Spec, &spec); err != nil || spec == nil {
					t.Fatalf("ParsePolicy(%q): cap %q spec %s is not an object: %v", src, c.Name, c.Spec, err)
				}
				for _, k := range []string{"audit", "when", "approve_when", "label", "rate", "max_uses", "budget"} {
					if _, ok := spec[k]; ok {
						t.Fatalf("ParsePolicy(%q): cap %q spec %s has the kernel's %s", src, c.Name, c.Spec, k)
					}
				}
			}
			grants, err := tl.GrantsWith(g, gc)
			if err != nil {
				var me *Error
				if !errors.As(err, &me) || err.Error() == "" {
					t.Fatalf("ParsePolicy(%q): GrantsWith error %T %q", src, err, err)
				}
				continue
			}
			if len(grants) != len(tl.Caps) {
				t.Fatalf("ParsePolicy(%q): %d grants for %d caps", src, len(grants), len(tl.Caps))
			}
		}
	})
}
