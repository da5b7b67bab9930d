package manifest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// write puts a manifest and a dummy module in a fresh directory and
// returns the manifest's path.
func write(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "guest.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "guestdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "run.hcl")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const full = `task "quickstart" {
  module    = "guest.wasm"
  digest    = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  principal = "alice"
  entry     = "run"
  limits {
    memory  = "64MiB"
    timeout = "30s"
    handles = 256
    output  = 4096
    blobs   = "8MiB"
    stored_output = "64KiB"
    functions        = 30000
    locals           = 2000
    nesting          = 3000
    br_table_targets = 6000
    function_size    = "2MiB"
    compile_memory   = "512MiB"
  }
  cap "net" "flights" {
    origin        = var.origin
    methods       = ["GET"]
    paths         = ["/search"]
    allow_private = true
    max_response_bytes = 1024
    headers       = [{ name = "Authorization", env = "FLIGHTS_TOKEN", prefix = "Bearer " }]
    audit         = true
    rate          = "10/m"
    ignored       = null
  }
  cap "net" "other" {}
}
`

func TestLoad(t *testing.T) {
	p := write(t, full)
	m, err := Load(p, map[string]string{"origin": "http://127.0.0.1:1234"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "quickstart" || m.Principal != "alice" || m.Entry != "run" || m.ModuleIsDir {
		t.Errorf("got %+v", m)
	}
	want, _ := filepath.EvalSymlinks(filepath.Join(filepath.Dir(p), "guest.wasm"))
	if m.ModulePath != want {
		t.Errorf("ModulePath: got %q, want %q", m.ModulePath, want)
	}
	wantLimits := kernel.Limits{Memory: 64 << 20, Timeout: 30 * time.Second, MaxHandles: 256, MaxOutput: 4096, MaxBlobBytes: 8 << 20, MaxStoredOutput: 64 << 10,
		Functions: 30000, Locals: 2000, Nesting: 3000, BrTableTargets: 6000, FunctionSize: 2 << 20, CompileMemory: 512 << 20}
	if m.Limits() != wantLimits {
		t.Errorf("Limits: got %+v, want %+v", m.Limits(), wantLimits)
	}
	if len(m.Caps) != 2 {
		t.Fatalf("got %d caps, want 2", len(m.Caps))
	}
	c := m.Caps[0]
	if c.Kind != "net" || c.Name != "flights" || !c.Audit || c.Rate != (kernel.Rate{N: 10, Per: time.Minute}) {
		t.Errorf("cap: got %+v", c)
	}
	var spec map[string]any
	if err := json.Unmarshal(c.Spec, &spec); err != nil {
		t.Fatalf("spec %s: %v", c.Spec, err)
	}
	wantSpec := `{"allow_private":true,"headers":[{"env":"FLIGHTS_TOKEN","name":"Authorization","prefix":"Bearer "}],"max_response_bytes":1024,"methods":["GET"],"origin":"http://127.0.0.1:1234","paths":["/search"]}`
	if got, _ := json.Marshal(spec); string(got) != wantSpec {
		t.Errorf("spec:\n got %s\nwant %s", got, wantSpec)
	}
	if string(m.Caps[1].Spec) != "{}" {
		t.Errorf("empty spec: got %s", m.Caps[1].Spec)
	}
}

func TestLoadDirModule(t *testing.T) {
	p := write(t, `task "x" {
  module = "guestdir"
  principal = "bob"
}`)
	m, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !m.ModuleIsDir || m.Limits() != (kernel.Limits{}) || len(m.Caps) != 0 {
		t.Errorf("got %+v", m)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		vars map[string]string
		want string // ":LINE,COL: message" fragment
	}{
		{"syntax", "task \"x\" {\n  module = \n}", nil, ":2,"},
		{"no task", "# nothing\n", nil, `no task block`},
		{"two tasks", "task \"a\" {\n module = \"guest.wasm\"\n principal = \"p\"\n}\ntask \"b\" {\n module = \"guest.wasm\"\n principal = \"p\"\n}\n", nil, ":5,1: only one task block"},
		{"unknown top-level", "job \"a\" {}\n", nil, ":1,1: Unsupported block type"},
		{"unknown attribute", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  modul = \"x\"\n}\n", nil, `:4,3: Unsupported argument: An argument named "modul" is not expected here`},
		{"missing module", "task \"a\" {\n  principal = \"p\"\n}\n", nil, `:1,10: Missing required argument: The argument "module" is required`},
		{"missing principal", "task \"a\" {\n  module = \"guest.wasm\"\n}\n", nil, `:1,10: Missing required argument: The argument "principal" is required`},
		{"empty principal", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"\"\n}\n", nil, `:3,15: principal must not be empty`},
		{"module not a string", "task \"a\" {\n  module = 5\n  principal = \"p\"\n}\n", nil, `:2,12: module must be a string, not number`},
		{"module missing", "task \"a\" {\n  module = \"nope.wasm\"\n  principal = \"p\"\n}\n", nil, `:2,12: module "nope.wasm": no such file or directory`},
		{"bad digest", "task \"a\" {\n  module = \"guest.wasm\"\n  digest = \"md5:00\"\n  principal = \"p\"\n}\n", nil, `:3,12: digest "md5:00" is not of the form`},
		{"bad size", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    memory = \"64 parsecs\"\n  }\n}\n", nil, `:5,14: memory: "64 parsecs" has an unknown unit "parsecs"`},
		{"size not a number", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    output = 1.5\n  }\n}\n", nil, `:5,14: output must be a size such as "64MiB" or a whole number of bytes, not 1.5`},
		{"zero size", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    memory = 0\n  }\n}\n", nil, `:5,14: memory = 0 bytes is out of range`},
		{"huge memory", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    memory = \"5GiB\"\n  }\n}\n", nil, `:5,14: memory = 5368709120 bytes is out of range`},
		{"bad duration", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    timeout = \"soon\"\n  }\n}\n", nil, `:5,15: timeout "soon" is not a duration`},
		{"negative duration", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    timeout = \"-1s\"\n  }\n}\n", nil, `:5,15: timeout "-1s" must be positive`},
		{"bad handles", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    handles = 1e9\n  }\n}\n", nil, `:5,15: handles = 1000000000 is out of range`},
		{"zero functions", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    functions = 0\n  }\n}\n", nil, `:5,17: functions = 0 is out of range: 1 to 1000000`},
		{"huge functions", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    functions = 2000000\n  }\n}\n", nil, `:5,17: functions = 2000000 is out of range: 1 to 1000000`},
		{"locals past wasmtime's", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    locals = 50001\n  }\n}\n", nil, `:5,14: locals = 50001 is out of range: 1 to 50000`},
		{"nesting not a number", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    nesting = \"deep\"\n  }\n}\n", nil, `:5,15: nesting must be a whole number, not "deep"`},
		{"fractional br_table_targets", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    br_table_targets = 1.5\n  }\n}\n", nil, `:5,24: br_table_targets must be a whole number, not 1.5`},
		{"huge function_size", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    function_size = \"1GiB\"\n  }\n}\n", nil, `:5,21: function_size = 1073741824 bytes is out of range: 1 to 67108864`},
		{"bad compile_memory", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    compile_memory = \"lots\"\n  }\n}\n", nil, `:5,22: compile_memory: `},
		{"zero compile_memory", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    compile_memory = 0\n  }\n}\n", nil, `:5,22: compile_memory = 0 bytes is out of range`},
		{"unknown limit", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    cpu = 1\n  }\n}\n", nil, `:5,5: Unsupported argument`},
		{"two limits", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {}\n  limits {}\n}\n", nil, `:5,3: only one limits block`},
		{"duplicate cap", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"x\" {}\n  cap \"data\" \"x\" {}\n}\n", nil, `:5,14: duplicate capability name "x"; the first is at`},
		{"cap missing label", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" {}\n}\n", nil, `:4,`},
		{"cap nested block", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"x\" {\n    headers {}\n  }\n}\n", nil, `:5,5: Unexpected "headers" block`},
		{"cap when not a string", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"x\" {\n    when = 5\n  }\n}\n", nil, `:5,12: when must be a CEL expression or a list of them`},
		{"cap label", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"x\" {\n    label = \"pii\"\n  }\n}\n", nil, `:5,5: label is reserved`},
		{"task clearance", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  clearance = 5\n}\n", nil, `:4,15: clearance must be a list of confidentiality tags`},
		{"bad rate", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"x\" {\n    rate = \"10/fortnight\"\n  }\n}\n", nil, `:5,12: rate "10/fortnight": unknown unit "fortnight"`},
		{"rate not a string", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"x\" {\n    rate = 10\n  }\n}\n", nil, `:5,12: rate must be a string`},
		{"zero blobs", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    blobs = 0\n  }\n}\n", nil, `:5,13: blobs = 0 bytes is out of range`},
		{"zero stored_output", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    stored_output = 0\n  }\n}\n", nil, `:5,21: stored_output = 0 bytes is out of range`},
		{"stored_output not a size", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  limits {\n    stored_output = \"lots\"\n  }\n}\n", nil, `:5,21: stored_output: `},
		{"audit not bool", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"x\" {\n    audit = \"yes\"\n  }\n}\n", nil, `:5,13: audit must be true or false, not "yes"`},
		{"unset var", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"x\" {\n    origin = var.origin\n  }\n}\n", nil, `:5,14: variable "origin" is not set: pass --var origin=VALUE`},
		{"unset var in template", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"x\" {\n    origin = \"http://${var.host}\"\n  }\n}\n", map[string]string{"origin": "x"}, `:5,24: variable "host" is not set`},
		{"other variable root", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = local.p\n}\n", nil, `:3,15: unknown variable "local"`},
		{"function call", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = upper(\"p\")\n}\n", nil, `:3,15: Function calls not allowed`},
		{"type error", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"x\" {\n    paths = 1 + \"a\"\n  }\n}\n", nil, `:5,17: Invalid operand`},
		{"empty cap name", "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"\" {}\n}\n", nil, `:4,13: capability name must be 1 to 256 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := write(t, tt.src)
			_, err := Load(p, tt.vars)
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

func TestLoadReportsEveryProblem(t *testing.T) {
	p := write(t, "task \"a\" {\n  module = 1\n  principal = 2\n}\n")
	_, err := Load(p, nil)
	if err == nil {
		t.Fatal("no error")
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != 2 {
		t.Errorf("got %d lines %q, want 2", len(lines), lines)
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		err  bool
	}{
		{"0", 0, false},
		{"1048576", 1 << 20, false},
		{"12B", 12, false},
		{"64MiB", 64 << 20, false},
		{"64 mib", 64 << 20, false},
		{"2KiB", 2048, false},
		{"3GiB", 3 << 30, false},
		{"5KB", 5000, false},
		{"5MB", 5000000, false},
		{"1GB", 1000000000, false},
		{"", 0, true},
		{"MiB", 0, true},
		{"-1", 0, true},
		{"1.5MiB", 0, true},
		{"1TiB", 0, true},
		{"99999999999999999999", 0, true},
		{"99999999999GiB", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, error %t", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestCheckDigest(t *testing.T) {
	p := write(t, full)
	m, err := Load(p, map[string]string{"origin": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckDigest(m.Digest); err != nil {
		t.Errorf("matching digest: %v", err)
	}
	err = m.CheckDigest("sha256:ff")
	if err == nil || !strings.Contains(err.Error(), p+":3,15: module guest.wasm has digest sha256:ff, but the manifest pins sha256:0123") {
		t.Errorf("got %v", err)
	}
}

// fakeKind refuses origins containing "@" with a FieldError and "boom"
// with a plain error.
type fakeKind struct{ name string }

type fakeScope struct{ spec string }

func (s fakeScope) MarshalJSON() ([]byte, error)  { return []byte(s.spec), nil }
func (s fakeScope) Contains(o kindapi.Scope) bool { return false }

func (k fakeKind) Name() string       { return k.name }
func (k fakeKind) Info() kindapi.Info { return kindapi.Info{} }
func (k fakeKind) Narrow(kindapi.Scope, []byte) (kindapi.Scope, error) {
	return nil, kindapi.ErrDenied
}
func (k fakeKind) Prepare(*kindapi.Call) (kindapi.Op, error)  { return kindapi.Op{}, kindapi.ErrNotSup }
func (k fakeKind) Describe(kindapi.Scope) kindapi.Description { return kindapi.Description{} }
func (k fakeKind) Grant(g kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	var v struct {
		Origin  string
		Headers []struct{ Env string }
	}
	if err := json.Unmarshal(spec, &v); err != nil {
		return nil, err
	}
	switch {
	case strings.Contains(v.Origin, "@"):
		return nil, &kindapi.FieldError{Field: "origin", Msg: "userinfo is not allowed"}
	case v.Origin == "boom":
		return nil, errors.New("boom")
	}
	for i, h := range v.Headers {
		if _, ok := g.Getenv(h.Env); !ok {
			return nil, &kindapi.FieldError{Field: "headers[" + string(rune('0'+i)) + "].env", Msg: "variable " + h.Env + " is not set"}
		}
	}
	return fakeScope{string(spec)}, nil
}

type fakeGranter map[string]kindapi.Kind

func (g fakeGranter) Kind(n string) (kindapi.Kind, bool) { k, ok := g[n]; return k, ok }
func (g fakeGranter) Kinds() []string                    { return []string{"net"} }
func (g fakeGranter) Grant(kind string, gc kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	return g[kind].Grant(gc, spec)
}

func (g fakeGranter) ParseBudget(kind string, s kindapi.Scope, text string) (int64, error) {
	return kindapi.ParseBudget(g[kind], s, text)
}

// CompileConstraints accepts any expression but "bad".
func (g fakeGranter) CompileConstraints(kind string, when, approveWhen []string) (kernel.Constraints, error) {
	for _, e := range append(when, approveWhen...) {
		if e == "bad" {
			return kernel.Constraints{}, errors.New("syntax error")
		}
	}
	return kernel.Constraints{}, nil
}

func TestGrants(t *testing.T) {
	k := fakeGranter{"net": fakeKind{"net"}}
	env := kindapi.GrantContext{LookupEnv: func(n string) (string, bool) { return "tok", n == "FLIGHTS_TOKEN" }}
	p := write(t, full)
	m, err := Load(p, map[string]string{"origin": "http://127.0.0.1:1234"})
	if err != nil {
		t.Fatal(err)
	}
	grants, err := m.GrantsWith(k, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(grants) != 2 || grants[0].Name != "flights" || grants[0].Kind != "net" || !grants[0].Audit || grants[1].Audit {
		t.Errorf("got %+v", grants)
	}

	tests := []struct {
		name string
		cap  string
		want string
	}{
		{"field error", "cap \"net\" \"x\" {\n  methods = [\"GET\"]\n  origin = \"http://a@b\"\n}", `:6,12: cap "net" "x": origin: userinfo is not allowed`},
		{"nested field error", "cap \"net\" \"x\" {\n  headers = [{ env = \"NOPE\" }]\n}", `:5,13: cap "net" "x": headers[0].env: variable NOPE is not set`},
		{"other error", "cap \"net\" \"x\" {\n  origin = \"boom\"\n}", `:4,1: cap "net" "x": boom`},
		{"unknown kind", "cap \"teleport\" \"x\" {}", `:4,5: unknown capability kind "teleport" (known: net)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := write(t, "task \"a\" {\nmodule = \"guest.wasm\"\nprincipal = \"p\"\n"+tt.cap+"\n}\n")
			m, err := Load(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.GrantsWith(k, env)
			if err == nil || !strings.Contains(err.Error(), p+tt.want) {
				t.Errorf("got %v, want %q", err, p+tt.want)
			}
		})
	}
}

