package fakellm

import (
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"
)

// schemaAnswer is the JSON the model answers for the request's
// response_format, made of payload: valid for the json_schema, or, with
// violate, not. Without a json_schema it is {"text": payload} for
// json_object, and the JSON string payload when violating or when no JSON
// was asked for.
func schemaAnswer(req *ChatRequest, payload string, violate bool) []byte {
	f := req.ResponseFormat
	if f == nil || f.Type == "text" || violate && f.Type == "json_object" {
		return marshal(payload)
	}
	var root any
	if f.JSONSchema == nil || json.Unmarshal(f.JSONSchema.Schema, &root) != nil {
		return marshal(map[string]any{"text": payload})
	}
	g := gen{root: root, payload: payload, violate: violate}
	return marshal(g.value(root, 0))
}

// gen fills a JSON Schema with a payload, valid or violating, by the
// rules of the package doc (Compromised mode).
type gen struct {
	root    any
	payload string
	violate bool
	nodes   int             // values generated so far
	refs    map[string]bool // $refs being expanded: a cycle ends in null
}

// maxDepth bounds nesting; maxNodes bounds the values one answer has, so
// a schema that branches cannot make an answer explode; maxPad bounds the
// padding to a minLength.
const (
	maxDepth = 64
	maxNodes = 10000
	maxPad   = 1 << 20
)

var formats = map[string]string{
	"date-time": "2000-01-01T00:00:00Z",
	"date":      "2000-01-01",
	"time":      "00:00:00Z",
	"duration":  "PT0S",
	"email":     "user@example.com",
	"hostname":  "example.com",
	"ipv4":      "192.0.2.1",
	"ipv6":      "2001:db8::1",
	"uri":       "https://example.com/",
	"uuid":      "00000000-0000-0000-0000-000000000000",
}

func (g *gen) value(node any, depth int) any {
	g.nodes++
	if depth > maxDepth || g.nodes > maxNodes {
		return nil
	}
	n, ok := node.(map[string]any)
	if !ok {
		if node == false {
			return nil // no value is valid
		}
		return g.payload // true or anything else: free
	}
	if ref, ok := n["$ref"].(string); ok {
		if g.refs[ref] {
			return nil
		}
		if g.refs == nil {
			g.refs = map[string]bool{}
		}
		g.refs[ref] = true
		defer delete(g.refs, ref)
		return g.value(g.resolve(ref), depth+1)
	}
	if c, ok := n["const"]; ok {
		if g.violate {
			return g.payload
		}
		return c
	}
	if e, ok := n["enum"].([]any); ok && len(e) > 0 {
		if g.violate {
			return g.payload
		}
		return g.pick(e)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if l, ok := n[k].([]any); ok && len(l) > 0 {
			return g.value(l[0], depth+1)
		}
	}
	if l, ok := n["allOf"].([]any); ok && len(l) > 0 {
		return g.value(g.merge(n, l), depth+1)
	}
	switch typeOf(n) {
	case "object":
		return g.object(n, depth)
	case "array":
		return g.array(n, depth)
	case "integer":
		if g.violate {
			return g.payload
		}
		return integer(n)
	case "number":
		if g.violate {
			return g.payload
		}
		return number(n)
	case "boolean":
		if g.violate {
			return g.payload
		}
		return true
	case "null":
		return nil
	}
	return g.str(n)
}

// typeOf is a schema's type: the first of a list that is not "null", else
// what its keywords imply, else "string".
func typeOf(n map[string]any) string {
	switch t := n["type"].(type) {
	case string:
		return t
	case []any:
		for _, v := range t {
			if s, ok := v.(string); ok && s != "null" {
				return s
			}
		}
		if len(t) > 0 {
			return "null"
		}
	}
	switch {
	case n["properties"] != nil || n["additionalProperties"] != nil:
		return "object"
	case n["items"] != nil || n["prefixItems"] != nil:
		return "array"
	}
	return "string"
}

func (g *gen) object(n map[string]any, depth int) any {
	out := map[string]any{}
	props, _ := n["properties"].(map[string]any)
	for k, v := range props {
		out[k] = g.value(v, depth+1)
	}
	extra, has := n["additionalProperties"]
	closed := has && extra == false || n["patternProperties"] != nil || n["propertyNames"] != nil
	if g.violate || !closed {
		key := "injected"
		for props[key] != nil {
			key = "_" + key
		}
		if sch, ok := extra.(map[string]any); ok && !g.violate {
			out[key] = g.value(sch, depth+1)
		} else {
			out[key] = g.payload
		}
	}
	return out
}

func (g *gen) array(n map[string]any, depth int) any {
	out := []any{}
	prefix, _ := n["prefixItems"].([]any)
	for _, p := range prefix {
		out = append(out, g.value(p, depth+1))
	}
	count := 1
	if lo, ok := n["minItems"].(float64); ok && size(lo) > count {
		count = size(lo)
	}
	if hi, ok := n["maxItems"].(float64); ok && size(hi) < count {
		count = size(hi)
	}
	items, has := n["items"]
	if len(prefix) > 0 && (!has || items == false) {
		return out
	}
	if !has {
		items = true
	}
	for len(out) < count && g.nodes <= maxNodes {
		out = append(out, g.value(items, depth+1))
	}
	return out
}

