// Package datatest is the conformance suite of the data kind's backends,
// written once and run against each (the SQLite store in caps/data, the
// PostgreSQL store in caps/data/pgstore):
//
//	func TestConformance(t *testing.T) {
//		datatest.Run(t, func(t *testing.T) data.Backend { return openEmpty(t) })
//	}
//
// It covers import, get, records, relations, what the kind reaches through
// them, update (with many goroutines: no update is lost), the limits and
// bad input, each through the data.Backend interface only.
package datatest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

// Open returns a new, empty backend, closed when t ends.
type Open func(t *testing.T) data.Backend

// Run runs the suite, each test on a backend of its own from open.
func Run(t *testing.T, open Open) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, data.Backend)
	}{
		{"ImportGet", testImportGet},
		{"RecordsSorted", testRecordsSorted},
		{"Relations", testRelations},
		{"ImportAtomic", testImportAtomic},
		{"BadInput", testBadInput},
		{"Limits", testLimits},
		{"KindReach", testKindReach},
		{"Update", testUpdate},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"ConcurrentImports", testConcurrentImports},
		{"Context", testContext},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

var ctx = context.Background()

const benefitsJSON = `[
 {"id":"b-alice","owner":"alice","fields":{"plan":"gold","dental":true,"salary":100,"passport":"A123","meta":{"b":1,"a":[1, 2]}},"labels":{"passport":["pii:$owner"],"salary":["hr","financial:$owner","hr"]}},
 {"id":"b-bob","owner":"bob","fields":{"plan":"silver","dental":false,"salary":90,"passport":"B456"},"labels":{"passport":["pii:$owner"],"salary":["financial:$owner"]}},
 {"id":"b-dave","owner":"dave","fields":{"plan":"gold","dental":true,"salary":80,"passport":"D789"},"labels":{"passport":["pii:$owner"]}},
 {"id":"b-carol","owner":"carol","fields":{"plan":"platinum","dental":true,"salary":200,"passport":"C000"},"labels":{"passport":["pii:$owner"]}}
]`

const peopleCSV = `id,owner,name,manager,"email[pii:$owner,contact]"
p-alice,alice,Alice,carol,alice@example.com
p-bob,bob,Bob,erin,bob@example.com
p-dave,dave,Dave,carol,
p-carol,carol,Carol,,carol@example.com
`

var managerOf = data.ImportOptions{Relations: map[string]string{"manager": "manager_of"}}

// Seed imports the benefits (JSON) and people (CSV, manager ->
// manager_of) collections that the suite reads.
func Seed(t testing.TB, b data.Backend) {
	t.Helper()
	recs, err := data.ParseJSON(strings.NewReader(benefitsJSON))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.Import(ctx, "benefits", recs, data.ImportOptions{}); err != nil || n != 4 {
		t.Fatalf("import benefits: %d, %v", n, err)
	}
	people, err := data.ParseCSV(strings.NewReader(peopleCSV))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.Import(ctx, "people", people, managerOf); err != nil || n != 4 {
		t.Fatalf("import people: %d, %v", n, err)
	}
}

// dump is everything the suite's collections and relations hold, for
// "nothing changed" checks.
func dump(t *testing.T, b data.Backend) string {
	t.Helper()
	var sb strings.Builder
	for _, c := range []string{"benefits", "people", "x"} {
		rs, err := b.Records(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(rs)
		fmt.Fprintf(&sb, "%s: %s\n", c, j)
	}
	for _, s := range []string{"carol", "erin", "zed", "alice"} {
		for _, r := range []string{"manager_of", "peer_of"} {
			objs, err := b.Related(ctx, s, r)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&sb, "%s %s %v\n", s, r, objs)
		}
	}
	return sb.String()
}

func rec(id, owner string, fields ...string) data.Record {
	r := data.Record{ID: id, Owner: owner, Fields: map[string]json.RawMessage{}}
	for i := 0; i+1 < len(fields); i += 2 {
		r.Fields[fields[i]] = json.RawMessage(fields[i+1])
	}
	return r
}

