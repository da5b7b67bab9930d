package data

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

const reachRecords = `[
  {"id": "a1", "owner": "alice", "fields": {"plan": "gold", "passport": "X1", "ssn": "1"},
   "labels": {"passport": ["pii:$owner"], "ssn": ["ssn:$owner"]}},
  {"id": "b1", "owner": "bob", "fields": {"plan": "silver", "passport": "X2", "ssn": "2"},
   "labels": {"passport": ["pii:$owner"], "ssn": ["ssn:$owner"]}},
  {"id": "d1", "owner": "dave", "fields": {"plan": "gold", "passport": "X3"},
   "labels": {"passport": ["pii:$owner"], "plan": ["financial:$owner"]}}
]`

const reachPeople = `[
  {"id": "p-alice", "owner": "alice", "fields": {"manager": "carol"}},
  {"id": "p-bob", "owner": "bob", "fields": {"manager": "erin"}},
  {"id": "p-dave", "owner": "dave", "fields": {"manager": ["carol", "erin"]}}
]`

var (
	reachSeedRecords = kindapi.Seed{Collection: "records", Records: []byte(reachRecords)}
	reachSeedPeople  = kindapi.Seed{Collection: "people", Records: []byte(reachPeople), Relations: map[string]string{"manager": "manager_of"}}
)

// reachOf is what a grant of spec could read for principal from seeds,
// as its description says.
func reachOf(t *testing.T, spec, principal string, seeds ...kindapi.Seed) kindapi.Reach {
	t.Helper()
	k := New(nil)
	d := k.Describe(mustGrant(t, k, spec))
	if d.Reach == nil {
		t.Fatal("the data kind's description has no Reach")
	}
	return d.Reach(principal, seeds)
}

