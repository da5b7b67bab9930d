package kindapi

import (
	"encoding/json"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

func TestLabel(t *testing.T) {
	a := NewLabel([]string{"pii:alice", "pii:alice", " "}, []string{"web:x"})
	b := NewLabel([]string{"financial:alice"}, nil)
	j := a.Join(b)
	if got, want := j.String(), "{financial:alice,pii:alice}/{web:x}"; got != want {
		t.Fatalf("Join = %s, want %s", got, want)
	}
	if !a.CanFlowTo(j) || j.CanFlowTo(a) {
		t.Fatal("CanFlowTo is not the subset order")
	}
	if !(Label{}).CanFlowTo(Label{}) || a.CanFlowTo(Label{}) {
		t.Fatal("public flows")
	}
	raw, _ := json.Marshal(j)
	var back Label
	if err := json.Unmarshal(raw, &back); err != nil || back != j {
		t.Fatalf("JSON round trip: %s -> %v (%v)", raw, back, err)
	}
	// Conf returns a copy.
	c := j.Conf()
	c[0] = "mutated"
	if j.Conf()[0] == "mutated" {
		t.Fatal("Conf exposes internals")
	}
}

// The lattice laws, as properties over random labels: join is
// commutative, associative and idempotent with the public label as unit;
// flows-to is reflexive, antisymmetric and transitive, and the join is
// the least upper bound.
func TestLabelLatticeLaws(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	tags := []string{"pii:alice", "pii:bob", "financial:alice", "hr", "web:a", "web:b"}
	random := func() Label {
		var c, i []string
		for _, tag := range tags {
			if rng.Intn(3) == 0 {
				c = append(c, tag)
			}
			if rng.Intn(4) == 0 {
				i = append(i, tag)
			}
		}
		return NewLabel(c, i)
	}
	for n := 0; n < 2000; n++ {
		a, b, c := random(), random(), random()
		if a.Join(b) != b.Join(a) {
			t.Fatalf("join not commutative: %v %v", a, b)
		}
		if a.Join(b).Join(c) != a.Join(b.Join(c)) {
			t.Fatalf("join not associative: %v %v %v", a, b, c)
		}
		if a.Join(a) != a || a.Join(Label{}) != a {
			t.Fatalf("join not idempotent or public not its unit: %v", a)
		}
		if !a.CanFlowTo(a) {
			t.Fatalf("flows-to not reflexive: %v", a)
		}
		if a.CanFlowTo(b) && b.CanFlowTo(a) && !slices.Equal(a.Conf(), b.Conf()) {
			t.Fatalf("flows-to not antisymmetric on confidentiality: %v %v", a, b)
		}
		if a.CanFlowTo(b) && b.CanFlowTo(c) && !a.CanFlowTo(c) {
			t.Fatalf("flows-to not transitive: %v %v %v", a, b, c)
		}
		j := a.Join(b)
		if !a.CanFlowTo(j) || !b.CanFlowTo(j) {
			t.Fatalf("join is not an upper bound: %v %v", a, b)
		}
		if a.CanFlowTo(c) && b.CanFlowTo(c) && !j.CanFlowTo(c) {
			t.Fatalf("join is not the least upper bound: %v %v %v", a, b, c)
		}
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                   "plain",
		"a\x1b[31mb":              `a\x1b[31mb`,
		"osc\x1b]8;;http://x\x07": `osc\x1b]8;;http://x\a`,
		"c1\u009b2J":              `c1\u009b2J`,
		"bad\xff":                 `bad\xff`,
		"real \uFFFD kept":        "real \uFFFD kept",
		"bidi\u202egnp.exe":       `bidi\u202egnp.exe`,
		"two\nlines\tand\x00nul":  `two\nlines\tand\x00nul`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
	if got := EscapeText("two\nlines\tand\x1bx"); got != "two\nlines\tand\\x1bx" {
		t.Errorf("EscapeText kept %q", got)
	}
	long := strings.Repeat("a", 2*MaxShown)
	if got := Printable(long); len(got) > MaxShown+32 || !strings.HasSuffix(got, "(1024 bytes)") {
		t.Errorf("Printable of %d bytes = %d bytes %q...", len(long), len(got), got[:20])
	}
	if got := EscapeText(long); got != long {
		t.Error("EscapeText cut a long text")
	}
}