func testImportGet(t *testing.T, b data.Backend) {
	Seed(t, b)
	r, ok, err := b.Get(ctx, "benefits", "b-alice")
	if err != nil || !ok {
		t.Fatalf("get b-alice: %v %v", ok, err)
	}
	if r.ID != "b-alice" || r.Owner != "alice" {
		t.Errorf("got %s/%s, want b-alice/alice", r.ID, r.Owner)
	}
	if got := r.Labels["passport"]; !reflect.DeepEqual(got, []string{"pii:alice"}) {
		t.Errorf("passport labels: got %v, want [pii:alice]", got)
	}
	if got := r.Labels["salary"]; !reflect.DeepEqual(got, []string{"financial:alice", "hr"}) {
		t.Errorf("salary labels: got %v, want [financial:alice hr] (sorted, distinct, $owner replaced)", got)
	}
	// Values are stored canonical, byte for byte.
	for f, want := range map[string]string{"dental": `true`, "plan": `"gold"`, "meta": `{"a":[1,2],"b":1}`, "salary": `100`} {
		if got := string(r.Fields[f]); got != want {
			t.Errorf("field %s: got %s, want %s", f, got, want)
		}
	}
	if _, ok := r.Labels["plan"]; ok {
		t.Errorf("plan must be unlabelled: %v", r.Labels)
	}
	if _, ok, err := b.Get(ctx, "benefits", "b-nobody"); ok || err != nil {
		t.Errorf("get b-nobody: got %v %v, want not found", ok, err)
	}
	if _, ok, err := b.Get(ctx, "people", "b-alice"); ok || err != nil {
		t.Errorf("get b-alice from people: got %v %v, want not found", ok, err)
	}
	p, _, _ := b.Get(ctx, "people", "p-dave")
	if _, has := p.Fields["email"]; has {
		t.Errorf("an empty CSV cell must leave the field out: %s", p.Fields)
	}
	if rs, err := b.Records(ctx, "nothing"); err != nil || len(rs) != 0 {
		t.Errorf("records of an unknown collection: %v %v", rs, err)
	}
	// Re-importing replaces the record, owner, labels and all.
	if _, err := b.Import(ctx, "benefits", []data.Record{rec("b-alice", "zed", "plan", `"none"`)}, data.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	r, _, _ = b.Get(ctx, "benefits", "b-alice")
	if r.Owner != "zed" || len(r.Fields) != 1 || len(r.Labels) != 0 {
		t.Errorf("after re-import: %+v", r)
	}
}

func testRecordsSorted(t *testing.T, b data.Backend) {
	// Bytewise order, whatever the server's collation: "B" < "a" < "z" < "é".
	ids := []string{"é", "z", "a", "B", "a-2", "a10", "a2"}
	var recs []data.Record
	for _, id := range ids {
		recs = append(recs, rec(id, "o", "n", "1"))
	}
	recs = append(recs, rec("other", "p", "n", "2"))
	if _, err := b.Import(ctx, "x", recs, data.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"B", "a", "a-2", "a10", "a2", "other", "z", "é"}
	rs, err := b.Records(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.ID)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("records: got %q, want %q", got, want)
	}
	owned, err := b.Owned(ctx, "x", "o")
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, r := range owned {
		got = append(got, r.ID)
	}
	if want := []string{"B", "a", "a-2", "a10", "a2", "z", "é"}; !reflect.DeepEqual(got, want) {
		t.Errorf("owned by o: got %q, want %q", got, want)
	}
	if owned, err := b.Owned(ctx, "x", "nobody"); err != nil || len(owned) != 0 {
		t.Errorf("owned by nobody: %v %v", owned, err)
	}
}

