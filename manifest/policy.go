package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// PolicyGrammar is the policy grammar, annotated: the package doc's
// "Policies" section and "mandate mcp serve --help" print this text, and
// a test checks that it names every block and attribute LoadPolicy
// accepts.
const PolicyGrammar = `session {                     # exactly one
  principal = "alice"         # required: on whose behalf every tool acts
  clearance = ["pii:alice"]   # optional: the most the session (the client's model) may ever be shown
  label_ttl = "24h"           # optional Go duration: a client's label (what its model was shown, kept across
                              # its sessions) is dropped when a session starts this long after its last raise;
                              # default: kept until "mandate mcp reset CLIENT"

  limits {                    # optional, at most one: the whole session's
    memory  = "64MiB"         # size: B, KiB, MiB, GiB, KB, MB, GB; a plain integer is bytes
    timeout = "8h"            # Go duration: the session's lifetime
    handles = 256             # capability table size
    output  = "1MiB"          # bytes kept of each of stdout and stderr
    blobs   = "64MiB"         # bytes of blobs held at once
    stored_output = "1MiB"    # bytes the run store keeps of each result and output (default 1MiB)
    # Each tool's module, before it is compiled (a tool's own limits take precedence):
    functions        = 25000    # functions it defines (default 25000)
    locals           = 1000     # locals of one function, parameters included (default 1000)
    nesting          = 2500     # depth of blocks, loops and ifs in one function (default 2500)
    br_table_targets = 5000     # targets of one br_table (default 5000)
    function_size    = "1MiB"   # bytes of one function body (default 1MiB)
    compile_memory   = "1GiB"   # memory compiling it may use (default 1GiB)
  }

  seed "COLLECTION" {         # any number: records imported into the data store before the session
    file      = "data/benefits.json"        # .json or .csv, relative to the policy
    relations = { manager = "manager_of" }  # optional: FIELD = RELATION edges to derive
  }
}

tool "NAME" {                 # one or more; NAME is the MCP tool name: 1 to 64 of A-Z a-z 0-9 _ . -
  module       = "tools/benefits"  # required: a .wasm file, or a Go guest directory (relative to the policy)
  digest       = "sha256:<hex>"    # optional pin: the module must have this digest
  entry        = "run"             # optional: the function a reactor module runs
  description  = "Your own benefits record"  # required: what the client is shown (never taken from a guest)
  input_schema = {                 # optional JSON Schema of the arguments, as an object or a string
    type       = "object"          # holding JSON; its type must be "object"; default { type = "object" }
    properties = { year = { type = "integer" } }
    required   = ["year"]
  }
  result       = "value"           # optional: "value" (default), or "reference": a mandate://blob reference
  responses    = { labels = [] }   # optional: what its results carry in place of what was sent to its sinks
                                   # (taint, labels; only with pay caps and net caps without labels or responses)
  approval     = "person"          # optional: who answers its approvals: "person" (default: out of band, on
                                   # mandate ui's page or with mandate approvals) or "client": the MCP
                                   # client's form, whose yes a model-driven client can give itself (never with a pay cap)

  limits {                    # optional, at most one: each call's, as in the session's limits
    memory  = "64MiB"
    timeout = "30s"
  }

  cap "KIND" "NAME" {         # any number, as in a task manifest; NAME is what the guest passes to cap_lookup
    audit    = true           # kernel-level: write every decision to the audit log first
    rate     = "10/s"         # kernel-level: at most 10 calls a second, for this
                              # capability and everything derived from it (s, m, h, or a duration)
    max_uses = 1              # kernel-level: at most 1 effect, for the whole derivation subtree
    budget   = "100.00"       # kernel-level, kinds with amounts (pay): most spent by the subtree
    when         = "request.method == 'GET'"   # kernel-level: CEL (or a list), every use must satisfy it
    approve_when = "request.method == 'POST'"  # kernel-level: CEL (or a list), a match needs a person's yes
    approve_mints = true      # kernel-level: a call a person approved needs no second yes in this task
    approve_plans = true      # kernel-level: a task may name calls on it in a plan a person approves once (plan_submit)
    ...                       # every other attribute is the kind's grant spec
  }
}

tool "NAME" {                 # a tool of an MCP server people already run, instead of a module
  upstream    = "read_text_file"   # required: the upstream tool's name; its schema is the definition
                                   # the capability pins, and its description too unless given here
  description = "Read a report"    # optional; result, approval and limits as above
  cap "mcp" "fs" {            # exactly one, of kind mcp: the server (url or command), the tools it
    command = ["server-filesystem", "/data/reports"]  # allows and their pinned definitions (caps/mcp)
    tools   = ["read_text_file"]
    pins    = { read_text_file = "sha256:<hex>" }   # mandate check prints the digests to pin
  }
}
`