// A constraint that does not compile is reported at its attribute, when
// the grants are minted (before anything runs).
func TestConstraintErrorPosition(t *testing.T) {
	src := "task \"a\" {\n  module = \"guest.wasm\"\n  principal = \"p\"\n  cap \"net\" \"x\" {\n    origin = \"https://a.example\"\n    approve_when = [\"true\", \"bad\"]\n  }\n}\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "guest.wasm"), []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Parse([]byte(src), "t.hcl", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Caps[0].ApproveWhen; len(got) != 2 {
		t.Fatalf("approve_when = %q", got)
	}
	_, err = m.GrantsWith(fakeGranter{"net": fakeKind{"net"}}, kindapi.GrantContext{})
	if err == nil || !strings.Contains(err.Error(), "t.hcl:6,20: ") || !strings.Contains(err.Error(), "syntax error") {
		t.Fatalf("got %v, want the error at t.hcl:6,20", err)
	}
}

// taskParser returns a parser of a task block holding body (besides its
// module, an empty .wasm file, and principal).
func taskParser(t *testing.T) func(body string) (*Manifest, error) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "g.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	return func(body string) (*Manifest, error) {
		src := "task \"t\" {\n  module = \"g.wasm\"\n  principal = \"alice\"\n" + body + "}\n"
		return Parse([]byte(src), "t.hcl", dir, nil)
	}
}

