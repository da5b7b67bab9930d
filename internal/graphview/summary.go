package graphview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// The text forms of a record's values that every rendering of the graph
// shares (mandate graph's text, its DOT and SVG, mandate check): each is
// one line, and everything a guest or a manifest chose is escaped.

// OneLine folds s's white space, newlines included, into single spaces.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ShortDigest abbreviates "sha256:<64 hex>" to 12 hex digits; "" is
// "(none)".
func ShortDigest(d string) string {
	if strings.HasPrefix(d, "sha256:") && len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	if d == "" {
		return "(none)"
	}
	return d
}

// QuoteIfNeeded returns s as is when every rune prints and none is a
// space or a quote, and quoted otherwise, so a value from a record can
// neither split a line nor pass for another field.
func QuoteIfNeeded(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// ViewSummary is a capability's scope as its kind describes it, one
// name=value per field, escaped.
func ViewSummary(v kernel.CapView) string { return strings.Join(viewParts(v), " ") }

func viewParts(v kernel.CapView) []string {
	parts := make([]string, 0, len(v.Fields))
	for _, f := range v.Fields {
		parts = append(parts, kindapi.Printable(f.Name)+"="+QuoteIfNeeded(kindapi.Printable(f.Value)))
	}
	return parts
}

// LimitsParts is what the kernel itself bounds a capability by: its
// constraints (the person's intent: when, approve_when), rate, uses and
// budget, and whether it was passed to a child; each escaped.
func LimitsParts(x kernel.GraphCap) []string {
	var parts []string
	if len(x.When) > 0 {
		parts = append(parts, "when "+kindapi.Printable(strings.Join(x.When, " && ")))
	}
	if len(x.ApproveWhen) > 0 {
		parts = append(parts, "approve_when "+kindapi.Printable(strings.Join(x.ApproveWhen, " || ")))
	}
	if x.Rate != "" {
		parts = append(parts, "rate "+kindapi.Printable(x.Rate))
	}
	if x.View.MaxUses > 0 {
		parts = append(parts, fmt.Sprintf("uses %d of %d", x.View.Uses, x.View.MaxUses))
	}
	if x.View.Budget != "" {
		parts = append(parts, "spent "+kindapi.Printable(x.View.Spent)+" of "+kindapi.Printable(x.View.Budget))
	}
	if x.View.Passed {
		parts = append(parts, "passed")
	}
	return parts
}

// ScopeSummary renders a scope's JSON object as key=value pairs in key
// order, leaving out empty and zero values; anything else is shown as is,
// on one line. It is for records of a Mandate whose kinds did not yet
// describe their scopes (kernel.CapView).
func ScopeSummary(raw json.RawMessage) string { return strings.Join(scopeParts(raw), " ") }

func scopeParts(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		if s := OneLine(string(raw)); s != "" {
			return []string{s}
		}
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		var s string
		switch v := m[k].(type) {
		case nil:
			continue
		case bool:
			if !v {
				continue
			}
			s = "true"
		case json.Number:
			if v == "0" {
				continue
			}
			s = v.String()
		case string:
			if v == "" {
				continue
			}
			s = QuoteIfNeeded(v)
		case []any:
			if len(v) == 0 {
				continue
			}
			items := make([]string, len(v))
			for i, it := range v {
				if str, ok := it.(string); ok {
					items[i] = QuoteIfNeeded(str)
				} else {
					b, _ := json.Marshal(it)
					items[i] = string(b)
				}
			}
			s = strings.Join(items, ",")
		default:
			b, _ := json.Marshal(v)
			s = string(b)
		}
		parts = append(parts, QuoteIfNeeded(k)+"="+s)
	}
	return parts
}

// capScope is a capability's scope as lines: its kind's description, or
// for an older record its raw scope.
func capScope(c kernel.GraphCap) []string {
	if len(c.View.Fields) > 0 {
		return viewParts(c.View)
	}
	return scopeParts(c.Scope)
}
