package kindapi

import (
	"encoding/json"
	"slices"
	"strings"
)

// Label is what the kernel knows about a piece of data: its confidentiality
// tags (how sensitive, e.g. "pii:alice") and its integrity taints (where it
// came from, e.g. "web:https://flights.example").
//
// Label is an immutable value; the zero Label is public and untainted.
// Flow rules (which labels may reach which sinks) build on Join and
// CanFlowTo.
type Label struct {
	conf  string // sorted, deduplicated, joined with "\x00"
	integ string
}

const tagSep = "\x00"

// NewLabel returns the label with the given tags. Empty tags are dropped.
func NewLabel(conf, integ []string) Label {
	return Label{conf: canonTags(conf), integ: canonTags(integ)}
}

func canonTags(tags []string) string {
	t := make([]string, 0, len(tags))
	for _, s := range tags {
		if s = strings.TrimSpace(s); s != "" && !strings.Contains(s, tagSep) {
			t = append(t, s)
		}
	}
	slices.Sort(t)
	t = slices.Compact(t)
	return strings.Join(t, tagSep)
}

func splitTags(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, tagSep)
}

// Conf returns a copy of the confidentiality tags, sorted.
func (l Label) Conf() []string { return splitTags(l.conf) }

// Integ returns a copy of the integrity taints, sorted.
func (l Label) Integ() []string { return splitTags(l.integ) }

// IsZero reports whether l is public and untainted.
func (l Label) IsZero() bool { return l.conf == "" && l.integ == "" }

// Join is the least label above both: the union of their tags and taints.
func (l Label) Join(o Label) Label {
	if o.IsZero() {
		return l
	}
	if l.IsZero() {
		return o
	}
	return NewLabel(append(l.Conf(), o.Conf()...), append(l.Integ(), o.Integ()...))
}

// CanFlowTo reports whether data labelled l may reach a place cleared for
// clearance: every confidentiality tag of l is in the clearance.
func (l Label) CanFlowTo(clearance Label) bool {
	for _, t := range l.Conf() {
		if !slices.Contains(clearance.Conf(), t) {
			return false
		}
	}
	return true
}

// String renders the label as "{conf...}/{integ...}".
func (l Label) String() string {
	return "{" + strings.Join(l.Conf(), ",") + "}/{" + strings.Join(l.Integ(), ",") + "}"
}

type labelJSON struct {
	Conf  []string `json:"conf"`
	Integ []string `json:"integ"`
}

// MarshalJSON renders {"conf":[...],"integ":[...]}.
func (l Label) MarshalJSON() ([]byte, error) {
	c, i := l.Conf(), l.Integ()
	if c == nil {
		c = []string{}
	}
	if i == nil {
		i = []string{}
	}
	return json.Marshal(labelJSON{c, i})
}

// UnmarshalJSON parses what MarshalJSON renders.
func (l *Label) UnmarshalJSON(b []byte) error {
	var v labelJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = NewLabel(v.Conf, v.Integ)
	return nil
}
