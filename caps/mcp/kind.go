package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mandatevm/mandate/caps/internal/httpservice"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// KindName is the name the kind registers under.
const KindName = "mcp"

// The operations of an mcp capability (see the package documentation).
const (
	OpCall      = abi.MCPCallOp
	OpTools     = abi.MCPToolsOp
	OpResources = abi.MCPResourcesOp
	OpRead      = abi.MCPReadOp
	OpPrompts   = abi.MCPPromptsOp
	OpPrompt    = abi.MCPPromptOp
)

// Kind is the mcp capability kind. It is safe for concurrent use. Make
// one with New, and Close it when the runs that use it end: it keeps the
// upstream connections and processes.
type Kind struct {
	defTimeout time.Duration
	log        hclog.Logger
	clients    *httpservice.Clients

	mu     sync.Mutex
	ups    map[string]*upstream // by Scope.key
	closed bool
	// done ends with Close: a connection being made gives up.
	done     context.Context
	stopDone context.CancelFunc
}

var _ kindapi.Kind = (*Kind)(nil)

// Option configures a Kind.
type Option func(*Kind)

// WithLogger sets where the kind logs (a stdio server's stderr among
// it); the default discards.
func WithLogger(l hclog.Logger) Option {
	return func(k *Kind) {
		if l != nil {
			k.log = l
		}
	}
}

// WithDefaultTimeout sets the timeout of grants that name none (default
// DefaultTimeout); values outside (0, MaxTimeout] are ignored.
func WithDefaultTimeout(d time.Duration) Option {
	return func(k *Kind) {
		if d > 0 && d <= MaxTimeout {
			k.defTimeout = d
		}
	}
}

// New returns the mcp kind. Its HTTP clients are the egress guard's: no
// environment proxy, no cookies, no redirects followed, every address
// checked.
func New(opts ...Option) *Kind {
	k := &Kind{defTimeout: DefaultTimeout, log: hclog.NewNullLogger(), ups: map[string]*upstream{}}
	k.done, k.stopDone = context.WithCancel(context.Background())
	for _, o := range opts {
		o(k)
	}
	redirect := errors.New("mcp: the server redirected; requests are never re-sent elsewhere")
	k.clients = httpservice.NewClients("mcp: server", redirect)
	return k
}

// Name returns "mcp".
func (k *Kind) Name() string { return KindName }

// vars are what when and approve_when see: the tool and its arguments.
var vars = []string{"tool", "args"}

// Info implements kindapi.Kind: the six operations; constraints see tool
// and args; amounts are calls (costs weighs them).
func (k *Kind) Info() kindapi.Info {
	return kindapi.Info{Ops: []string{OpCall, OpTools, OpResources, OpRead, OpPrompts, OpPrompt}, Vars: vars, Amounts: calls{}}
}

// calls reads and shows amounts: a whole number of calls.
type calls struct{}

func (calls) ParseAmount(_ kindapi.Scope, text string) (int64, error) {
	t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(text), "calls"))
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > MaxCost {
		return 0, fmt.Errorf("%s is not a positive number of calls", kindapi.QuoteTrunc(text))
	}
	return n, nil
}

func (calls) FormatAmount(_ kindapi.Scope, n int64) string {
	return strconv.FormatInt(n, 10) + " calls"
}

// Grant mints a root scope from a cap "mcp" block (see the package
// documentation). Errors are *kindapi.FieldError when they concern one
// field. A command is resolved to an absolute path, and the environment
// it is given read, here: nothing is started.
func (k *Kind) Grant(g kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	return kindapi.AsScope(k.grant(g, spec))
}

// Narrow returns the scope req asks for within parent. A malformed request
// is EINVAL; one that would widen parent is EDENIED naming what widened.
func (k *Kind) Narrow(parent kindapi.Scope, req []byte) (kindapi.Scope, error) {
	p, err := kindapi.ScopeAs[*Scope](parent, KindName)
	if err != nil {
		return nil, err
	}
	return kindapi.AsScope(k.narrow(p, req))
}

