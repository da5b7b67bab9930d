package data

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

func mustGrant(t *testing.T, k *Kind, spec string) *Scope {
	t.Helper()
	s, err := k.Grant(kindapi.GrantContext{}, []byte(spec))
	if err != nil {
		t.Fatalf("grant %s: %v", spec, err)
	}
	return s.(*Scope)
}

func call(k *Kind, s kindapi.Scope, principal, op, args string) (*kindapi.Result, error) {
	c := kindtest.NewCall(op, []byte(args), s, kindapi.TaskInfo{ID: "t1", Principal: principal}, hclog.NewNullLogger(), nil)
	return kerneltest.Invoke(context.Background(), k, c)
}

func errnoOf(err error) abi.Errno { return kindapi.ErrnoOf(err) }

func TestGrantSpec(t *testing.T) {
	k := New(nil)
	for _, c := range []struct{ spec, field, json string }{
		{`{"collection":"benefits","records":"own","fields":["plan","dental"]}`, "",
			`{"collection":"benefits","records":["own"],"fields":["dental","plan"],"ops":["read"]}`},
		{`{"collection":"benefits","records":{"relation":"manager_of"},"fields":["*"],"ops":["read","query"]}`, "",
			`{"collection":"benefits","records":[{"relation":"manager_of"}],"fields":["*"],"ops":["query","read"]}`},
		{`{"collection":"b","records":{"owners":["bob","alice","bob"]},"fields":["x"],"ops":["write"]}`, "",
			`{"collection":"b","records":[{"owners":["alice","bob"]}],"fields":["x"],"ops":["write"]}`},
		{`{"collection":"b","records":{"ids":["r1"]},"fields":["x"]}`, "",
			`{"collection":"b","records":[{"ids":["r1"]}],"fields":["x"],"ops":["read"]}`},
		{`{"records":"own","fields":["x"]}`, "collection", ""},
		{`{"collection":"","records":"own","fields":["x"]}`, "collection", ""},
		{`{"collection":"b","fields":["x"]}`, "records", ""},
		{`{"collection":"b","records":"all","fields":["x"]}`, "records", ""},
		{`{"collection":"b","records":{"owners":[]},"fields":["x"]}`, "records", ""},
		{`{"collection":"b","records":{"owners":["a"],"ids":["r"]},"fields":["x"]}`, "records", ""},
		{`{"collection":"b","records":{"relation":"manager of"},"fields":["x"]}`, "records", ""},
		{`{"collection":"b","records":"own"}`, "fields", ""},
		{`{"collection":"b","records":"own","fields":[]}`, "fields", ""},
		{`{"collection":"b","records":"own","fields":["*","x"]}`, "fields", ""},
		{`{"collection":"b","records":"own","fields":["x"],"ops":["delete"]}`, "ops", ""},
		{`{"collection":"b","records":"own","fields":["x"],"when":"true"}`, "when", ""},
		{`{"collection":1,"records":"own","fields":["x"]}`, "collection", ""},
	} {
		s, err := k.Grant(kindapi.GrantContext{}, []byte(c.spec))
		if c.field != "" {
			var fe *kindapi.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Errorf("%s: got %v, want a FieldError on %s", c.spec, err, c.field)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		b, _ := json.Marshal(s)
		if string(b) != c.json {
			t.Errorf("%s:\n got %s\nwant %s", c.spec, b, c.json)
		}
	}
}

func TestNarrowTable(t *testing.T) {
	k := New(nil)
	root := mustGrant(t, k, `{"collection":"benefits","records":"own","fields":["plan","dental","salary"],"ops":["read","query","write"]}`)
	mgr := mustGrant(t, k, `{"collection":"benefits","records":{"relation":"manager_of"},"fields":["*"],"ops":["read"]}`)
	owners := mustGrant(t, k, `{"collection":"benefits","records":{"owners":["alice","bob"]},"fields":["plan"],"ops":["read","query"]}`)
	for _, c := range []struct {
		name   string
		parent *Scope
		req    string
		errno  abi.Errno
		json   string
	}{
		{"empty", root, `{}`, 0, `{"collection":"benefits","records":["own"],"fields":["dental","plan","salary"],"ops":["query","read","write"]}`},
		{"fewer fields and ops", root, `{"fields":["plan"],"ops":["read"]}`, 0, `{"collection":"benefits","records":["own"],"fields":["plan"],"ops":["read"]}`},
		{"own to ids", root, `{"records":{"ids":["b-alice"]}}`, 0, `{"collection":"benefits","records":["own",{"ids":["b-alice"]}],"fields":["dental","plan","salary"],"ops":["query","read","write"]}`},
		{"own restated", root, `{"records":"own"}`, 0, `{"collection":"benefits","records":["own"],"fields":["dental","plan","salary"],"ops":["query","read","write"]}`},
		{"relation to owners", mgr, `{"records":{"owners":["alice"]},"fields":["plan"]}`, 0, `{"collection":"benefits","records":[{"relation":"manager_of"},{"owners":["alice"]}],"fields":["plan"],"ops":["read"]}`},
		{"star to star", mgr, `{"fields":["*"]}`, 0, `{"collection":"benefits","records":[{"relation":"manager_of"}],"fields":["*"],"ops":["read"]}`},
		{"owners subset", owners, `{"records":{"owners":["bob"]}}`, 0, `{"collection":"benefits","records":[{"owners":["alice","bob"]},{"owners":["bob"]}],"fields":["plan"],"ops":["query","read"]}`},
		{"same collection", root, `{"collection":"benefits"}`, 0, ""},

		{"more fields", root, `{"fields":["plan","passport"]}`, abi.EDENIED, ""},
		{"star under list", root, `{"fields":["*"]}`, abi.EDENIED, ""},
		{"more ops", owners, `{"ops":["write"]}`, abi.EDENIED, ""},
		{"other collection", root, `{"collection":"salaries"}`, abi.EDENIED, ""},
		{"owners superset", owners, `{"records":{"owners":["alice","carol"]}}`, abi.EDENIED, ""},
		{"own under relation", mgr, `{"records":"own"}`, abi.EDENIED, ""},
		{"relation under own", root, `{"records":{"relation":"manager_of"}}`, abi.EDENIED, ""},
		{"other relation", mgr, `{"records":{"relation":"peer_of"}}`, abi.EDENIED, ""},
		{"own under owners", owners, `{"records":"own"}`, abi.EDENIED, ""},

		{"unknown key", root, `{"field":["plan"]}`, abi.EINVAL, ""},
		{"empty fields", root, `{"fields":[]}`, abi.EINVAL, ""},
		{"bad op", root, `{"ops":["delete"]}`, abi.EINVAL, ""},
		{"bad rule", root, `{"records":"everyone"}`, abi.EINVAL, ""},
		{"not json", root, `{`, abi.EINVAL, ""},
		{"star mixed", mgr, `{"fields":["*","plan"]}`, abi.EINVAL, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := k.Narrow(c.parent, []byte(c.req))
			if errnoOf(err) != c.errno {
				t.Fatalf("got %v (%s), want %s", err, errnoOf(err), c.errno)
			}
			if err != nil {
				return
			}
			if !c.parent.Contains(s) {
				t.Errorf("parent does not contain the child")
			}
			if c.json != "" {
				if b, _ := json.Marshal(s); string(b) != c.json {
					t.Errorf("got  %s\nwant %s", b, c.json)
				}
			}
		})
	}
	// Narrowing never mutates the parent.
	if b, _ := json.Marshal(root); string(b) != `{"collection":"benefits","records":["own"],"fields":["dental","plan","salary"],"ops":["query","read","write"]}` {
		t.Errorf("root changed: %s", b)
	}
	// The chain is bounded.
	s := kindapi.Scope(owners)
	var err error
	for i := 0; i < MaxRules+2 && err == nil; i++ {
		s, err = k.Narrow(s, []byte(fmt.Sprintf(`{"records":{"ids":["r%d","x"]}}`, i%2)))
		if err == nil {
			s, err = k.Narrow(s, []byte(`{"records":{"ids":["x"]}}`))
		}
	}
	_ = s
	if errnoOf(err) != abi.EDENIED && errnoOf(err) != abi.ELIMIT {
		t.Errorf("long chain: %v", err)
	}
}

