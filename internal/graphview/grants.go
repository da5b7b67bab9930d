package graphview

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// MaxGrantsSummary is the longest GrantsSummary, in runes, when its caller
// gives no bound.
const MaxGrantsSummary = 100

// GrantsSummary says in one short line what a run could do: its root
// capabilities (those derived from no other: the manifest's grants; every
// other capability of the run is narrower than one of them), grouped by
// kind, each as its kind's main bounds:
//
//	net: GET api.example, POST pay.example; data: benefits (query, read); pay: ≤ 50.00 EUR
//
// It is at most limit runes (MaxGrantsSummary when limit < 20); "+N more"
// counts what was left out. "" when the run held no capability.
// Everything is escaped.
func GrantsSummary(caps []kernel.GraphCap, limit int) string {
	if limit < 20 {
		limit = MaxGrantsSummary
	}
	ids := make(map[string]bool, len(caps))
	for _, c := range caps {
		ids[c.ID] = true
	}
	var kinds []string
	byKind := map[string][]string{}
	for _, c := range caps {
		if c.Parent != "" && c.Parent != c.ID && ids[c.Parent] {
			continue
		}
		k := kindapi.Printable(c.Kind)
		if _, ok := byKind[k]; !ok {
			kinds = append(kinds, k)
			byKind[k] = nil
		}
		if s := grantBounds(c); s != "" && !slices.Contains(byKind[k], s) {
			byKind[k] = append(byKind[k], s)
		}
	}
	// Items in order (each kind's first item carries the kind), then as
	// many as fit.
	type item struct{ kind, text string }
	var items []item
	for _, k := range kinds {
		if len(byKind[k]) == 0 {
			items = append(items, item{k, ""})
		}
		for _, s := range byKind[k] {
			items = append(items, item{k, s})
		}
	}
	var b strings.Builder
	prev := ""
	for i, it := range items {
		var next string
		switch {
		case i == 0 && it.text == "":
			next = it.kind
		case i == 0:
			next = it.kind + ": " + it.text
		case it.kind == prev:
			next = ", " + it.text
		case it.text == "":
			next = "; " + it.kind
		default:
			next = "; " + it.kind + ": " + it.text
		}
		more := ""
		if left := len(items) - i - 1; left > 0 {
			more = " +" + strconv.Itoa(left) + " more"
		}
		if utf8.RuneCountInString(b.String()+next+more) > limit {
			if b.Len() == 0 { // one item too long by itself: cut it
				return cutRunes(next, limit-1) + "…"
			}
			b.WriteString(" +" + strconv.Itoa(len(items)-i) + " more")
			return b.String()
		}
		b.WriteString(next)
		prev = it.kind
	}
	return b.String()
}

// grantBounds is a capability's main bounds as its kind describes them,
// short: what a person scanning a list of runs wants to know of it.
func grantBounds(c kernel.GraphCap) string {
	f := map[string]string{}
	for _, d := range c.View.Fields {
		f[d.Name] = kindapi.Printable(OneLine(d.Value))
	}
	var s string
	switch c.Kind {
	case "net":
		host := f["origin"]
		if u, err := url.Parse(host); err == nil && u.Host != "" {
			host = u.Host
		}
		s = strings.ReplaceAll(f["methods"], ",", "/") + " " + host
	case "data":
		s = f["collection"]
		if s != "" && f["ops"] != "" {
			s += " (" + f["ops"] + ")"
		}
	case "pay":
		if s = f["provider"] + " " + f["currency"]; f["max_amount"] != "" {
			s = "≤ " + f["max_amount"]
		}
	case "llm":
		s = f["models"]
	case "spawn":
		s = f["modules"]
	case "declassify":
		if f["drop"] != "" {
			s = "drop " + f["drop"]
		}
	}
	if s = strings.TrimSpace(s); s == "" && len(c.View.Fields) > 0 { // another kind, or one described otherwise: its first field
		s = kindapi.Printable(OneLine(c.View.Fields[0].Value))
	}
	return s
}

// cutRunes is s's first n runes.
func cutRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
