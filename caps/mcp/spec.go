package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/mandatevm/mandate/caps/internal/labelrule"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/egress"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// Defaults and bounds of a grant spec. A spec past a bound is a grant
// error, never clamped.
const (
	DefaultTimeout          = 2 * time.Minute
	MaxTimeout              = 30 * time.Minute
	DefaultMaxRequestBytes  = 4 << 20
	DefaultMaxResponseBytes = 4 << 20
	MaxRequestBytesLimit    = abi.MaxBlobLen // the arguments with their splices
	MaxResponseBytesLimit   = abi.MaxBlobLen / 2
	DefaultMaxTools         = 256
	MaxMaxTools             = 4096
	MaxPatterns             = 256
	MaxHeaders              = 16
	MaxCommandArgs          = 256
	MaxEnv                  = 64
	MaxCost                 = 1 << 40
)

// source and headerSpec name where a header's secret is read from, as
// net's headers do.
type headerSpec struct {
	Name   string `json:"name"`
	Env    string `json:"env"`
	File   string `json:"file"`
	Prefix string `json:"prefix"`
}

// grantSpec is a cap "mcp" block as JSON.
type grantSpec struct {
	URL              *string                    `json:"url"`
	AllowPrivate     *bool                      `json:"allow_private"`
	Headers          []headerSpec               `json:"headers"`
	Command          []string                   `json:"command"`
	Env              []string                   `json:"env"`
	Dir              *string                    `json:"dir"`
	Tools            []string                   `json:"tools"`
	Pins             map[string]string          `json:"pins"`
	Results          map[string]json.RawMessage `json:"results"`
	Clearance        []string                   `json:"clearance"`
	AcceptsUntrusted *bool                      `json:"accepts_untrusted"`
	RefusesTaints    []string                   `json:"refuses_taints"`
	Resources        []string                   `json:"resources"`
	Prompts          []string                   `json:"prompts"`
	Costs            map[string]int64           `json:"costs"`
	Timeout          *string                    `json:"timeout"`
	MaxRequestBytes  *abi.Size                  `json:"max_request_bytes"`
	MaxResponseBytes *abi.Size                  `json:"max_response_bytes"`
	MaxTools         *int                       `json:"max_tools"`
}

// narrowReq is a cap_derive request; absent fields keep the parent's.
// pins, results and costs are inherited: a request may repeat them,
// never change them.
type narrowReq struct {
	Tools            []string                   `json:"tools"`
	Resources        []string                   `json:"resources"`
	Prompts          []string                   `json:"prompts"`
	Clearance        []string                   `json:"clearance"`
	AcceptsUntrusted *bool                      `json:"accepts_untrusted"`
	RefusesTaints    []string                   `json:"refuses_taints"`
	Timeout          *string                    `json:"timeout"`
	MaxRequestBytes  *abi.Size                  `json:"max_request_bytes"`
	MaxResponseBytes *abi.Size                  `json:"max_response_bytes"`
	MaxTools         *int                       `json:"max_tools"`
	Pins             map[string]string          `json:"pins"`
	Results          map[string]json.RawMessage `json:"results"`
	Costs            map[string]int64           `json:"costs"`
}

// checkName validates a tool or prompt name or pattern: printable, no
// space, at most abi.MaxMCPNameLen bytes; "*" is the only wildcard.
func checkPattern(p string, max int) error {
	if p == "" || len(p) > max {
		return fmt.Errorf("%s: length must be 1..%d", kindapi.QuoteTrunc(p), max)
	}
	for _, r := range p {
		if r <= 0x20 || r == 0x7f || unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%s: printable characters without spaces only", kindapi.QuoteTrunc(p))
		}
	}
	return nil
}