func (g *gen) str(n map[string]any) any {
	if g.violate {
		return g.payload
	}
	if f, ok := n["format"].(string); ok {
		if ex, ok := formats[f]; ok {
			return ex
		}
	}
	s := g.payload
	if p, ok := n["pattern"].(string); ok {
		if re, err := regexp.Compile(p); err == nil && !re.MatchString(s) {
			for _, w := range append(strings.Fields(s), "") {
				if re.MatchString(w) {
					s = w
					break
				}
			}
		}
	}
	if hi, ok := n["maxLength"].(float64); ok && utf8.RuneCountInString(s) > size(hi) {
		s = string([]rune(s)[:size(hi)])
	}
	if lo, ok := n["minLength"].(float64); ok {
		if pad := min(size(lo), maxPad) - utf8.RuneCountInString(s); pad > 0 {
			s += strings.Repeat("x", pad)
		}
	}
	return s
}

// size reads a length bound, clamped to [0, 1<<30].
func size(f float64) int {
	switch {
	case !(f > 0): // also NaN
		return 0
	case f > 1<<30:
		return 1 << 30
	}
	return int(f)
}

// pick is the enum value the payload names as a word, else the first.
func (g *gen) pick(e []any) any {
	for _, v := range e {
		if s, ok := v.(string); ok && s != "" {
			re := regexp.MustCompile(`(?i)(?:^|\W)` + regexp.QuoteMeta(s) + `(?:\W|$)`)
			if re.MatchString(g.payload) {
				return v
			}
		}
	}
	return e[0]
}

// bounds reads a number schema's bounds, each with whether it is
// exclusive, in both the draft-4 (boolean) and later (number) forms.
func bounds(n map[string]any) (lo, hi float64, hasLo, hasHi, exLo, exHi bool) {
	lo, hasLo = n["minimum"].(float64)
	hi, hasHi = n["maximum"].(float64)
	switch x := n["exclusiveMinimum"].(type) {
	case bool:
		exLo = x && hasLo
	case float64:
		lo, hasLo, exLo = x, true, true
	}
	switch x := n["exclusiveMaximum"].(type) {
	case bool:
		exHi = x && hasHi
	case float64:
		hi, hasHi, exHi = x, true, true
	}
	return
}

// integer is the integer nearest 0 within the bounds.
func integer(n map[string]any) int64 {
	lo, hi, hasLo, hasHi, exLo, exHi := bounds(n)
	var v int64
	if hasLo {
		l := math.Ceil(lo)
		if exLo && l == lo {
			l++
		}
		if float64(v) < l {
			v = int64(max(-1<<53, min(l, 1<<53)))
		}
	}
	if hasHi {
		h := math.Floor(hi)
		if exHi && h == hi {
			h--
		}
		if float64(v) > h {
			v = int64(max(-1<<53, min(h, 1<<53)))
		}
	}
	return v
}

// number is the number nearest 0 within the bounds (their midpoint when a
// bound is exclusive and the other is set).
func number(n map[string]any) float64 {
	lo, hi, hasLo, hasHi, exLo, exHi := bounds(n)
	v := 0.0
	if hasLo && (v < lo || v == lo && exLo) {
		v = lo
		if exLo {
			v = lo + 1
			if hasHi {
				v = (lo + hi) / 2
			}
		}
	}
	if hasHi && (v > hi || v == hi && exHi) {
		v = hi
		if exHi {
			v = hi - 1
			if hasLo {
				v = (lo + hi) / 2
			}
		}
	}
	return v
}

// merge folds allOf's branches into one schema: properties and required
// are unions, other keywords the first set.
func (g *gen) merge(n map[string]any, all []any) map[string]any {
	out := map[string]any{}
	props := map[string]any{}
	var required []any
	add := func(m map[string]any) {
		for k, v := range m {
			switch k {
			case "allOf":
			case "properties":
				if p, ok := v.(map[string]any); ok {
					for pk, pv := range p {
						props[pk] = pv
					}
				}
			case "required":
				if r, ok := v.([]any); ok {
					required = append(required, r...)
				}
			default:
				if _, set := out[k]; !set {
					out[k] = v
				}
			}
		}
	}
	add(n)
	for _, b := range all {
		m, _ := b.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			m, _ = g.resolve(ref).(map[string]any)
		}
		add(m)
	}
	if len(props) > 0 {
		out["properties"] = props
	}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// resolve follows a $ref within the document ("#", "#/$defs/x"); anything
// else is an empty (free) schema.
func (g *gen) resolve(ref string) any {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return map[string]any{}
	}
	cur := g.root
	for _, tok := range strings.Split(p, "/")[1:] {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return map[string]any{}
		}
		if cur, ok = m[tok]; !ok {
			return map[string]any{}
		}
	}
	return cur
}