// TestNarrowProperty: for random narrowing chains, every record, field and
// op a derived scope allows, its parent allows, for every principal; and
// Contains agrees.
func TestNarrowProperty(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	principals := []string{"alice", "bob", "carol", "dave", "erin"}
	fields := []string{"f1", "f2", "f3", "f4"}
	var recs []Record
	for i := 0; i < 20; i++ {
		fs := map[string]json.RawMessage{}
		for _, f := range fields {
			fs[f] = json.RawMessage(fmt.Sprintf(`"%s-%d"`, f, i))
		}
		recs = append(recs, Record{ID: fmt.Sprintf("r%d", i), Owner: principals[i%len(principals)], Fields: fs})
	}
	if _, err := s.Import(ctx, "c", recs, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddRelations(ctx, []Relation{{"carol", "manager_of", "alice"}, {"carol", "manager_of", "dave"}, {"erin", "manager_of", "bob"}, {"alice", "peer_of", "bob"}}); err != nil {
		t.Fatal(err)
	}
	k := New(s)
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(from []string) []string {
		var out []string
		for _, v := range from {
			if rng.IntN(2) == 0 {
				out = append(out, v)
			}
		}
		if len(out) == 0 {
			out = []string{from[rng.IntN(len(from))]}
		}
		return out
	}
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%d", i)
	}
	randomReq := func() map[string]any {
		req := map[string]any{}
		if rng.IntN(2) == 0 {
			req["fields"] = pick(append([]string{"*"}, fields...))
			if slices.Contains(req["fields"].([]string), "*") {
				req["fields"] = []string{"*"}
			}
		}
		if rng.IntN(2) == 0 {
			req["ops"] = pick(allOps)
		}
		switch rng.IntN(6) {
		case 0:
			req["records"] = map[string]any{"owners": pick(principals)}
		case 1:
			req["records"] = map[string]any{"ids": pick(ids)}
		case 2:
			req["records"] = "own"
		case 3:
			req["records"] = map[string]any{"relation": []string{"manager_of", "peer_of"}[rng.IntN(2)]}
		}
		return req
	}
	roots := []string{
		`{"collection":"c","records":"own","fields":["*"],"ops":["read","query","write"]}`,
		`{"collection":"c","records":{"relation":"manager_of"},"fields":["f1","f2","f3"],"ops":["read","query"]}`,
		`{"collection":"c","records":{"owners":["alice","bob","dave"]},"fields":["*"],"ops":["read","query","write"]}`,
		`{"collection":"c","records":{"ids":["r1","r2","r3","r5","r8","r13"]},"fields":["f1","f4"],"ops":["read","query","write"]}`,
	}
	// allowed returns the (record, field, op) triples scope allows for p.
	allowed := func(sc *Scope, p string) map[string]bool {
		out := map[string]bool{}
		c := &checker{ctx: ctx, q: s, s: sc, principal: p}
		for _, r := range recs {
			ok, err := c.allows(r)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				continue
			}
			for _, f := range fields {
				if !sc.AllowsField(f) {
					continue
				}
				for _, op := range sc.ops {
					out[r.ID+"/"+f+"/"+op] = true
				}
			}
		}
		return out
	}
	checks, derived := 0, 0
	for iter := 0; iter < 300; iter++ {
		parent := mustGrant(t, k, roots[rng.IntN(len(roots))])
		for depth := 0; depth < 6; depth++ {
			req, _ := json.Marshal(randomReq())
			cs, err := k.Narrow(parent, req)
			if err != nil {
				if e := errnoOf(err); e != abi.EDENIED && e != abi.EINVAL && e != abi.ELIMIT {
					t.Fatalf("narrow %s: %v", req, err)
				}
				continue
			}
			child := cs.(*Scope)
			derived++
			if !parent.Contains(child) {
				t.Fatalf("parent %s does not contain child %s (req %s)", parent, child, req)
			}
			for _, p := range principals {
				pa, ca := allowed(parent, p), allowed(child, p)
				for key := range ca {
					checks++
					if !pa[key] {
						t.Fatalf("principal %s: child %s allows %s, parent %s does not (req %s)", p, child, key, parent, req)
					}
				}
				// Query through Invoke agrees: the child's results are a
				// subset of the parent's.
				if child.AllowsOp(OpQuery) {
					cr, err := call(k, child, p, OpQuery, `{"limit":1000}`)
					if err != nil {
						t.Fatal(err)
					}
					var got struct{ Records []resultRecord }
					json.Unmarshal(cr.Data, &got)
					for _, r := range got.Records {
						for f := range r.Fields {
							if !pa[r.ID+"/"+f+"/"+OpRead] && !pa[r.ID+"/"+f+"/"+OpQuery] {
								t.Fatalf("query through child returned %s/%s that the parent does not allow", r.ID, f)
							}
						}
					}
				}
			}
			parent = child
		}
	}
	if derived < 200 || checks < 1000 {
		t.Errorf("too few derivations (%d) or checks (%d)", derived, checks)
	}
	// Contains refuses other kinds and collections.
	a := mustGrant(t, k, roots[0])
	b := mustGrant(t, k, strings.Replace(roots[0], `"c"`, `"d"`, 1))
	if a.Contains(b) || b.Contains(a) || a.Contains(nil) {
		t.Error("Contains across collections")
	}
}