// canonPatterns validates, sorts and deduplicates a list of names or
// patterns.
func canonPatterns(ps []string, max int, required bool) ([]string, error) {
	if required && len(ps) == 0 {
		return nil, fmt.Errorf("must name at least one")
	}
	if len(ps) > MaxPatterns {
		return nil, fmt.Errorf("%d entries (max %d)", len(ps), MaxPatterns)
	}
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if err := checkPattern(p, max); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// parseDigest validates a pin: a digest as sandbox.Digest writes one,
// "sha256:" and 64 lower-case hex digits.
func parseDigest(d string) error {
	if !sandbox.IsDigest(d) {
		return fmt.Errorf("%s is not a digest (want sha256: and 64 lower-case hex digits)", kindapi.QuoteTrunc(d))
	}
	return nil
}

// grant mints a root scope.
func (k *Kind) grant(g kindapi.GrantContext, spec []byte) (*Scope, error) {
	var sp grantSpec
	if err := kindapi.DecodeSpec(KindName, spec, &sp); err != nil {
		return nil, err
	}
	fe := func(field, format string, args ...any) error {
		return &kindapi.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	s := &Scope{timeout: k.defTimeout, maxRequest: DefaultMaxRequestBytes, maxResponse: DefaultMaxResponseBytes, maxTools: DefaultMaxTools}
	id := sha256.New() // the server's identity: what shares a connection
	switch {
	case sp.URL != nil && sp.Command != nil:
		return nil, fe("url", "set one of url and command, not both")
	case sp.URL != nil:
		if sp.Env != nil || sp.Dir != nil {
			return nil, fe("env", "env and dir are for a command (stdio); a url server has none")
		}
		u, err := egress.ParseBaseURL(*sp.URL, "headers")
		if err != nil {
			return nil, fe("url", "%v", err)
		}
		s.url = u.String()
		if s.url == u.Scheme+"://"+u.Host {
			s.url += "/"
		}
		if sp.AllowPrivate != nil {
			s.allowPrivate = *sp.AllowPrivate
		}
		if !s.allowPrivate {
			if why := egress.HostReason(u.Hostname()); why != "" {
				return nil, fe("url", "the server %s is %s; set allow_private = true to allow it", u.Hostname(), why)
			}
		}
		if len(sp.Headers) > MaxHeaders {
			return nil, fe("headers", "%d headers (max %d)", len(sp.Headers), MaxHeaders)
		}
		for i, h := range sp.Headers {
			inj, err := readHeader(g, fmt.Sprintf("headers[%d]", i), h)
			if err != nil {
				return nil, err
			}
			if slices.ContainsFunc(s.headers, func(p header) bool { return strings.EqualFold(p.name, inj.name) }) {
				return nil, fe(fmt.Sprintf("headers[%d].name", i), "header %s is given twice", inj.name)
			}
			s.headers = append(s.headers, inj)
		}
		slices.SortFunc(s.headers, func(a, b header) int { return strings.Compare(a.name, b.name) })
		s.identity = s.url
		fmt.Fprintf(id, "url\x00%s\x00%t\x00", s.url, s.allowPrivate)
		for _, h := range s.headers {
			fmt.Fprintf(id, "%s\x00%s\x00", h.name, h.value.Value())
		}
	case sp.Command != nil:
		if sp.AllowPrivate != nil || sp.Headers != nil {
			return nil, fe("headers", "headers and allow_private are for a url server; a command has none")
		}
		if len(sp.Command) == 0 || sp.Command[0] == "" {
			return nil, fe("command", "must name a program")
		}
		if len(sp.Command) > MaxCommandArgs {
			return nil, fe("command", "%d arguments (max %d)", len(sp.Command), MaxCommandArgs)
		}
		for i, a := range sp.Command {
			if strings.ContainsRune(a, 0) {
				return nil, fe(fmt.Sprintf("command[%d]", i), "has a NUL byte")
			}
		}
		path := sp.Command[0]
		if !filepath.IsAbs(path) && strings.ContainsRune(path, filepath.Separator) && g.Dir != "" {
			path = filepath.Join(g.Dir, path)
		}
		abs, err := k.lookPath(g, path)
		if err != nil {
			return nil, fe("command", "%s: %v", kindapi.QuoteTrunc(sp.Command[0]), err)
		}
		s.command = append([]string{abs}, sp.Command[1:]...)
		if len(sp.Env) > MaxEnv {
			return nil, fe("env", "%d variables (max %d)", len(sp.Env), MaxEnv)
		}
		names := slices.Clone(sp.Env)
		slices.Sort(names)
		names = slices.Compact(names)
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, "=\x00") {
				return nil, fe("env", "%s is not a variable name", kindapi.QuoteTrunc(n))
			}
			v, ok := g.Getenv(n)
			if !ok {
				return nil, fe("env", "environment variable %s is not set (the server is given exactly the variables env names)", n)
			}
			s.env = append(s.env, envVar{name: n, value: kindapi.NewSecret(v)})
		}
		if sp.Dir != nil {
			d := *sp.Dir
			if !filepath.IsAbs(d) && g.Dir != "" {
				d = filepath.Join(g.Dir, d)
			}
			if d, err = filepath.Abs(d); err != nil {
				return nil, fe("dir", "%v", err)
			}
			s.dir = d
		}
		s.identity = "stdio:" + filepath.Base(abs)
		fmt.Fprintf(id, "stdio\x00%d\x00", len(s.command))
		for _, a := range s.command {
			fmt.Fprintf(id, "%s\x00", a)
		}
		for _, e := range s.env {
			fmt.Fprintf(id, "%s=%s\x00", e.name, e.value.Value())
		}
		fmt.Fprintf(id, "dir\x00%s", s.dir)
	default:
		return nil, fe("url", "required: the server's url (Streamable HTTP) or its command (stdio)")
	}
	var err error
	if sp.Tools == nil {
		return nil, fe("tools", "required: the tool names or patterns (\"list_*\") the capability allows")
	}
	if s.tools, err = canonPatterns(sp.Tools, abi.MaxMCPNameLen, true); err != nil {
		return nil, fe("tools", "%v", err)
	}
	if len(sp.Pins) > MaxPatterns*4 {
		return nil, fe("pins", "%d pins (max %d)", len(sp.Pins), MaxPatterns*4)
	}
	s.pins = map[string]string{}
	for name, d := range sp.Pins {
		f := "pins[" + kindapi.QuoteTrunc(name) + "]"
		if err := checkPattern(name, abi.MaxMCPNameLen); err != nil || strings.Contains(name, "*") {
			return nil, fe(f, "a pin names one tool, not a pattern")
		}
		if !matchAny(s.tools, name) {
			return nil, fe(f, "tool %s is not among the tools the capability allows", kindapi.QuoteTrunc(name))
		}
		if err := parseDigest(d); err != nil {
			return nil, fe(f, "%v", err)
		}
		s.pins[name] = d
	}
	if s.results, err = parseResults(sp.Results, s.defaultTaint()); err != nil {
		return nil, err
	}
	s.clearance = kindapi.NewLabel(sp.Clearance, nil)
	if s.refusal, err = kindapi.ParseRefusal(sp.AcceptsUntrusted, sp.RefusesTaints); err != nil {
		return nil, fe("refuses_taints", "%v", err)
	}
	if s.resources, err = canonPatterns(sp.Resources, abi.MaxMCPURILen, false); err != nil {
		return nil, fe("resources", "%v", err)
	}
	if s.prompts, err = canonPatterns(sp.Prompts, abi.MaxMCPNameLen, false); err != nil {
		return nil, fe("prompts", "%v", err)
	}
	if len(sp.Costs) > MaxPatterns {
		return nil, fe("costs", "%d entries (max %d)", len(sp.Costs), MaxPatterns)
	}
	s.costs = map[string]int64{}
	for name, c := range sp.Costs {
		f := "costs[" + kindapi.QuoteTrunc(name) + "]"
		if err := checkPattern(name, abi.MaxMCPNameLen); err != nil {
			return nil, fe(f, "%v", err)
		}
		if c < 0 || c > MaxCost {
			return nil, fe(f, "%d must be in [0, %d] calls", c, int64(MaxCost))
		}
		s.costs[name] = c
	}
	if sp.Timeout != nil {
		if s.timeout, err = kindapi.ParseTimeout(*sp.Timeout, MaxTimeout); err != nil {
			return nil, fe("timeout", "%v", err)
		}
	}
	if sp.MaxRequestBytes != nil {
		if v := int64(*sp.MaxRequestBytes); v < 1 || v > MaxRequestBytesLimit {
			return nil, fe("max_request_bytes", "must be in [1, %d]", MaxRequestBytesLimit)
		}
		s.maxRequest = int64(*sp.MaxRequestBytes)
	}
	if sp.MaxResponseBytes != nil {
		if v := int64(*sp.MaxResponseBytes); v < 1 || v > MaxResponseBytesLimit {
			return nil, fe("max_response_bytes", "must be in [1, %d]", MaxResponseBytesLimit)
		}
		s.maxResponse = int64(*sp.MaxResponseBytes)
	}
	if sp.MaxTools != nil {
		if *sp.MaxTools < 1 || *sp.MaxTools > MaxMaxTools {
			return nil, fe("max_tools", "must be in [1, %d]", MaxMaxTools)
		}
		s.maxTools = *sp.MaxTools
	}
	// The connection reads at most the grant's bound in one message,
	// whatever its children lower it to: they share it.
	s.frameBound = s.maxResponse
	fmt.Fprintf(id, "\x00bound\x00%d", s.frameBound)
	s.key = hex.EncodeToString(id.Sum(nil))
	return s, nil
}

