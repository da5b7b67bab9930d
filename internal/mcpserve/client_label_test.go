package mcpserve

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// memLabels is a client's label in memory, shared by its sessions.
type memLabels struct {
	mu     sync.Mutex
	l      kindapi.Label
	raises []string // "tool label"
}

func (m *memLabels) Label(context.Context) (kindapi.Label, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.l, nil
}

func (m *memLabels) Raise(_ context.Context, tool string, l kindapi.Label) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.l = m.l.Join(l)
	m.raises = append(m.raises, tool+" "+l.String())
	return nil
}

// TestSessionClientLabel: the label is the client's. A session of the
// client reads Alice's record; another session of the same client (its
// own kernel, as after a reconnect) is then refused web_search (EFLOW)
// before its task starts, lists it unavailable, and the web receives
// nothing; the record is raised once, before it was shown.
func TestSessionClientLabel(t *testing.T) {
	labels := &memLabels{}
	a := newFixtureWith(t, fixtureOpts{labels: labels})
	b := newFixtureWith(t, fixtureOpts{labels: labels})
	if d := b.description("web_search"); strings.Contains(d, "unavailable") {
		t.Fatalf("before the record, the other session lists web_search as %q", d)
	}
	r := a.call("my_benefits", map[string]any{"op": "read", "owner": "alice"})
	if r.IsError || !strings.Contains(text(r), "Gold PPO") {
		t.Fatalf("my_benefits: %s", text(r))
	}
	if len(labels.raises) != 1 || !strings.HasPrefix(labels.raises[0], "my_benefits {pii:alice}") {
		t.Errorf("raises %q, want my_benefits's record", labels.raises)
	}
	if d := b.description("web_search"); !strings.HasPrefix(d, "[unavailable in this session: EFLOW") {
		t.Errorf("the other session lists web_search as %q", d)
	}
	r = b.call("web_search", map[string]any{"op": "fetch", "path": "/search?q=Gold+PPO"})
	if !r.IsError || !strings.HasPrefix(text(r), "EFLOW") {
		t.Errorf("web_search in the other session: %v %s", r.IsError, text(r))
	}
	if n := len(b.web.Requests()); n != 0 {
		t.Errorf("the web received %d requests", n)
	}
	// A result by reference is not shown: the client's label stays.
	if r := a.call("benefits_ref", map[string]any{"op": "read", "owner": "alice"}); r.IsError || len(labels.raises) != 1 {
		t.Errorf("a result by reference raised the client's label: %q", labels.raises)
	}
}
