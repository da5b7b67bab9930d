package kindapi

import (
	"slices"
	"strings"
	"testing"
)

func mustTaints(t *testing.T, ps ...string) TaintPatterns {
	t.Helper()
	tp, err := ParseTaintPatterns(ps)
	if err != nil {
		t.Fatalf("ParseTaintPatterns(%q): %v", ps, err)
	}
	return tp
}

// TestTaintPatterns: exact taints and prefixes, what a sink refuses of a
// label, and the covering order narrowing keeps.
func TestTaintPatterns(t *testing.T) {
	tp := mustTaints(t, "web:*", "bank:tx", "bank:tx")
	if got, want := tp.List(), []string{"bank:tx", "web:*"}; !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	for taint, want := range map[string]bool{
		"web:https://x.example": true, "web:": true, "bank:tx": true,
		"bank:tx2": false, "bank:transactions.sender": false, "we": false, "": false,
	} {
		if got := tp.Match(taint); got != want {
			t.Errorf("Match(%q) = %v, want %v", taint, got, want)
		}
	}
	if got, ok := tp.Refused(NewLabel([]string{"pii:a"}, []string{"bank:transactions.sender", "web:https://x"})); !ok || got != "web:https://x" {
		t.Errorf("Refused = %q, %v; want the web taint", got, ok)
	}
	if _, ok := tp.Refused(NewLabel(nil, []string{"bank:transactions.sender"})); ok {
		t.Error("the trusted field's taint is refused")
	}
	if _, ok := (TaintPatterns{}).Refused(NewLabel(nil, []string{"x"})); ok {
		t.Error("the zero TaintPatterns refuses")
	}
	if !mustTaints(t, "*").Match("anything") {
		t.Error(`"*" does not refuse every taint`)
	}

	for _, c := range []struct {
		t, o []string
		want bool
	}{
		{[]string{"web:*"}, []string{"web:https://a", "web:x*"}, true},
		{[]string{"web:*"}, []string{"we*"}, false},
		{[]string{"bank:tx"}, []string{"bank:tx*"}, false},
		{[]string{"bank:tx*"}, []string{"bank:tx"}, true},
		{[]string{"*"}, []string{"a", "b*"}, true},
		{nil, nil, true},
		{nil, []string{"a"}, false},
		{[]string{"a", "b"}, []string{"b"}, true},
	} {
		if got := mustTaints(t, c.t...).Covers(mustTaints(t, c.o...)); got != c.want {
			t.Errorf("%q covers %q = %v, want %v", c.t, c.o, got, c.want)
		}
	}
	if u := mustTaints(t, "a").Union(mustTaints(t, "b*", "a")); !slices.Equal(u.List(), []string{"a", "b*"}) {
		t.Errorf("Union = %v", u)
	}

	for _, bad := range [][]string{{""}, {" web:*"}, {"a*b"}, {"**"}, {"a\nb"}, {strings.Repeat("x", MaxTaintPatternLen+1)}, make([]string, MaxTaintPatterns+1)} {
		if _, err := ParseTaintPatterns(bad); err == nil {
			t.Errorf("ParseTaintPatterns(%.40q) accepted", bad)
		}
	}
}

// TestSinkRefusedTaint: accepts_untrusted = false refuses any taint, a
// list only what it matches; an untainted label passes both.
func TestSinkRefusedTaint(t *testing.T) {
	all := &Sink{RefusesTainted: true}
	some := &Sink{RefusedTaints: mustTaints(t, "bank:tx")}
	tx := NewLabel(nil, []string{"bank:tx", "a:first"})
	sender := NewLabel([]string{"pii:alice"}, []string{"bank:transactions.sender"})
	if got, ok := all.RefusedTaint(sender); !ok || got != "bank:transactions.sender" {
		t.Errorf("accepts_untrusted = false: %q, %v", got, ok)
	}
	if got, ok := some.RefusedTaint(tx); !ok || got != "bank:tx" {
		t.Errorf("refuses bank:tx, label %v: %q, %v", tx, got, ok)
	}
	if _, ok := some.RefusedTaint(sender); ok {
		t.Error("refuses bank:tx, refused the sender")
	}
	for _, s := range []*Sink{all, some} {
		if _, ok := s.RefusedTaint(NewLabel([]string{"pii:alice"}, nil)); ok {
			t.Error("an untainted label is refused")
		}
	}
}