func testRelations(t *testing.T, b data.Backend) {
	Seed(t, b)
	related := func(s, r string, want ...string) {
		t.Helper()
		got, err := b.Related(ctx, s, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			want = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s: got %v, want %v", s, r, got, want)
		}
	}
	related("carol", "manager_of", "alice", "dave")
	related("erin", "manager_of", "bob")
	related("alice", "manager_of")
	related("carol", "peer_of")
	// Re-importing a record replaces the edges it derived.
	if _, err := b.Import(ctx, "people", []data.Record{rec("p-dave", "dave", "manager", `"erin"`)}, managerOf); err != nil {
		t.Fatal(err)
	}
	related("carol", "manager_of", "alice")
	related("erin", "manager_of", "bob", "dave")
	// A list of subjects; null and "" name nobody.
	if _, err := b.Import(ctx, "people", []data.Record{
		rec("p-zed", "zed", "manager", `["carol","erin","carol"]`),
		rec("p-null", "nul", "manager", `null`),
		rec("p-empty", "emp", "manager", `""`),
	}, managerOf); err != nil {
		t.Fatal(err)
	}
	related("carol", "manager_of", "alice", "zed")
	related("erin", "manager_of", "bob", "dave", "zed")
	// Direct relations, twice (idempotent), and one also derived (distinct).
	rels := []data.Relation{{Subject: "alice", Relation: "peer_of", Object: "bob"}, {Subject: "carol", Relation: "manager_of", Object: "alice"}}
	for range 2 {
		if err := b.AddRelations(ctx, rels); err != nil {
			t.Fatal(err)
		}
	}
	related("alice", "peer_of", "bob")
	related("carol", "manager_of", "alice", "zed")
	// A direct edge outlives the re-import of the record that also derived it.
	if _, err := b.Import(ctx, "people", []data.Record{rec("p-alice", "alice", "manager", `"erin"`)}, managerOf); err != nil {
		t.Fatal(err)
	}
	related("carol", "manager_of", "alice", "zed")
	before := dump(t, b)
	if err := b.AddRelations(ctx, []data.Relation{{Subject: "alice", Relation: "peer_of", Object: "dave"}, {Subject: "a b", Relation: "r", Object: "o"}}); err == nil || !strings.Contains(err.Error(), "relation 1") {
		t.Errorf("a bad relation: got %v, want an error naming relation 1", err)
	}
	if after := dump(t, b); after != before {
		t.Errorf("a failed AddRelations changed the store:\nbefore\n%s\nafter\n%s", before, after)
	}
	if err := b.AddRelations(ctx, nil); err != nil {
		t.Errorf("no relations: %v", err)
	}
}

func testImportAtomic(t *testing.T, b data.Backend) {
	Seed(t, b)
	before := dump(t, b)
	for _, c := range []struct {
		name       string
		collection string
		recs       []data.Record
		opts       data.ImportOptions
		want       string
	}{
		{"bad owner last", "benefits", []data.Record{rec("n1", "zed", "plan", `"x"`), rec("b-alice", "alice", "plan", `"hacked"`), rec("n2", "")}, data.ImportOptions{}, "record 2: owner: empty"},
		{"repeated id", "benefits", []data.Record{rec("n1", "zed"), rec("n1", "zed")}, data.ImportOptions{}, `record 1: id "n1" repeats record 0`},
		{"bad relation field", "people", []data.Record{rec("p-new", "zed", "manager", `"carol"`), rec("p-new2", "zed2", "manager", `42`)}, managerOf, "record 1: relation field manager"},
		{"bad relation subject", "people", []data.Record{rec("p-new", "zed", "manager", `"car ol"`)}, managerOf, "record 0: relation field manager"},
		{"bad record before bad relation", "people", []data.Record{rec("p-new", "zed", "manager", `42`), rec("p-x", "a\tb")}, managerOf, "record 1: owner"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := b.Import(ctx, c.collection, c.recs, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
			if after := dump(t, b); after != before {
				t.Errorf("a failed import changed the store:\nbefore\n%s\nafter\n%s", before, after)
			}
		})
	}
}