func wantReach(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got == nil {
		got = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func TestReachOwn(t *testing.T) {
	r := reachOf(t, `{"collection":"records","records":"own","fields":["plan","passport"]}`, "alice", reachSeedRecords)
	if !r.Known {
		t.Fatalf("reach %+v: not known", r)
	}
	wantReach(t, "tags", r.Tags, "pii:alice")
	if !reflect.DeepEqual(r.ByField, map[string][]string{"passport": {"pii:alice"}}) {
		t.Errorf("by field = %v", r.ByField)
	}
	if r.Summary != "collection records, records own, fields passport, plan" {
		t.Errorf("summary = %q", r.Summary)
	}
	if r.Note != "1 seeded record(s) reachable" {
		t.Errorf("note = %q", r.Note)
	}
	// No principal: "own" reaches nothing.
	r = reachOf(t, `{"collection":"records","records":"own","fields":["*"]}`, "", reachSeedRecords)
	wantReach(t, "no principal tags", r.Tags)
	if !r.Known || !strings.Contains(r.Note, "no principal") {
		t.Errorf("no principal: %+v", r)
	}
}

func TestReachStarFields(t *testing.T) {
	r := reachOf(t, `{"collection":"records","records":"own","fields":["*"]}`, "alice", reachSeedRecords)
	wantReach(t, "tags", r.Tags, "pii:alice", "ssn:alice")
	if !strings.HasSuffix(r.Summary, "fields *") {
		t.Errorf("summary = %q", r.Summary)
	}
}

func TestReachOwnersAndIDs(t *testing.T) {
	r := reachOf(t, `{"collection":"records","records":{"owners":["bob","dave"]},"fields":["plan","ssn"]}`, "alice", reachSeedRecords)
	wantReach(t, "owners tags", r.Tags, "financial:dave", "ssn:bob")
	if r.Summary != "collection records, records owners bob, dave, fields plan, ssn" {
		t.Errorf("summary = %q", r.Summary)
	}
	r = reachOf(t, `{"collection":"records","records":{"ids":["a1"]},"fields":["plan"]}`, "alice", reachSeedRecords)
	wantReach(t, "ids tags", r.Tags)
	if !r.Known || r.Note != "1 seeded record(s) reachable" {
		t.Errorf("ids: %+v", r)
	}
}

func TestReachRelation(t *testing.T) {
	spec := `{"collection":"records","records":{"relation":"manager_of"},"fields":["passport"]}`
	r := reachOf(t, spec, "carol", reachSeedRecords, reachSeedPeople)
	wantReach(t, "carol", r.Tags, "pii:alice", "pii:dave")
	r = reachOf(t, spec, "erin", reachSeedPeople, reachSeedRecords) // seed order does not matter here
	wantReach(t, "erin", r.Tags, "pii:bob", "pii:dave")
	r = reachOf(t, spec, "alice", reachSeedRecords, reachSeedPeople)
	wantReach(t, "alice", r.Tags)
	if strings.Contains(r.Note, "over-approximation") {
		t.Errorf("a declared relation is exact: %q", r.Note)
	}

	// A re-seeded record replaces the edges it derived.
	moved := kindapi.Seed{Collection: "people", Records: []byte(`[{"id": "p-dave", "owner": "dave", "fields": {"manager": "erin"}}]`),
		Relations: map[string]string{"manager": "manager_of"}}
	r = reachOf(t, spec, "carol", reachSeedRecords, reachSeedPeople, moved)
	wantReach(t, "carol after dave moved", r.Tags, "pii:alice")
}

func TestReachRelationUndeclared(t *testing.T) {
	r := reachOf(t, `{"collection":"records","records":{"relation":"manager_of"},"fields":["passport"]}`, "carol", reachSeedRecords)
	wantReach(t, "tags", r.Tags, "pii:alice", "pii:bob", "pii:dave")
	if !strings.Contains(r.Note, "over-approximation") {
		t.Errorf("note = %q, want it to say over-approximation", r.Note)
	}
}

func TestReachChain(t *testing.T) {
	k := New(nil)
	root := mustGrant(t, k, `{"collection":"records","records":"own","fields":["*"]}`)
	s, err := k.Narrow(root, []byte(`{"records":{"ids":["a1","b1"]},"fields":["ssn"]}`))
	if err != nil {
		t.Fatal(err)
	}
	d := k.Describe(s)
	for _, c := range []struct {
		principal string
		want      []string
	}{{"alice", []string{"ssn:alice"}}, {"bob", []string{"ssn:bob"}}, {"dave", nil}} {
		r := d.Reach(c.principal, []kindapi.Seed{reachSeedRecords})
		wantReach(t, c.principal, r.Tags, c.want...)
	}
	if r := d.Reach("alice", nil); r.Summary != "collection records, records own and ids a1, b1, fields ssn" {
		t.Errorf("summary = %q", r.Summary)
	}
}

func TestReachUnknown(t *testing.T) {
	r := reachOf(t, `{"collection":"notes","records":"own","fields":["*"]}`, "alice", reachSeedRecords)
	if r.Known || len(r.Tags) != 0 || r.Note != "unknown (no seed data)" {
		t.Errorf("no seed: %+v", r)
	}
	r = reachOf(t, `{"collection":"records","records":"own","fields":["*"]}`, "alice",
		kindapi.Seed{Collection: "records", Records: []byte(`[{"id": "x"}]`)})
	if r.Known || !strings.Contains(r.Note, "owner") {
		t.Errorf("a bad seed: %+v", r)
	}
}

// TestReachAgreesWithTheStore checks the analysis against the kind
// itself: for every principal and grant, what a query returns from a
// store the seeds were imported into carries exactly the tags Reach
// finds (the relation is declared, so nothing is over-approximated).
func TestReachAgreesWithTheStore(t *testing.T) {
	seeds := []kindapi.Seed{reachSeedRecords, reachSeedPeople}
	st := openTemp(t)
	for _, sd := range seeds {
		recs, err := ParseJSON(strings.NewReader(string(sd.Records)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Import(context.Background(), sd.Collection, recs, ImportOptions{Relations: sd.Relations}); err != nil {
			t.Fatal(err)
		}
	}
	k := New(st)
	rules := []string{`"own"`, `{"relation":"manager_of"}`, `{"owners":["bob","dave"]}`, `{"ids":["a1","d1"]}`}
	fieldLists := []string{`["*"]`, `["passport"]`, `["plan","ssn"]`}
	for _, rule := range rules {
		for _, fields := range fieldLists {
			spec := fmt.Sprintf(`{"collection":"records","records":%s,"fields":%s,"ops":["query"]}`, rule, fields)
			s := mustGrant(t, k, spec)
			for _, p := range []string{"alice", "bob", "carol", "erin", ""} {
				r := k.Describe(s).Reach(p, seeds)
				res, err := call(k, s, p, OpQuery, `{}`)
				if err != nil {
					t.Fatalf("%s as %q: %v", spec, p, err)
				}
				var out struct{ Records []json.RawMessage }
				if err := json.Unmarshal(res.Data, &out); err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf("%d seeded record(s) reachable", len(out.Records)); !strings.HasPrefix(r.Note, want) {
					t.Errorf("%s as %q: note %q, want %q", spec, p, r.Note, want)
				}
				wantReach(t, fmt.Sprintf("%s as %q", spec, p), r.Tags, res.Label.Conf()...)
			}
		}
	}
}