// Result modes of a tool: how a call's result goes back to the client.
const (
	// ResultValue returns the task's output itself.
	ResultValue = "value"
	// ResultReference returns a mandate://blob reference to the output.
	ResultReference = "reference"
)

// ToolResponses is a tool's responses attribute: what its results carry
// when shown to the client, in place of the confidentiality tags of what
// was sent to its sinks. Its grammar is a net capability's responses
// entry without fields: taint (an integrity taint added to the result's
// own) and labels (its confidentiality tags).
//
// It is a statement about the sinks: "the mail API answers a status, not
// what it was sent". So it is allowed only on a tool whose capabilities
// are all pay capabilities and net capabilities without labels or
// responses of their own (no confidential source in the tool): the only confidentiality a result can
// then carry beyond what the session has already seen comes from
// references the client passed, sent to the sink, and the sink's answer
// is declared not to carry it. Integrity taints are never dropped.
type ToolResponses struct {
	Taint  string   `json:"taint,omitempty"`
	Labels []string `json:"labels,omitempty"`
}

// Who answers a tool's approvals (Tool.Approval).
const (
	// ApprovalPerson asks the person out of band (mandate ui's approvals
	// page, mandate approvals): the MCP client's answer approves nothing.
	ApprovalPerson = "person"
	// ApprovalClient asks the MCP client's form: the client's yes, which
	// a model-driven client can give itself. Refused with a pay cap.
	ApprovalClient = "client"
)

// Bounds on a tool's name and description.
const (
	MaxToolName    = 64
	MaxDescription = 8 << 10
)

// Policy is a loaded, validated policy: what an MCP server offers a
// client, every tool call running as a fresh task. Its fields are set by
// LoadPolicy and must not be modified.
type Policy struct {
	// Path is the policy's file name as given to LoadPolicy; Dir is its
	// directory, absolute.
	Path string
	Dir  string
	// Session is the session block.
	Session Session
	// Tools are the tool blocks, in file order, with distinct names.
	Tools []*Tool
}