// Describe implements kindapi.Kind.
func (k *Kind) Describe(sc kindapi.Scope) kindapi.Description {
	s, err := kindapi.ScopeAs[*Scope](sc, KindName)
	if err != nil {
		return kindapi.Description{}
	}
	d := kindapi.Description{
		Fields:  []kindapi.Detail{{Name: "upstream", Value: s.identity}},
		Sink:    s.refusal.Sink(s.clearance),
		Label:   s.labelBound(),
		Reaches: []string{s.identity},
		// A tool may change things: calling it again is a second effect.
		NotRepeatable: "an upstream tool may change things, and a call repeated is a second call",
	}
	add := func(name, value string) { d.Fields = append(d.Fields, kindapi.Detail{Name: name, Value: value}) }
	if s.url != "" {
		add("url", s.url)
	} else {
		add("command", strings.Join(s.command, " "))
		if len(s.env) > 0 {
			names := make([]string, len(s.env))
			for i, e := range s.env {
				names[i] = e.name
			}
			add("env", strings.Join(names, ","))
		}
		if s.dir != "" {
			add("dir", s.dir)
		}
	}
	add("tools", strings.Join(s.tools, ","))
	if len(s.pins) > 0 {
		names := slices.Sorted(maps.Keys(s.pins))
		var b strings.Builder
		for i, n := range names {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(n + " " + s.pins[n])
		}
		add("pins", b.String())
	}
	if len(s.headers) > 0 {
		var hs []string
		for _, h := range s.headers {
			hs = append(hs, h.name+" from "+h.source)
		}
		add("headers", strings.Join(hs, ",")+" (set by the kernel)")
	}
	if c := s.clearance.Conf(); len(c) > 0 {
		add("clearance", strings.Join(c, ","))
	}
	d.Fields = append(d.Fields, s.refusal.Details()...)
	if len(s.results) > 0 {
		var b strings.Builder
		for i := range s.results {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(s.results[i].pattern + ": ")
			s.results[i].rule.Describe(&b)
		}
		add("results", b.String())
	}
	if len(s.resources) > 0 {
		add("resources", strings.Join(s.resources, ","))
	}
	if len(s.prompts) > 0 {
		add("prompts", strings.Join(s.prompts, ","))
	}
	if len(s.costs) > 0 {
		names := slices.Sorted(maps.Keys(s.costs))
		var cs []string
		for _, n := range names {
			cs = append(cs, n+"="+strconv.FormatInt(s.costs[n], 10))
		}
		add("costs", strings.Join(cs, ","))
	}
	if s.timeout != k.defTimeout {
		add("timeout", s.timeout.String())
	}
	if s.maxRequest != DefaultMaxRequestBytes {
		add("max_request_bytes", kindapi.FormatBytes(s.maxRequest))
	}
	if s.maxResponse != DefaultMaxResponseBytes {
		add("max_response_bytes", kindapi.FormatBytes(s.maxResponse))
	}
	if s.maxTools != DefaultMaxTools {
		add("max_tools", strconv.Itoa(s.maxTools))
	}
	if s.allowPrivate {
		add("allow_private", "true")
	}
	return d
}

// Definitions connects to the scope's upstream and lists every tool the
// grant's patterns allow, with its digest (what `mandate check` prints
// and what a mcp serve policy's upstream tool offers), sorted by name.
func (k *Kind) Definitions(ctx context.Context, sc kindapi.Scope) ([]Definition, error) {
	s, err := kindapi.ScopeAs[*Scope](sc, KindName)
	if err != nil {
		return nil, err
	}
	const what = "mcp: tools"
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	u, err := k.upstreamFor(s)
	if err != nil {
		return nil, err
	}
	sess, err := u.session(ctx, what)
	if err != nil {
		return nil, err
	}
	defs, err := u.listTools(ctx, sess, s.maxTools, what)
	if err != nil {
		return nil, err
	}
	u.ok()
	var out []Definition
	for name, d := range defs {
		if s.AllowsTool(name) {
			out = append(out, Definition{Name: name, Digest: d.digest, Def: slices.Clone(d.canon), Pin: s.pins[name]})
		}
	}
	slices.SortFunc(out, func(a, b Definition) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