// lookPath resolves a command's program in mandate's own PATH (the grant
// context's), to an absolute path.
func (k *Kind) lookPath(g kindapi.GrantContext, name string) (string, error) {
	if strings.ContainsRune(name, filepath.Separator) {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", err
		}
		return filepath.Abs(p)
	}
	pathVar, _ := g.Getenv("PATH")
	for _, dir := range filepath.SplitList(pathVar) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // a relative PATH entry would depend on the working directory
		}
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in PATH")
}

// readHeader reads an injected header's secret through the grant context.
// Errors name the field and the variable or file, never the value.
func readHeader(g kindapi.GrantContext, field string, h headerSpec) (header, error) {
	fe := func(sub, format string, args ...any) error {
		return &kindapi.FieldError{Field: field + sub, Msg: fmt.Sprintf(format, args...)}
	}
	name, ok := canonHeaderName(h.Name)
	if !ok {
		return header{}, fe(".name", "%s is not a valid header name", kindapi.QuoteTrunc(h.Name))
	}
	if reservedHeader(name) {
		return header{}, fe(".name", "%s is set by the transport or the MCP protocol", name)
	}
	raw, where, err := g.ReadSecret(kindapi.SecretSource{Env: h.Env, File: h.File}, "the value of header "+name)
	if err != nil {
		return header{}, kindapi.Prefixed(field, err)
	}
	value := h.Prefix + raw
	if !validHeaderValue(value) {
		return header{}, fe("", "the value of header %s has a control character or newline", name)
	}
	hd := header{name: name, value: kindapi.NewSecret(value), source: where}
	switch {
	case len(raw) >= minProbeLen:
		hd.probe = kindapi.NewSecret(raw)
	case len(value) >= minProbeLen:
		hd.probe = kindapi.NewSecret(value)
	}
	return hd, nil
}