// Tool returns the tool named name, or nil.
func (p *Policy) Tool(name string) *Tool {
	for _, t := range p.Tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Session is a policy's session block: what holds for every call of the
// session.
type Session struct {
	// Principal is on whose behalf every tool acts.
	Principal string
	// Clearance bounds what the session (the client's model) may ever be
	// shown; nil: unbounded.
	Clearance *kindapi.Label
	// Seeds are the records imported into the data store before the
	// session starts.
	Seeds []Seed
	// LabelTTL, when set, is how long a client's label (what its model
	// was shown, kept across its sessions) lasts after its last raise: a
	// session that starts later starts unlabelled. Zero: until a person
	// resets it.
	LabelTTL time.Duration

	limits kernel.Limits
}

// Limits returns the whole session's limits (Timeout is its lifetime);
// zero fields are unset.
func (s *Session) Limits() kernel.Limits { return s.limits }

// Tool is one tool block: a tool the client may call, each call a fresh
// task running Module with the tool's capabilities.
type Tool struct {
	// Name is the MCP tool name, the block's label.
	Name string
	// Description is what the client is shown about the tool. An upstream
	// tool's may be empty: the client is then shown the definition its
	// capability pins.
	Description string
	// Upstream, when set, makes the tool a tool of an upstream MCP
	// server: the name of that server's tool, called on the tool's one
	// cap "mcp" block (caps/mcp), with no module of its own. Its input
	// schema (and description, unless the policy gives one) are the
	// definition the capability pins.
	Upstream string
	// ModulePath is the module attribute resolved against the policy's
	// directory, with symbolic links resolved: a .wasm file or a guest
	// directory (ModuleIsDir).
	ModulePath  string
	ModuleIsDir bool
	// Digest is the pinned "sha256:<hex>" digest, "" when not pinned.
	Digest string
	// Entry is the reactor entry, "" for the default.
	Entry string
	// InputSchema is the JSON Schema of the call's arguments, canonical
	// JSON (keys sorted, no insignificant space, numbers as written): an
	// object whose type is "object".
	InputSchema json.RawMessage
	// Result is ResultValue or ResultReference.
	Result string
	// Approval is ApprovalPerson or ApprovalClient.
	Approval string
	// Responses, when set, says what the tool's results carry, as the
	// answers of the sinks it sends to (the responses attribute); nil: a
	// result carries its task's label.
	Responses *ToolResponses
	// Caps are the cap blocks, in file order.
	Caps []Cap

	limits      kernel.Limits
	dir         string
	rng         hcl.Range
	moduleRange hcl.Range
	digestRange hcl.Range
}

// Limits returns each call's limits; zero fields take the kernel's
// defaults.
func (t *Tool) Limits() kernel.Limits { return t.limits }

// Grants mints the root scopes of the tool's cap blocks with k's kinds,
// reporting every refusal with its position as Manifest.Grants does.
// Secrets named by a grant are read from the host environment and
// relative to the policy's directory.
func (t *Tool) Grants(k Granter) ([]kernel.GrantSpec, error) {
	return t.GrantsWith(k, kindapi.GrantContext{Dir: t.dir})
}

// GrantsWith is Grants with a given grant context.
func (t *Tool) GrantsWith(k Granter, g kindapi.GrantContext) ([]kernel.GrantSpec, error) {
	return grantsWith(t.Caps, t.dir, k, g)
}

// CheckDigest reports whether digest (as sandbox.Digest computes it)
// matches the tool's pin, if any. The error points at the pin.
func (t *Tool) CheckDigest(digest string) error {
	return checkDigest(t.Digest, digest, t.digestRange, moduleName(t.dir, t.ModulePath), "policy")
}

// ModuleError returns an error about the tool's module (a failed build,
// an invalid .wasm file) positioned at its module attribute.
func (t *Tool) ModuleError(err error) error {
	return moduleError(t.moduleRange, moduleName(t.dir, t.ModulePath), err)
}

// Error positions an error about this tool at its block.
func (t *Tool) Error(err error) error {
	return &Error{Diags: hcl.Diagnostics{diagErr(t.rng, "tool %q: %v", t.Name, err)}}
}

var policyRootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "session"},
		{Type: "tool", LabelNames: []string{"name"}},
	},
}

// policyFileSchema is policyRootSchema and the task block, read only to be
// refused with a message that says what to do instead.
var policyFileSchema = &hcl.BodySchema{
	Blocks: append(append([]hcl.BlockHeaderSchema{}, policyRootSchema.Blocks...), rootSchema.Blocks...),
}

var sessionSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "principal", Required: true},
		{Name: "clearance"},
		{Name: "label_ttl"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "limits"},
		{Type: "seed", LabelNames: []string{"collection"}},
	},
}

var toolSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "module", Required: true},
		{Name: "digest"},
		{Name: "entry"},
		{Name: "description", Required: true},
		{Name: "input_schema"},
		{Name: "result"},
		{Name: "approval"},
		{Name: "responses"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "limits"},
		{Type: "cap", LabelNames: []string{"kind", "name"}},
	},
}

// upstreamToolSchema is a tool block with an upstream attribute: a tool of
// an upstream MCP server, whose definition (schema, description) its
// capability pins, and which runs no module.
var upstreamToolSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "upstream", Required: true},
		{Name: "description"},
		{Name: "result"},
		{Name: "approval"},
	},
	Blocks: toolSchema.Blocks,
}

// upstreamOnly is what tells an upstream tool block from a module's.
var upstreamOnly = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "upstream"}}}

// LoadPolicy reads, parses and validates the policy at path. vars are the
// values of var.NAME. As with Load, the cap blocks' specs are checked by
// their kinds in Tool.Grants. A failure is an *Error listing every
// problem (or an I/O error).
func LoadPolicy(path string, vars map[string]string) (*Policy, error) {
	src, dir, err := readFile(path, "policy")
	if err != nil {
		return nil, err
	}
	return ParsePolicy(src, path, dir, vars)
}