func TestResultBlock(t *testing.T) {
	parse := taskParser(t)
	m, err := parse("  result {\n    accepts_untrusted = false\n  }\n")
	if err != nil {
		t.Fatal(err)
	}
	if !m.RefuseTaintedResult {
		t.Error("result { accepts_untrusted = false } not read")
	}
	if m, err := parse(""); err != nil || m.RefuseTaintedResult {
		t.Errorf("no result block: %v %v", m, err)
	}
	for _, bad := range []string{
		"  result {\n    accepts_untrusted = \"no\"\n  }\n",
		"  result {\n    other = 1\n  }\n",
		"  result {}\n  result {}\n",
		"  result \"x\" {}\n",
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

// TestRetry: retry is a whole number from 1 to MaxRetry; absent is 0.
func TestRetry(t *testing.T) {
	parse := taskParser(t)
	for body, want := range map[string]int{"": 0, "  retry = 1\n": 1, "  retry = 5\n": 5} {
		m, err := parse(body)
		if err != nil || m.Retry != want {
			t.Errorf("%q: retry %v, %v; want %d", body, m, err, want)
		}
	}
	for _, bad := range []string{"  retry = 0\n", "  retry = 6\n", "  retry = 1.5\n", "  retry = \"1\"\n", "  retry = -1\n", "  retry = true\n"} {
		if _, err := parse(bad); err == nil || !strings.Contains(err.Error(), "retry must be a whole number from 1 to 5") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