func testBadInput(t *testing.T, b data.Backend) {
	Seed(t, b)
	before := dump(t, b)
	long := strings.Repeat("n", data.MaxNameLen+1)
	for _, c := range []struct {
		name       string
		collection string
		r          data.Record
		opts       data.ImportOptions
		want       string
	}{
		{"empty collection", "", rec("a", "o"), data.ImportOptions{}, "collection: empty"},
		{"collection with a space", "a b", rec("a", "o"), data.ImportOptions{}, "collection:"},
		{"long collection", long, rec("a", "o"), data.ImportOptions{}, "collection: longer than"},
		{"empty id", "x", rec("", "o"), data.ImportOptions{}, "record 0: id: empty"},
		{"control in id", "x", rec("a\x00b", "o"), data.ImportOptions{}, "record 0: id:"},
		{"bad UTF-8 owner", "x", rec("a", "o\xff"), data.ImportOptions{}, "record 0: owner: not valid UTF-8"},
		{"star field", "x", rec("a", "o", "*", "1"), data.ImportOptions{}, "record 0: field name"},
		{"bad JSON value", "x", rec("a", "o", "f", "{"), data.ImportOptions{}, "record 0: field f:"},
		{"trailing JSON", "x", rec("a", "o", "f", "1 2"), data.ImportOptions{}, "record 0: field f: trailing data"},
		{"missing value", "x", rec("a", "o", "f", ""), data.ImportOptions{}, "record 0: field f: missing value"},
		{"labels of no field", "x", data.Record{ID: "a", Owner: "o", Labels: map[string][]string{"f": {"t"}}}, data.ImportOptions{}, `labels for field "f"`},
		{"empty label", "x", data.Record{ID: "a", Owner: "o", Fields: map[string]json.RawMessage{"f": json.RawMessage("1")}, Labels: map[string][]string{"f": {""}}}, data.ImportOptions{}, "label: empty"},
		{"bad relation name", "x", rec("a", "o"), data.ImportOptions{Relations: map[string]string{"m": "manager of"}}, "relation name"},
		{"bad relation field", "x", rec("a", "o"), data.ImportOptions{Relations: map[string]string{"*": "r"}}, "relation field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := b.Import(ctx, c.collection, []data.Record{c.r}, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
	if after := dump(t, b); after != before {
		t.Errorf("refused imports changed the store:\nbefore\n%s\nafter\n%s", before, after)
	}
	// Reading with names no record has finds nothing, and is no error.
	for _, s := range []string{"", "a b", "'; DROP TABLE records; --", "\x00", "a\xffb", strings.Repeat("é", 1000)} {
		if _, ok, err := b.Get(ctx, s, s); ok || err != nil {
			t.Errorf("get %q: %v %v", s, ok, err)
		}
		if rs, err := b.Records(ctx, s); len(rs) != 0 || err != nil {
			t.Errorf("records %q: %v %v", s, rs, err)
		}
		if rs, err := b.Related(ctx, s, s); len(rs) != 0 || err != nil {
			t.Errorf("related %q: %v %v", s, rs, err)
		}
	}
	if after := dump(t, b); after != before {
		t.Errorf("reads changed the store")
	}
}

func testLimits(t *testing.T, b data.Backend) {
	atMost := strings.Repeat("n", data.MaxNameLen)
	fields := map[string]json.RawMessage{}
	for i := range data.MaxFieldsPerRec {
		fields[fmt.Sprintf("f%d", i)] = json.RawMessage("1")
	}
	tags := make([]string, data.MaxTagsPerField)
	for i := range tags {
		tags[i] = fmt.Sprintf("t%d", i)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", data.MaxRecordBytes-10) + `"`)
	// At each limit: stored.
	ok := []data.Record{
		{ID: atMost, Owner: atMost, Fields: map[string]json.RawMessage{strings.Repeat("f", data.MaxFieldNameLen): json.RawMessage("1")}},
		{ID: "many", Owner: "o", Fields: fields},
		{ID: "tags", Owner: "o", Fields: map[string]json.RawMessage{"f": json.RawMessage("1")}, Labels: map[string][]string{"f": tags}},
		{ID: "big", Owner: "o", Fields: map[string]json.RawMessage{"f": big}},
	}
	if n, err := b.Import(ctx, atMost, ok, data.ImportOptions{}); err != nil || n != len(ok) {
		t.Fatalf("records at the limits: %d %v", n, err)
	}
	if r, found, err := b.Get(ctx, atMost, "big"); err != nil || !found || string(r.Fields["f"]) != string(big) {
		t.Errorf("the big record did not come back whole: %v %v", found, err)
	}
	// One past: refused.
	more := map[string]json.RawMessage{"extra": json.RawMessage("1")}
	for f, v := range fields {
		more[f] = v
	}
	for _, c := range []struct {
		name string
		r    data.Record
		want string
	}{
		{"long id", data.Record{ID: atMost + "n", Owner: "o"}, "id: longer than"},
		{"long field name", rec("a", "o", strings.Repeat("f", data.MaxFieldNameLen+1), "1"), "field name: longer than"},
		{"too many fields", data.Record{ID: "a", Owner: "o", Fields: more}, "fields (max"},
		{"too many tags", data.Record{ID: "a", Owner: "o", Fields: map[string]json.RawMessage{"f": json.RawMessage("1")}, Labels: map[string][]string{"f": append(tags, "one-more")}}, "labels (max"},
		{"too big", data.Record{ID: "a", Owner: "o", Fields: map[string]json.RawMessage{"f": big, "g": big}}, "bytes (max"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := b.Import(ctx, "x", []data.Record{c.r}, data.ImportOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
	if _, err := b.Import(ctx, "x", make([]data.Record, data.MaxImportRecords+1), data.ImportOptions{}); err == nil || !strings.Contains(err.Error(), "records (max") {
		t.Errorf("too many records: %v", err)
	}
	if rs, _ := b.Records(ctx, "x"); len(rs) != 0 {
		t.Errorf("refused records were stored: %d", len(rs))
	}
}

// call runs op through the data kind over b, as principal.
func call(t *testing.T, k *data.Kind, spec, principal, op, args string) (*kindapi.Result, error) {
	t.Helper()
	s, err := k.Grant(kindapi.GrantContext{}, []byte(spec))
	if err != nil {
		t.Fatalf("grant %s: %v", spec, err)
	}
	c := kindtest.NewCall(op, []byte(args), s, kindapi.TaskInfo{ID: "t1", Principal: principal}, hclog.NewNullLogger(), nil)
	return kerneltest.Invoke(ctx, k, c)
}

func ids(t *testing.T, res *kindapi.Result) []string {
	t.Helper()
	var out struct {
		Records []struct{ ID string }
	}
	if err := json.Unmarshal(res.Data, &out); err != nil {
		t.Fatalf("%s: %v", res.Data, err)
	}
	var l []string
	for _, r := range out.Records {
		l = append(l, r.ID)
	}
	return l
}

// testKindReach: what the kind lets a principal reach, through relations
// and the other rules, is the same on every backend.
func testKindReach(t *testing.T, b data.Backend) {
	Seed(t, b)
	k := data.New(b)
	const managers = `{"collection":"benefits","records":{"relation":"manager_of"},"fields":["plan","salary"],"ops":["read","query","write"]}`
	for _, c := range []struct {
		principal string
		want      []string
	}{
		{"carol", []string{"b-alice", "b-dave"}},
		{"erin", []string{"b-bob"}},
		{"alice", nil},
		{"", nil},
	} {
		res, err := call(t, k, managers, c.principal, data.OpQuery, `{}`)
		if err != nil {
			t.Fatalf("query as %q: %v", c.principal, err)
		}
		if got := ids(t, res); !reflect.DeepEqual(got, c.want) {
			t.Errorf("manager_of query as %q: got %v, want %v", c.principal, got, c.want)
		}
	}
	res, err := call(t, k, managers, "carol", data.OpQuery, `{"where":{"plan":"gold"},"fields":["salary"]}`)
	if err != nil || string(res.Data) != `{"records":[{"id":"b-alice","owner":"alice","fields":{"salary":100}},{"id":"b-dave","owner":"dave","fields":{"salary":80}}],"truncated":false}` {
		t.Errorf("query where: %s %v", res.Data, err)
	}
	if got := res.Label.Conf(); !reflect.DeepEqual(got, []string{"financial:alice", "hr"}) {
		t.Errorf("query label: got %v, want [financial:alice hr]", got)
	}
	res, err = call(t, k, managers, "carol", data.OpRead, `{"owner":"dave"}`)
	if err != nil || !strings.Contains(string(res.Data), `"id":"b-dave"`) {
		t.Errorf("read owner dave as carol: %v %v", res, err)
	}
	if _, err := call(t, k, managers, "carol", data.OpRead, `{"id":"b-bob"}`); kindapi.ErrnoOf(err) != abi.EDENIED {
		t.Errorf("read b-bob as carol: %v, want EDENIED", err)
	}
	// A write within the slice lands; outside it, nothing changes.
	if _, err := call(t, k, managers, "carol", data.OpWrite, `{"id":"b-dave","fields":{"salary": 81}}`); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := b.Get(ctx, "benefits", "b-dave"); string(r.Fields["salary"]) != "81" || !reflect.DeepEqual(r.Labels["passport"], []string{"pii:dave"}) {
		t.Errorf("after write: %s %v", r.Fields, r.Labels)
	}
	before := dump(t, b)
	for _, args := range []string{`{"id":"b-bob","fields":{"salary":1}}`, `{"id":"b-nobody","fields":{"salary":1}}`, `{"id":"b-dave","fields":{"bonus":1}}`} {
		if _, err := call(t, k, managers, "carol", data.OpWrite, args); kindapi.ErrnoOf(err) != abi.EDENIED {
			t.Errorf("write %s: %v, want EDENIED", args, err)
		}
	}
	if _, err := call(t, k, managers, "carol", data.OpWrite, `{"id":"b-dave","fields":{"salary":"`+strings.Repeat("x", data.MaxRecordBytes)+`"}}`); kindapi.ErrnoOf(err) != abi.ELIMIT {
		t.Errorf("write past MaxRecordBytes: %v, want ELIMIT", err)
	}
	if after := dump(t, b); after != before {
		t.Errorf("refused writes changed the store:\nbefore\n%s\nafter\n%s", before, after)
	}
	// The relation is read when the call is made: a new edge is seen at once.
	if err := b.AddRelations(ctx, []data.Relation{{Subject: "alice", Relation: "manager_of", Object: "bob"}}); err != nil {
		t.Fatal(err)
	}
	if res, err := call(t, k, managers, "alice", data.OpQuery, `{}`); err != nil || !reflect.DeepEqual(ids(t, res), []string{"b-bob"}) {
		t.Errorf("after a new edge, alice reaches %v (%v), want [b-bob]", ids(t, res), err)
	}
	own := `{"collection":"benefits","records":"own","fields":["*"],"ops":["query"]}`
	if res, err := call(t, k, own, "bob", data.OpQuery, `{}`); err != nil || !reflect.DeepEqual(ids(t, res), []string{"b-bob"}) {
		t.Errorf("own as bob: %v %v", res, err)
	}
	idsRule := `{"collection":"benefits","records":{"ids":["b-carol","b-none","b-alice"]},"fields":["plan"],"ops":["query"]}`
	if res, err := call(t, k, idsRule, "x", data.OpQuery, `{}`); err != nil || !reflect.DeepEqual(ids(t, res), []string{"b-alice", "b-carol"}) {
		t.Errorf("ids rule: %v %v", res, err)
	}
}

func testUpdate(t *testing.T, b data.Backend) {
	Seed(t, b)
	err := b.Update(ctx, "benefits", "b-bob", func(tx data.Reader, r *data.Record, ok bool) error {
		if !ok || r.Owner != "bob" {
			return fmt.Errorf("b-bob: ok %v owner %q", ok, r.Owner)
		}
		// Reads within the transaction see the store.
		if objs, err := tx.Related(ctx, "erin", "manager_of"); err != nil || !reflect.DeepEqual(objs, []string{"bob"}) {
			return fmt.Errorf("related in the transaction: %v %v", objs, err)
		}
		if o, found, err := tx.Get(ctx, "people", "p-bob"); err != nil || !found || o.Owner != "bob" {
			return fmt.Errorf("get in the transaction: %v %v", found, err)
		}
		if rs, err := tx.Owned(ctx, "benefits", "bob"); err != nil || len(rs) != 1 {
			return fmt.Errorf("owned in the transaction: %v %v", rs, err)
		}
		r.Fields["plan"] = json.RawMessage(`"bronze"`)
		r.Owner = "mallory"                    // not stored: only fields are
		r.Labels = map[string][]string{}       // nor these
		r.Fields["new"] = json.RawMessage(`1`) // a new field is stored (the kind refuses it before)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r, _, _ := b.Get(ctx, "benefits", "b-bob")
	if string(r.Fields["plan"]) != `"bronze"` || string(r.Fields["new"]) != "1" || r.Owner != "bob" || !reflect.DeepEqual(r.Labels["passport"], []string{"pii:bob"}) {
		t.Errorf("after update: %+v", r)
	}
	// fn's error is returned as it is, and nothing is written.
	before := dump(t, b)
	sentinel := errors.New("no")
	err = b.Update(ctx, "benefits", "b-bob", func(_ data.Reader, r *data.Record, ok bool) error {
		r.Fields["plan"] = json.RawMessage(`"lost"`)
		return sentinel
	})
	if err != sentinel {
		t.Errorf("got %v, want fn's error as it is", err)
	}
	errno := kindapi.Errorf(abi.EFLOW, "flow")
	if err := b.Update(ctx, "benefits", "b-bob", func(data.Reader, *data.Record, bool) error { return errno }); kindapi.ErrnoOf(err) != abi.EFLOW {
		t.Errorf("got %v, want EFLOW through", err)
	}
	// A missing record: ok false, and nothing is created.
	err = b.Update(ctx, "benefits", "b-nobody", func(_ data.Reader, r *data.Record, ok bool) error {
		if ok {
			return errors.New("b-nobody exists")
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if after := dump(t, b); after != before {
		t.Errorf("failed updates changed the store:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// testConcurrentUpdates: many goroutines increment one counter; every
// increment is kept.
func testConcurrentUpdates(t *testing.T, b data.Backend) {
	if _, err := b.Import(ctx, "x", []data.Record{rec("counter", "o", "n", "0"), rec("other", "o", "n", "0")}, data.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				id := "counter"
				if w%4 == 0 {
					id = "other"
				}
				err := b.Update(ctx, "x", id, func(_ data.Reader, r *data.Record, ok bool) error {
					var n int
					if err := json.Unmarshal(r.Fields["n"], &n); err != nil {
						return err
					}
					r.Fields["n"] = json.RawMessage(fmt.Sprint(n + 1))
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for id, want := range map[string]string{"counter": fmt.Sprint(workers * 3 / 4 * each), "other": fmt.Sprint(workers / 4 * each)} {
		r, _, _ := b.Get(ctx, "x", id)
		if got := string(r.Fields["n"]); got != want {
			t.Errorf("%s: got %s, want %s (an update was lost)", id, got, want)
		}
	}
}

// testConcurrentImports: imports of the same records in opposite orders,
// with updates and reads among them, all succeed.
func testConcurrentImports(t *testing.T, b data.Backend) {
	var recs []data.Record
	for i := range 20 {
		recs = append(recs, rec(fmt.Sprintf("r%02d", i), "o", "n", "0", "manager", `"m"`))
	}
	rev := make([]data.Record, len(recs))
	for i, r := range recs {
		rev[len(recs)-1-i] = r
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				batch := recs
				if w%2 == 1 {
					batch = rev
				}
				if _, err := b.Import(ctx, "x", batch, managerOf); err != nil {
					errs <- err
					return
				}
				if err := b.Update(ctx, "x", "r05", func(_ data.Reader, r *data.Record, ok bool) error { return nil }); err != nil {
					errs <- err
					return
				}
				if _, err := b.Related(ctx, "m", "manager_of"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if rs, err := b.Records(ctx, "x"); err != nil || len(rs) != 20 {
		t.Errorf("%d records, %v", len(rs), err)
	}
	if objs, err := b.Related(ctx, "m", "manager_of"); err != nil || !reflect.DeepEqual(objs, []string{"o"}) {
		t.Errorf("m manager_of: %v %v", objs, err)
	}
}

func testContext(t *testing.T, b data.Backend) {
	Seed(t, b)
	before := dump(t, b)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := b.Get(cancelled, "benefits", "b-alice"); err == nil {
		t.Error("Get with a cancelled context: no error")
	}
	if _, err := b.Records(cancelled, "benefits"); err == nil {
		t.Error("Records with a cancelled context: no error")
	}
	if _, err := b.Import(cancelled, "x", []data.Record{rec("a", "o")}, data.ImportOptions{}); err == nil {
		t.Error("Import with a cancelled context: no error")
	}
	if err := b.AddRelations(cancelled, []data.Relation{{Subject: "a", Relation: "r", Object: "o"}}); err == nil {
		t.Error("AddRelations with a cancelled context: no error")
	}
	ran := false
	if err := b.Update(cancelled, "benefits", "b-alice", func(data.Reader, *data.Record, bool) error { ran = true; return nil }); err == nil || ran {
		t.Errorf("Update with a cancelled context: %v, fn ran %v", err, ran)
	}
	if after := dump(t, b); after != before {
		t.Errorf("cancelled calls changed the store")
	}
	if b.Location() == "" {
		t.Error("no Location")
	}
}

// Bench runs the backends' benchmarks: a read (Get) and an update (a
// read-modify-write of one field) of one record, serial and in parallel.
func Bench(b *testing.B, open func(b *testing.B) data.Backend) {
	st := open(b)
	Seed(b, st)
	if _, err := st.Import(ctx, "x", []data.Record{rec("counter", "o", "n", "0")}, data.ImportOptions{}); err != nil {
		b.Fatal(err)
	}
	inc := func(_ data.Reader, r *data.Record, ok bool) error {
		var n int
		if err := json.Unmarshal(r.Fields["n"], &n); err != nil {
			return err
		}
		r.Fields["n"] = json.RawMessage(fmt.Sprint(n + 1))
		return nil
	}
	b.Run("Get", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, err := st.Get(ctx, "benefits", "b-alice"); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("GetParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok, err := st.Get(ctx, "benefits", "b-alice"); err != nil || !ok {
					b.Error(ok, err)
					return
				}
			}
		})
	})
	b.Run("Update", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := st.Update(ctx, "x", "counter", inc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UpdateParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := st.Update(ctx, "x", "counter", inc); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