// narrow returns the scope req asks for within parent: EINVAL for a
// malformed request, EDENIED naming every field that would widen parent.
func (k *Kind) narrow(parent *Scope, req []byte) (*Scope, error) {
	var r narrowReq
	if err := kindapi.DecodeNarrow(KindName, req, &r); err != nil {
		return nil, err
	}
	inval := func(field, format string, args ...any) error {
		return kindapi.Errorf(abi.EINVAL, "mcp: narrowing request: %s: %s", field, fmt.Sprintf(format, args...))
	}
	child := *parent
	var widen []string
	subset := func(field string, req, par []string, max int, dst *[]string) error {
		if req == nil {
			return nil
		}
		ps, err := canonPatterns(req, max, false)
		if err != nil {
			return inval(field, "%v", err)
		}
		for _, p := range ps {
			if !covered(par, p) {
				widen = append(widen, fmt.Sprintf("%s %s is not within the parent's %v", field, kindapi.QuoteTrunc(p), par))
			}
		}
		*dst = ps
		return nil
	}
	if err := subset("tools", r.Tools, parent.tools, abi.MaxMCPNameLen, &child.tools); err != nil {
		return nil, err
	}
	if err := subset("resources", r.Resources, parent.resources, abi.MaxMCPURILen, &child.resources); err != nil {
		return nil, err
	}
	if err := subset("prompts", r.Prompts, parent.prompts, abi.MaxMCPNameLen, &child.prompts); err != nil {
		return nil, err
	}
	if r.Clearance != nil {
		c := kindapi.NewLabel(r.Clearance, nil)
		if !c.CanFlowTo(parent.clearance) {
			widen = append(widen, fmt.Sprintf("clearance %v is above the parent's %v", c.Conf(), parent.clearance.Conf()))
		}
		child.clearance = c
	}
	refusal, drops, err := parent.refusal.Narrow(r.AcceptsUntrusted, r.RefusesTaints)
	if err != nil {
		return nil, inval("refuses_taints", "%v", err)
	}
	child.refusal, widen = refusal, append(widen, drops...)
	if r.Timeout != nil {
		d, err := kindapi.ParseTimeout(*r.Timeout, MaxTimeout)
		if err != nil {
			return nil, inval("timeout", "%v", err)
		}
		if d > parent.timeout {
			widen = append(widen, fmt.Sprintf("timeout %s is above the parent's %s", d, parent.timeout))
		}
		child.timeout = d
	}
	limit := func(field string, v *abi.Size, parentV int64, dst *int64) error {
		if v == nil {
			return nil
		}
		if *v < 1 {
			return inval(field, "must be positive")
		}
		if int64(*v) > parentV {
			widen = append(widen, fmt.Sprintf("%s %d is above the parent's %d", field, *v, parentV))
		}
		*dst = int64(*v)
		return nil
	}
	if err := limit("max_request_bytes", r.MaxRequestBytes, parent.maxRequest, &child.maxRequest); err != nil {
		return nil, err
	}
	if err := limit("max_response_bytes", r.MaxResponseBytes, parent.maxResponse, &child.maxResponse); err != nil {
		return nil, err
	}
	if r.MaxTools != nil {
		if *r.MaxTools < 1 {
			return nil, inval("max_tools", "must be positive")
		}
		if *r.MaxTools > parent.maxTools {
			widen = append(widen, fmt.Sprintf("max_tools %d is above the parent's %d", *r.MaxTools, parent.maxTools))
		}
		child.maxTools = *r.MaxTools
	}
	if r.Pins != nil && !maps.Equal(r.Pins, parent.pins) {
		widen = append(widen, "pins are inherited and cannot be changed by narrowing")
	}
	if r.Costs != nil && !maps.Equal(r.Costs, parent.costs) {
		widen = append(widen, "costs are inherited and cannot be changed by narrowing")
	}
	if r.Results != nil {
		rs, err := parseResults(r.Results, parent.defaultTaint())
		if err != nil {
			return nil, inval("results", "%v", err)
		}
		if !equalResults(rs, parent.results) {
			widen = append(widen, "results are inherited and cannot be changed by narrowing (a different taint is not narrower)")
		}
	}
	if len(widen) > 0 {
		return nil, kindapi.Errorf(abi.EDENIED, "mcp: narrowing would widen the capability: %s", strings.Join(widen, "; "))
	}
	return &child, nil
}