// ParsePolicy is LoadPolicy on a policy already in memory: filename is
// used in positions, dir is where relative paths resolve.
func ParsePolicy(src []byte, filename, dir string, vars map[string]string) (*Policy, error) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, &Error{Diags: diags}
	}
	p := newParser(dir, vars)
	pol := &Policy{Path: filename, Dir: dir}
	p.policy(file, pol)
	if p.diags.HasErrors() {
		return nil, &Error{Diags: p.diags}
	}
	return pol, nil
}

func (p *parser) policy(file *hcl.File, pol *Policy) {
	content, diags := bodyContent(file.Body, policyFileSchema)
	p.add(diags...)
	var sessions, tools, tasks []*hcl.Block
	for _, b := range content.Blocks {
		switch b.Type {
		case "session":
			sessions = append(sessions, b)
		case "tool":
			tools = append(tools, b)
		case "task":
			tasks = append(tasks, b)
		}
	}
	if len(tasks) > 0 && len(sessions) == 0 && len(tools) == 0 {
		p.add(diagErr(tasks[0].DefRange, "this is a task manifest (a task block), not a policy: use mandate run"))
		return
	}
	for _, b := range tasks {
		p.add(diagErr(b.DefRange, "a task block does not belong in a policy, which holds one session block and tool blocks (a task manifest is run with mandate run)"))
	}

	switch {
	case len(sessions) == 0:
		if !diags.HasErrors() {
			p.add(diagErr(file.Body.MissingItemRange(), "no session block: a policy holds one, session { principal = \"NAME\" ... }"))
		}
	default:
		for _, b := range sessions[1:] {
			p.add(diagErr(b.DefRange, "only one session block is allowed; the first is at %s", posString(sessions[0].DefRange)))
		}
		p.session(sessions[0], &pol.Session)
	}

	if len(tools) == 0 && !diags.HasErrors() {
		p.add(diagErr(file.Body.MissingItemRange(), "no tool block: a policy offers one or more tools, tool \"NAME\" { ... }"))
	}
	seen := make(map[string]hcl.Range)
	for _, b := range tools {
		name := b.Labels[0]
		if first, dup := seen[name]; dup {
			p.add(diagErr(b.LabelRanges[0], "duplicate tool name %q; the first is at %s", name, posString(first)))
			continue
		}
		seen[name] = b.LabelRanges[0]
		if t, ok := p.tool(b); ok {
			pol.Tools = append(pol.Tools, t)
		}
	}
}

func (p *parser) session(b *hcl.Block, s *Session) {
	content, diags := bodyContent(b.Body, sessionSchema)
	p.add(diags...)
	u := p.unit(content)
	s.Principal = u.principal
	s.Clearance = u.clearance
	s.Seeds = u.seeds
	s.limits = u.limits
	if a, ok := content.Attributes["label_ttl"]; ok {
		if v, ok := p.str(a, true); ok {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			switch {
			case err != nil:
				p.add(diagErr(a.Expr.Range(), `label_ttl %q is not a duration (examples: "24h", "30m", "168h")`, v))
			case d <= 0:
				p.add(diagErr(a.Expr.Range(), "label_ttl %q must be positive", v))
			default:
				s.LabelTTL = d
			}
		}
	}
}