func newKindSeeded(t *testing.T) (*Kind, *Store) {
	s := openTemp(t)
	seed(t, s)
	return New(s), s
}

func readRec(t *testing.T, r *kindapi.Result) resultRecord {
	t.Helper()
	var rr resultRecord
	if err := json.Unmarshal(r.Data, &rr); err != nil {
		t.Fatalf("%s: %v", r.Data, err)
	}
	return rr
}

func TestSameToolDifferentScope(t *testing.T) {
	k, _ := newKindSeeded(t)
	own := mustGrant(t, k, `{"collection":"benefits","records":"own","fields":["plan","dental","passport"],"ops":["read","query"]}`)
	for _, p := range []string{"alice", "bob"} {
		res, err := call(k, own, p, OpRead, `{"owner":"`+p+`"}`)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		rr := readRec(t, res)
		if rr.Owner != p || rr.ID != "b-"+p {
			t.Errorf("%s read %+v", p, rr)
		}
		if _, has := rr.Fields["salary"]; has {
			t.Errorf("salary outside the slice returned: %s", res.Data)
		}
		if got := res.Label.Conf(); !reflect.DeepEqual(got, []string{"pii:" + p}) {
			t.Errorf("%s: conf %v", p, got)
		}
		if got := res.Label.Integ(); !reflect.DeepEqual(got, []string{"data:benefits"}) {
			t.Errorf("%s: integ %v", p, got)
		}
	}
	// Alice asking for Bob's: by id, by owner; and for a record that does
	// not exist: the same error.
	_, e1 := call(k, own, "alice", OpRead, `{"id":"b-bob"}`)
	_, e2 := call(k, own, "alice", OpRead, `{"id":"b-nobody"}`)
	_, e3 := call(k, own, "alice", OpRead, `{"owner":"bob"}`)
	_, e4 := call(k, own, "alice", OpRead, `{"owner":"nobody"}`)
	for i, e := range []error{e1, e2, e3, e4} {
		if errnoOf(e) != abi.EDENIED {
			t.Errorf("%d: %v", i, e)
		}
	}
	if strings.Replace(e1.Error(), "b-bob", "X", 1) != strings.Replace(e2.Error(), "b-nobody", "X", 1) {
		t.Errorf("existence leaks: %q vs %q", e1, e2)
	}
	// No principal: nothing.
	if _, err := call(k, own, "", OpRead, `{"owner":""}`); errnoOf(err) != abi.EDENIED {
		t.Errorf("no principal: %v", err)
	}
	// Query as alice only sees alice's, even matching others' values.
	res, err := call(k, own, "alice", OpQuery, `{"where":{"dental":true}}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Data), `"b-alice"`) || strings.Contains(string(res.Data), "b-dave") {
		t.Errorf("query: %s", res.Data)
	}
}

func TestManagerReadsReports(t *testing.T) {
	k, _ := newKindSeeded(t)
	mgr := mustGrant(t, k, `{"collection":"benefits","records":{"relation":"manager_of"},"fields":["plan"],"ops":["read","query"]}`)
	for _, c := range []struct {
		principal, id string
		ok            bool
	}{
		{"carol", "b-alice", true}, {"carol", "b-dave", true}, {"carol", "b-bob", false}, {"carol", "b-carol", false},
		{"erin", "b-bob", true}, {"erin", "b-alice", false}, {"alice", "b-alice", false}, {"alice", "b-bob", false},
	} {
		_, err := call(k, mgr, c.principal, OpRead, `{"id":"`+c.id+`"}`)
		if (err == nil) != c.ok || (err != nil && errnoOf(err) != abi.EDENIED) {
			t.Errorf("%s reads %s: %v, want ok=%v", c.principal, c.id, err, c.ok)
		}
	}
	res, err := call(k, mgr, "carol", OpQuery, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Records []resultRecord
	}
	json.Unmarshal(res.Data, &got)
	var idsGot []string
	for _, r := range got.Records {
		idsGot = append(idsGot, r.ID)
		if len(r.Fields) != 1 {
			t.Errorf("fields %v", r.Fields)
		}
	}
	if !reflect.DeepEqual(idsGot, []string{"b-alice", "b-dave"}) {
		t.Errorf("carol's query: %v", idsGot)
	}
	// Narrowed to one report: checked against the relation AND the list.
	one, err := k.Narrow(mgr, []byte(`{"records":{"owners":["alice","bob"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(k, one, "carol", OpRead, `{"id":"b-alice"}`); err != nil {
		t.Errorf("narrowed alice: %v", err)
	}
	for _, id := range []string{"b-dave", "b-bob"} {
		if _, err := call(k, one, "carol", OpRead, `{"id":"`+id+`"}`); errnoOf(err) != abi.EDENIED {
			t.Errorf("narrowed %s: %v", id, err)
		}
	}
}

func TestOps(t *testing.T) {
	k, s := newKindSeeded(t)
	ctx := context.Background()
	all := mustGrant(t, k, `{"collection":"benefits","records":{"owners":["alice","bob","dave"]},"fields":["plan","dental","salary"],"ops":["read","query","write"]}`)
	ro := mustGrant(t, k, `{"collection":"benefits","records":"own","fields":["plan"]}`)

	// read with a projection; fields outside the slice.
	res, err := call(k, all, "x", OpRead, `{"id":"b-bob","fields":["plan"]}`)
	if err != nil || string(res.Data) != `{"id":"b-bob","owner":"bob","fields":{"plan":"silver"}}` {
		t.Errorf("read projected: %s %v", res.Data, err)
	}
	if !res.Label.IsZero() && len(res.Label.Conf()) != 0 {
		t.Errorf("plan is unlabelled: %v", res.Label)
	}
	res, _ = call(k, all, "x", OpRead, `{"id":"b-bob"}`)
	if got := res.Label.Conf(); !reflect.DeepEqual(got, []string{"financial:bob"}) {
		t.Errorf("salary label: %v", got)
	}
	for _, c := range []struct {
		s     *Scope
		op    string
		args  string
		errno abi.Errno
	}{
		{all, OpRead, `{"id":"b-bob","fields":["passport"]}`, abi.EDENIED},
		{all, OpRead, `{"id":"b-carol"}`, abi.EDENIED},
		{all, OpRead, `{}`, abi.EINVAL},
		{all, OpRead, `{"id":"a","owner":"b"}`, abi.EINVAL},
		{all, OpRead, `{"id":1}`, abi.EINVAL},
		{all, OpRead, `{"id":"b-bob","x":1}`, abi.EINVAL},
		{all, OpQuery, `{"where":{"passport":"B456"}}`, abi.EDENIED},
		{all, OpQuery, `{"limit":0}`, abi.EINVAL},
		{all, OpQuery, `{"limit":100000}`, abi.EINVAL},
		{all, OpQuery, `{"fields":["passport"]}`, abi.EDENIED},
		{all, OpWrite, `{"id":"b-bob","fields":{"passport":"X"}}`, abi.EDENIED},
		{all, OpWrite, `{"id":"b-carol","fields":{"plan":"X"}}`, abi.EDENIED},
		{all, OpWrite, `{"id":"b-nobody","fields":{"plan":"X"}}`, abi.EDENIED},
		{all, OpWrite, `{"id":"b-bob","fields":{}}`, abi.EINVAL},
		{all, OpWrite, `{"id":"b-bob","fields":{"plan":"ok","passport":"X"}}`, abi.EDENIED},
		{ro, OpWrite, `{"id":"b-alice","fields":{"plan":"X"}}`, abi.EDENIED},
		{ro, OpQuery, `{}`, abi.EDENIED},
		{ro, "delete", `{}`, abi.ENOTSUP},
	} {
		before := dump(t, s)
		_, err := call(k, c.s, "alice", c.op, c.args)
		if errnoOf(err) != c.errno {
			t.Errorf("%s %s: %v, want %s", c.op, c.args, err, c.errno)
		}
		if after := dump(t, s); after != before {
			t.Errorf("%s %s changed the store", c.op, c.args)
		}
	}

	// query: where, limit, truncated, sorted.
	res, err = call(k, all, "x", OpQuery, `{"where":{"dental":true},"fields":["plan"]}`)
	if err != nil || string(res.Data) != `{"records":[{"id":"b-alice","owner":"alice","fields":{"plan":"gold"}},{"id":"b-dave","owner":"dave","fields":{"plan":"gold"}}],"truncated":false}` {
		t.Errorf("query: %s %v", res.Data, err)
	}
	res, _ = call(k, all, "x", OpQuery, `{"limit":2}`)
	if !strings.Contains(string(res.Data), `"truncated":true`) || strings.Count(string(res.Data), `"id"`) != 2 {
		t.Errorf("limit: %s", res.Data)
	}
	if got := res.Label.Conf(); !reflect.DeepEqual(got, []string{"financial:alice", "financial:bob", "hr"}) {
		t.Errorf("query label %v", got)
	}

	// A where on a labelled field taints the result with its labels, even
	// when the field is not returned and nothing matches.
	withPass := mustGrant(t, k, `{"collection":"benefits","records":"own","fields":["plan","passport"],"ops":["query"]}`)
	res, err = call(k, withPass, "alice", OpQuery, `{"where":{"passport":"nope"},"fields":["plan"]}`)
	if err != nil || string(res.Data) != `{"records":[],"truncated":false}` {
		t.Fatalf("where passport: %s %v", res.Data, err)
	}
	if got := res.Label.Conf(); !reflect.DeepEqual(got, []string{"pii:alice"}) {
		t.Errorf("where on passport: conf %v, want [pii:alice]", got)
	}

	// write: updates, keeps labels, canonical values.
	if _, err := call(k, all, "x", OpWrite, `{"id":"b-bob","fields":{"plan":"bronze","salary": 95 }}`); err != nil {
		t.Fatal(err)
	}
	r, _, _ := s.Get(ctx, "benefits", "b-bob")
	if string(r.Fields["plan"]) != `"bronze"` || string(r.Fields["salary"]) != `95` || string(r.Fields["passport"]) != `"B456"` {
		t.Errorf("after write: %s", r.Fields)
	}
	if !reflect.DeepEqual(r.Labels["salary"], []string{"financial:bob"}) {
		t.Errorf("labels after write: %v", r.Labels)
	}
}

func TestLazyKind(t *testing.T) {
	opened := 0
	var st *Store
	k := NewLazy(func() (Backend, error) {
		opened++
		var err error
		st, err = Open(t.TempDir() + "/d.db")
		if err == nil {
			seed(t, st)
		}
		return st, err
	})
	s := mustGrant(t, k, `{"collection":"benefits","records":"own","fields":["plan"]}`)
	if _, err := k.Narrow(s, []byte(`{}`)); err != nil || opened != 0 {
		t.Fatalf("grant/narrow opened the store: %d %v", opened, err)
	}
	if _, err := call(k, s, "alice", OpRead, `{"owner":"alice"}`); err != nil {
		t.Fatal(err)
	}
	call(k, s, "alice", OpRead, `{"owner":"alice"}`)
	if opened != 1 {
		t.Errorf("opened %d times", opened)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := call(k, s, "alice", OpRead, `{"owner":"alice"}`); err == nil || errnoOf(err) != abi.EINTERNAL {
		t.Errorf("after close: %v", err)
	}
}

// TestPrepareHasNoEffect: Prepare decides and describes a call without
// making it (the kernel may still refuse it); the store changes only when
// the effect runs.
func TestPrepareHasNoEffect(t *testing.T) {
	k, s := newKindSeeded(t)
	all := mustGrant(t, k, `{"collection":"benefits","records":{"owners":["bob"]},"fields":["plan"],"ops":["read","write"]}`)
	before := dump(t, s)
	op, err := k.Prepare(kindtest.NewCall(OpWrite, []byte(`{"id":"b-bob","fields":{"plan":"platinum"}}`), all,
		kindapi.TaskInfo{ID: "t1", Principal: "x"}, hclog.NewNullLogger(), nil))
	if err != nil {
		t.Fatal(err)
	}
	if !op.NoResult || op.Effect == nil || op.Show == nil {
		t.Fatalf("prepared write: no result %v, effect %v, show %v", op.NoResult, op.Effect != nil, op.Show != nil)
	}
	if sum := op.Show().Summary; !strings.Contains(sum, "b-bob") || !strings.Contains(sum, "benefits") {
		t.Errorf("an approver would be shown %q", sum)
	}
	if dump(t, s) != before {
		t.Fatal("Prepare wrote to the store")
	}
	if _, err := op.Effect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if dump(t, s) == before {
		t.Fatal("the effect did not write")
	}
	// An op outside the scope is refused by Prepare itself.
	if _, err := k.Prepare(kindtest.NewCall(OpQuery, []byte(`{}`), all, kindapi.TaskInfo{Principal: "x"}, nil, nil)); errnoOf(err) != abi.EDENIED {
		t.Errorf("query without the op: %v", err)
	}
}