// resultRule is a parsed results entry: the tools (or "resource:" URIs,
// "prompt:" names) a pattern names, and how their results are labelled.
type resultRule struct {
	pattern string
	rule    labelrule.Rule
}

// parseResults parses a grant's results. Errors are *kindapi.FieldError
// naming the entry.
func parseResults(raw map[string]json.RawMessage, defTaint string) ([]resultRule, error) {
	if len(raw) > MaxPatterns {
		return nil, &kindapi.FieldError{Field: "results", Msg: fmt.Sprintf("%d entries (max %d)", len(raw), MaxPatterns)}
	}
	keys := slices.Sorted(maps.Keys(raw))
	out := make([]resultRule, 0, len(keys))
	for _, key := range keys {
		field := "results[" + kindapi.QuoteTrunc(key) + "]"
		if err := checkPattern(key, abi.MaxMCPURILen+len("resource:")); err != nil {
			return nil, &kindapi.FieldError{Field: field, Msg: err.Error()}
		}
		r, err := labelrule.Parse(raw[key], field, defTaint)
		if err != nil {
			return nil, err
		}
		out = append(out, resultRule{pattern: key, rule: r})
	}
	return out, nil
}

func equalResults(a, b []resultRule) bool {
	return slices.EqualFunc(a, b, func(x, y resultRule) bool { return x.pattern == y.pattern && labelrule.Equal(x.rule, y.rule) })
}