func (p *parser) tool(b *hcl.Block) (*Tool, bool) {
	n := len(p.diags.Errs())
	t := &Tool{Name: b.Labels[0], Result: ResultValue, Approval: ApprovalPerson, dir: p.dir, rng: b.DefRange}
	if !validToolName(t.Name) {
		p.add(diagErr(b.LabelRanges[0], "tool name %q must be 1 to %d of the characters A-Z a-z 0-9 _ . -", t.Name, MaxToolName))
	}
	schema := toolSchema
	if c, _, _ := b.Body.PartialContent(upstreamOnly); c != nil && c.Attributes["upstream"] != nil {
		schema = upstreamToolSchema
	}
	content, diags := bodyContent(b.Body, schema)
	p.add(diags...)

	u := p.unit(content)
	if a, ok := content.Attributes["upstream"]; ok {
		p.upstream(a, t, u.caps)
	}
	t.ModulePath, t.ModuleIsDir, t.moduleRange = u.modulePath, u.moduleIsDir, u.moduleRange
	t.Digest, t.digestRange = u.digest, u.digestRange
	t.Entry = u.entry
	t.Caps = u.caps
	t.limits = u.limits

	if a, ok := content.Attributes["description"]; ok {
		if s, ok := p.str(a, true); ok {
			if err := checkDescription(s); err != nil {
				p.add(diagErr(a.Expr.Range(), "description %v", err))
			} else {
				t.Description = s
			}
		}
	}
	t.InputSchema = json.RawMessage(`{"type":"object"}`)
	if a, ok := content.Attributes["input_schema"]; ok {
		if js, ok := p.inputSchema(a); ok {
			t.InputSchema = js
		}
	}
	if a, ok := content.Attributes["result"]; ok {
		if s, ok := p.str(a, false); ok {
			switch s {
			case ResultValue, ResultReference:
				t.Result = s
			default:
				p.add(diagErr(a.Expr.Range(), "result %q is not a result mode: %q (the default) or %q", s, ResultValue, ResultReference))
			}
		}
	}
	if a, ok := content.Attributes["responses"]; ok {
		t.Responses = p.toolResponses(a, t)
	}
	if a, ok := content.Attributes["approval"]; ok {
		if s, ok := p.str(a, false); ok {
			switch s {
			case ApprovalPerson:
				t.Approval = s
			case ApprovalClient:
				t.Approval = s
				for _, c := range t.Caps {
					if c.Kind == "pay" {
						p.add(diagErr(a.Expr.Range(), "approval = %q with the pay capability %q: a payment is approved by the person, never by the client (whose yes a model-driven client can give itself)", s, c.Name))
					}
				}
			default:
				p.add(diagErr(a.Expr.Range(), "approval %q is not who answers approvals: %q (the default: the person, out of band) or %q (the MCP client's form)", s, ApprovalPerson, ApprovalClient))
			}
		}
	}
	return t, len(p.diags.Errs()) == n
}

// upstream reads an upstream tool's upstream attribute: the upstream
// tool's name, called on the tool's one capability, which must be of kind
// mcp (whose grant then says whether it allows that tool).
func (p *parser) upstream(a *hcl.Attribute, t *Tool, caps []Cap) {
	s, ok := p.str(a, true)
	if !ok {
		return
	}
	if len(s) > MaxToolName*2 || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) }) >= 0 {
		p.add(diagErr(a.Expr.Range(), "upstream %q is not a tool name (printable, no spaces, at most %d bytes)", s, MaxToolName*2))
		return
	}
	t.Upstream = s
	switch {
	case len(caps) != 1:
		p.add(diagErr(a.Expr.Range(), "an upstream tool holds exactly one capability, a cap \"mcp\" block naming its server (it has %d)", len(caps)))
	case caps[0].Kind != "mcp":
		p.add(diagErr(caps[0].kindRange, "an upstream tool's capability is a cap \"mcp\" block, not %q: the tool is a call on it", caps[0].Kind))
	}
}

// toolResponses reads a tool's responses attribute and checks the tool
// may have one (ToolResponses).
func (p *parser) toolResponses(a *hcl.Attribute, t *Tool) *ToolResponses {
	v, ok := p.eval(a.Expr)
	if !ok || v.IsNull() {
		return nil
	}
	raw, err := ctyjson.SimpleJSONValue{Value: v}.MarshalJSON()
	var r ToolResponses
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		err = dec.Decode(&r)
	}
	if err != nil {
		p.add(diagErr(a.Expr.Range(), "responses must be an object { taint = \"...\", labels = [\"...\"] }: %v", err))
		return nil
	}
	bad := func(s string) bool {
		return s == "" || strings.TrimSpace(s) != s || strings.Contains(s, "*") || strings.IndexFunc(s, unicode.IsControl) >= 0
	}
	if r.Taint != "" && bad(r.Taint) || r.Taint == "" && r.Labels == nil {
		p.add(diagErr(a.Expr.Range(), "responses: a taint (non-empty, no \"*\", spaces around or control characters) or labels"))
		return nil
	}
	for _, l := range r.Labels {
		if bad(l) {
			p.add(diagErr(a.Expr.Range(), "responses: label %q is not a confidentiality tag", l))
			return nil
		}
	}
	for _, c := range t.Caps {
		var spec map[string]json.RawMessage
		json.Unmarshal(c.Spec, &spec)
		_, labels := spec["labels"]
		_, resp := spec["responses"]
		if c.Kind != "net" && c.Kind != "pay" || labels || resp {
			p.add(diagErr(a.Expr.Range(), "responses on a tool whose cap %q %q could bring data of its own: "+
				"a tool's responses are allowed only with pay caps and net caps that have no labels or responses (it would launder what they read)", c.Kind, c.Name))
			return nil
		}
	}
	return &r
}

