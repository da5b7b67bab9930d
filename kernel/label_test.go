package kernel

import (
	"encoding/json"
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
