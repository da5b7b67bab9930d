package kindapi

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Refused taints: a sink may refuse data carrying some integrity taints
// rather than all of them (Sink.RefusesTainted). A payment refuses what a
// bank's free-text fields carry ("bank:tx") and anything from the web
// ("web:*") while it accepts the bank's own record of who sent a
// transaction ("bank:transactions.sender").

// MaxTaintPatterns bounds a sink's refused taints; MaxTaintPatternLen one
// pattern's text.
const (
	MaxTaintPatterns   = 64
	MaxTaintPatternLen = 256
)

// TaintPatterns is a set of refused-taint patterns: each either a taint
// ("bank:tx") or, ending in "*", a prefix of taints ("web:*"; "*" alone is
// every taint). It is an immutable value; the zero TaintPatterns refuses
// nothing. Make one with ParseTaintPatterns.
type TaintPatterns struct {
	s string // sorted, deduplicated, joined with "\x00"
}

// ParseTaintPatterns validates and canonicalises refused-taint patterns:
// each non-empty, at most MaxTaintPatternLen bytes, without control
// characters or surrounding space, with "*" only as its last character;
// at most MaxTaintPatterns of them.
func ParseTaintPatterns(ps []string) (TaintPatterns, error) {
	if len(ps) > MaxTaintPatterns {
		return TaintPatterns{}, fmt.Errorf("%d refused taints (at most %d)", len(ps), MaxTaintPatterns)
	}
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if err := checkTaintPattern(p); err != nil {
			return TaintPatterns{}, err
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return TaintPatterns{strings.Join(slices.Compact(out), tagSep)}, nil
}

func checkTaintPattern(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("a refused taint must not be empty")
	case len(p) > MaxTaintPatternLen:
		return fmt.Errorf("refused taint %.32q...: longer than %d bytes", p, MaxTaintPatternLen)
	case strings.TrimSpace(p) != p:
		return fmt.Errorf("refused taint %q: leading or trailing space", p)
	case strings.ContainsFunc(p, unicode.IsControl):
		return fmt.Errorf("refused taint %q: a control character", p)
	case strings.Contains(strings.TrimSuffix(p, "*"), "*"):
		return fmt.Errorf(`refused taint %q: "*" may only end a pattern (a prefix)`, p)
	}
	return nil
}

// List returns the patterns, sorted.
func (t TaintPatterns) List() []string { return splitTags(t.s) }

// IsZero reports whether t refuses nothing.
func (t TaintPatterns) IsZero() bool { return t.s == "" }

// Match reports whether taint is refused by t.
func (t TaintPatterns) Match(taint string) bool {
	for rest := t.s; rest != ""; {
		var p string
		p, rest, _ = strings.Cut(rest, tagSep)
		if matchTaint(p, taint) {
			return true
		}
	}
	return false
}

func matchTaint(p, taint string) bool {
	if pre, ok := strings.CutSuffix(p, "*"); ok {
		return strings.HasPrefix(taint, pre)
	}
	return p == taint
}

// Refused returns the first integrity taint of l that t refuses.
func (t TaintPatterns) Refused(l Label) (string, bool) {
	if t.s == "" || l.integ == "" {
		return "", false
	}
	for _, taint := range l.Integ() {
		if t.Match(taint) {
			return taint, true
		}
	}
	return "", false
}

// Covers reports whether t refuses every taint o refuses: each pattern of
// o is one of t's or lies under a prefix pattern of t.
func (t TaintPatterns) Covers(o TaintPatterns) bool {
	for _, q := range o.List() {
		covered := false
		for _, p := range t.List() {
			if pre, ok := strings.CutSuffix(p, "*"); ok {
				covered = strings.HasPrefix(q, pre)
			} else {
				covered = p == q
			}
			if covered {
				break
			}
		}
		if !covered {
			return false
		}
	}
	return true
}

// Union is the patterns of both.
func (t TaintPatterns) Union(o TaintPatterns) TaintPatterns {
	if o.s == "" {
		return t
	}
	if t.s == "" {
		return o
	}
	all := append(t.List(), o.List()...)
	slices.Sort(all)
	return TaintPatterns{strings.Join(slices.Compact(all), tagSep)}
}

// String renders the patterns as "{a,b*}".
func (t TaintPatterns) String() string { return "{" + strings.Join(t.List(), ",") + "}" }

// RefusedTaint returns the first integrity taint of l that the sink
// refuses: any of l's when it refuses tainted data (RefusesTainted), else
// one its RefusedTaints match.
func (s *Sink) RefusedTaint(l Label) (string, bool) {
	if l.integ == "" {
		return "", false
	}
	if s.RefusesTainted {
		first, _, _ := strings.Cut(l.integ, tagSep)
		return first, true
	}
	return s.RefusedTaints.Refused(l)
}