func validToolName(s string) bool {
	if s == "" || len(s) > MaxToolName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// checkDescription: a description is shown to a model and a person, so it
// is valid UTF-8 of graphic characters, spaces, tabs and newlines (no
// control or format characters, which could hide text), and bounded.
func checkDescription(s string) error {
	if len(s) > MaxDescription {
		return fmt.Errorf("is %d bytes, more than %d", len(s), MaxDescription)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && !unicode.IsGraphic(r) {
			return fmt.Errorf("holds the unprintable character %U", r)
		}
	}
	return nil
}

// inputSchema evaluates an input_schema attribute: an object, or a string
// holding a JSON object, whose "type" is "object". It returns the schema
// as canonical JSON.
func (p *parser) inputSchema(a *hcl.Attribute) (json.RawMessage, bool) {
	v, ok := p.eval(a.Expr)
	if !ok {
		return nil, false
	}
	var raw []byte
	switch {
	case v.IsNull():
		return nil, false // unset: the default
	case v.Type() == cty.String:
		raw = []byte(v.AsString())
		if !json.Valid(raw) {
			var x any
			err := json.Unmarshal(raw, &x)
			p.add(diagErr(a.Expr.Range(), "input_schema is not valid JSON: %v", err))
			return nil, false
		}
	case v.Type().IsObjectType() || v.Type().IsMapType():
		var err error
		raw, err = ctyjson.SimpleJSONValue{Value: v}.MarshalJSON()
		if err != nil {
			p.add(diagErr(a.Expr.Range(), "input_schema cannot be encoded as JSON: %v", err))
			return nil, false
		}
	default:
		p.add(diagErr(a.Expr.Range(), "input_schema must be a JSON Schema object, such as { type = \"object\" }, or a string holding one, not %s", typeName(v)))
		return nil, false
	}
	js, err := canonicalSchema(raw)
	if err != nil {
		p.add(diagErr(a.Expr.Range(), "input_schema %v", err))
		return nil, false
	}
	return js, true
}

// canonicalSchema checks that raw (valid JSON) is an object schema and
// re-encodes it canonically.
func canonicalSchema(raw []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, fmt.Errorf("is not valid JSON: %v", err)
	}
	if err := checkNumbers(x); err != nil {
		return nil, err
	}
	obj, ok := x.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a JSON object, not %s", jsonKind(x))
	}
	if t, ok := obj["type"]; !ok || t != "object" {
		return nil, fmt.Errorf(`must have "type": "object" (a tool's arguments are an object), not %s`, jsonShort(t, ok))
	}
	if props, ok := obj["properties"]; ok {
		if _, isObj := props.(map[string]any); !isObj {
			return nil, fmt.Errorf(`"properties" must be an object, not %s`, jsonKind(props))
		}
	}
	if req, ok := obj["required"]; ok {
		list, isList := req.([]any)
		if !isList {
			return nil, fmt.Errorf(`"required" must be a list of property names, not %s`, jsonKind(req))
		}
		for _, e := range list {
			if _, isStr := e.(string); !isStr {
				return nil, fmt.Errorf(`"required" must be a list of property names, not holding %s`, jsonKind(e))
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, fmt.Errorf("cannot be encoded as JSON: %v", err)
	}
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// checkNumbers refuses numbers a client cannot read as a double, such as
// 1e400.
func checkNumbers(x any) error {
	switch x := x.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return fmt.Errorf("holds the number %s, out of range", x)
		}
	case []any:
		for _, e := range x {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range x {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonKind(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", x)
}

func jsonShort(x any, present bool) string {
	if !present {
		return "no type"
	}
	if s, ok := x.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return jsonKind(x)
}
