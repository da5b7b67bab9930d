package data

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

var fuzzGrants = []string{
	`{"collection":"benefits","records":"own","fields":["plan","dental"]}`,
	`{"collection":"benefits","records":{"relation":"manager_of"},"fields":["*"],"ops":["read","query"]}`,
	`{"collection":"b","records":{"owners":["bob","alice","bob"]},"fields":["x"],"ops":["write"]}`,
	`{"collection":"b","records":{"ids":["r1"]},"fields":["x"]}`,
	`{"records":"own","fields":["x"]}`, `{"collection":"b","records":"all","fields":["x"]}`,
	`{"collection":"b","records":{"owners":["a"],"ids":["r"]},"fields":["x"]}`,
	`{"collection":"b","records":"own","fields":["*","x"]}`, `{"collection":"b","records":"own","fields":["x"],"when":"true"}`,
	`{"collection":"b","records":{"relation":"manager of"},"fields":["x"]}`, `{"collection":"b","records":{"ids":null},"fields":["x"]}`,
}

// FuzzGrant: a grant spec never panics the kind; a failure is a
// *kindapi.FieldError or a decoding error; a granted scope has a rule and
// an op, contains itself, and its JSON names its collection.
func FuzzGrant(f *testing.F) {
	for _, s := range fuzzGrants {
		f.Add([]byte(s))
	}
	k := New(nil)
	f.Fuzz(func(t *testing.T, spec []byte) {
		ks, err := k.Grant(kindapi.GrantContext{}, spec)
		if err != nil {
			return
		}
		s := ks.(*Scope)
		if len(s.rules) == 0 || len(s.ops) == 0 || (!s.allFields && len(s.fields) == 0) {
			t.Fatalf("Grant(%q) = %s: no rule, op or field", spec, s)
		}
		if !s.Contains(s) {
			t.Fatalf("Grant(%q) = %s, which does not contain itself", spec, s)
		}
		var j struct{ Collection string }
		if b, err := s.MarshalJSON(); err != nil || json.Unmarshal(b, &j) != nil || j.Collection != s.collection {
			t.Fatalf("Grant(%q): MarshalJSON = %s, %v", spec, b, err)
		}
	})
}

// FuzzNarrow: a narrowing request never panics; a success is contained in
// its parent (and, narrowed again by nothing, in itself); a failure is
// EINVAL, ELIMIT or EDENIED.
func FuzzNarrow(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"ops":["read"]}`, `{"ops":["write"]}`, `{"fields":["plan"]}`, `{"fields":["*"]}`, `{"fields":["salary"]}`,
		`{"records":"own"}`, `{"records":{"relation":"manager_of"}}`, `{"records":{"owners":["alice","bob"]}}`,
		`{"records":{"ids":["r1","r2"]}}`, `{"records":{"ids":["r3"]}}`, `{"collection":"other"}`, `{"records":null}`,
		`{"records":{"owners":[]}}`, `[`, `{"x":1}`, `{"fields":["*","a"]}`, `{"ops":["delete"]}`,
	} {
		f.Add(uint8(0), []byte(s))
	}
	k := New(nil)
	var parents []*Scope
	for _, spec := range []string{
		`{"collection":"benefits","records":"own","fields":["plan","dental","salary"],"ops":["read","query"]}`,
		`{"collection":"benefits","records":{"relation":"manager_of"},"fields":["*"],"ops":["read","query","write"]}`,
		`{"collection":"benefits","records":{"ids":["r1","r2"]},"fields":["plan"],"ops":["read"]}`,
		`{"collection":"benefits","records":{"owners":["alice","bob","carol"]},"fields":["*"],"ops":["write"]}`,
	} {
		s, err := k.Grant(kindapi.GrantContext{}, []byte(spec))
		if err != nil {
			f.Fatal(err)
		}
		parents = append(parents, s.(*Scope))
	}
	f.Fuzz(func(t *testing.T, which uint8, req []byte) {
		chain := []kindapi.Scope{parents[int(which)%len(parents)]}
		// Narrow a chain a few times, so rule lists accumulate.
		for range 3 {
			cs, ok := kerneltest.CheckNarrow(t, k, chain, req, abi.EINVAL, abi.ELIMIT, abi.EDENIED)
			if !ok {
				return
			}
			same, err := k.Narrow(cs, []byte(`{}`))
			if err != nil || !cs.Contains(same) || !same.Contains(cs) {
				t.Fatalf("Narrow(%s, {}) = %v, %v: not the same scope", cs, same, err)
			}
			chain = append(chain, cs)
		}
	})
}

// FuzzParseJSON: an import file never panics the parser; every record it
// returns normalizes (as Import requires).
func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(benefitsJSON))
	for _, s := range []string{
		`[]`, `[{"id":"r","owner":"o"}]`, `[{"id":"r","owner":"o","fields":{"a":1e400}}]`, `[{"id":"","owner":"o"}]`,
		`[{"id":"r","owner":"o","labels":{"a":["pii:$owner",""]}}]`, `{}`, `[{"id":"r"}]`, `[{"id":"r","owner":"o","x":1}]`,
		`[{"id":"r","owner":"o","fields":{"*":1}}]`, `[null]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := ParseJSON(bytes.NewReader(b))
		if err != nil {
			return
		}
		for i, r := range recs {
			if _, err := normalize(r); err != nil {
				t.Fatalf("ParseJSON(%q): record %d does not normalize: %v", b, i, err)
			}
		}
	})
}

// FuzzParseCSV: like FuzzParseJSON for CSV, and every field of a record is
// a column of the header (a JSON string).
func FuzzParseCSV(f *testing.F) {
	f.Add([]byte(peopleCSV))
	for _, s := range []string{
		"id,owner\n", "id,owner,a\nr,o,x\n", "\ufeffid,owner,a[t1 t2]\nr,o,x\n", "id,owner,a[\nr,o,x\n", "id,id,owner\n",
		"id,owner,a\nr,o\n", "owner,id,\"b[pii:$owner]\"\n\"r\",\"o\",\"q\"\"\"\n", "id[x],owner\n", "", "id,owner,*\n",
		"id,owner,a]\n", "id,owner,a[]\nr,o,\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := ParseCSV(bytes.NewReader(b))
		if err != nil {
			return
		}
		for i, r := range recs {
			n, err := normalize(r)
			if err != nil {
				t.Fatalf("ParseCSV(%q): record %d does not normalize: %v", b, i, err)
			}
			for f, v := range n.Fields {
				var s string
				if err := json.Unmarshal(v, &s); err != nil {
					t.Fatalf("ParseCSV(%q): record %d field %s = %s, not a JSON string", b, i, f, v)
				}
			}
		}
	})
}

// FuzzCanonValue: a canonical value is canonical: canonicalizing it again
// changes nothing.
func FuzzCanonValue(f *testing.F) {
	for _, s := range []string{`"gold"`, `{"b":1,"a":[true,null]}`, `1.50`, `1e2`, ` "x" `, `{"a":1} 2`, `{"a":"\u00e9"}`, `-0`, `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := canonValue(b)
		if err != nil {
			return
		}
		c2, err := canonValue(c)
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("canonValue(%q) = %s, then %s, %v", b, c, c2, err)
		}
	})
}

// FuzzInvoke: read, query and write arguments from a guest never panic the
// kind; a failure is an errno a guest may get; what a read or query
// returns is within the scope: its fields in the slice, its owner the
// caller's for an "own" scope.
func FuzzInvoke(f *testing.F) {
	for _, a := range []struct {
		op, principal, args string
	}{
		{OpRead, "alice", `{"id":"b-alice"}`}, {OpRead, "alice", `{"owner":"alice","fields":["plan"]}`},
		{OpRead, "carol", `{"id":"b-bob","fields":["salary"]}`}, {OpQuery, "alice", `{"where":{"plan":"gold"},"limit":2}`},
		{OpQuery, "carol", `{"where":{"dental":true},"fields":["plan"]}`}, {OpQuery, "alice", `{"where":{"salary":100}}`},
		{OpWrite, "alice", `{"id":"b-alice","fields":{"plan":"silver"}}`}, {OpWrite, "bob", `{"id":"b-alice","fields":{"plan":"x"}}`},
		{OpRead, "", `{}`}, {OpQuery, "alice", `{"limit":0}`}, {OpQuery, "alice", `{"where":{"plan":}}`}, {"delete", "alice", `{}`},
		{OpWrite, "alice", `{"id":"b-alice","fields":{"plan":"` + strings.Repeat("x", 70000) + `"}}`},
	} {
		f.Add(uint8(0), a.op, a.principal, []byte(a.args))
	}
	st, err := Open(f.TempDir() + "/data.db")
	if err != nil {
		f.Fatal(err)
	}
	recs, err := ParseJSON(strings.NewReader(benefitsJSON))
	if err != nil {
		f.Fatal(err)
	}
	if _, err := st.Import(context.Background(), "benefits", recs, ImportOptions{}); err != nil {
		f.Fatal(err)
	}
	people, err := ParseCSV(strings.NewReader(peopleCSV))
	if err != nil {
		f.Fatal(err)
	}
	if _, err := st.Import(context.Background(), "people", people, ImportOptions{Relations: map[string]string{"manager": "manager_of"}}); err != nil {
		f.Fatal(err)
	}
	k := New(st)
	var scopes []*Scope
	for _, spec := range []string{
		`{"collection":"benefits","records":"own","fields":["plan","dental"],"ops":["read","query","write"]}`,
		`{"collection":"benefits","records":{"relation":"manager_of"},"fields":["*"],"ops":["read","query"]}`,
		`{"collection":"benefits","records":{"owners":["alice","bob"]},"fields":["plan"],"ops":["read","query","write"]}`,
		`{"collection":"benefits","records":{"ids":["b-alice","b-dave"]},"fields":["plan","salary"],"ops":["read","query"]}`,
	} {
		s, err := k.Grant(kindapi.GrantContext{}, []byte(spec))
		if err != nil {
			f.Fatal(err)
		}
		scopes = append(scopes, s.(*Scope))
	}
	f.Fuzz(func(t *testing.T, which uint8, op, principal string, args []byte) {
		s := scopes[int(which)%len(scopes)]
		c := kindtest.NewCall(op, args, s, kindapi.TaskInfo{ID: "t1", Principal: principal}, hclog.NewNullLogger(), nil)
		res, err := kerneltest.Invoke(context.Background(), k, c)
		if err != nil {
			switch kindapi.ErrnoOf(err) {
			case abi.EINVAL, abi.ELIMIT, abi.EDENIED, abi.ENOTSUP:
			default:
				t.Fatalf("Invoke(%s, %q, %q) as %q: errno %s (%v)", s, op, args, principal, kindapi.ErrnoOf(err), err)
			}
			return
		}
		if res == nil { // a write returns nothing
			if op != OpWrite {
				t.Fatalf("Invoke(%s, %q, %q): no result", s, op, args)
			}
			return
		}
		var out []resultRecord
		switch op {
		case OpRead:
			var r resultRecord
			if err := json.Unmarshal(res.Data, &r); err != nil {
				t.Fatalf("read result %s: %v", res.Data, err)
			}
			out = append(out, r)
		case OpQuery:
			var q struct {
				Records []resultRecord `json:"records"`
			}
			if err := json.Unmarshal(res.Data, &q); err != nil {
				t.Fatalf("query result %s: %v", res.Data, err)
			}
			out = q.Records
		}
		for _, r := range out {
			for f := range r.Fields {
				if !s.AllowsField(f) {
					t.Fatalf("Invoke(%s, %q, %q): field %s outside the slice in %s", s, op, args, f, res.Data)
				}
			}
			if slices.ContainsFunc(s.rules, func(r rule) bool { return r.kind == ruleOwn }) && r.Owner != principal {
				t.Fatalf("Invoke(%s, %q, %q) as %q: a record of %q", s, op, args, principal, r.Owner)
			}
		}
		if !slices.Contains(res.Label.Integ(), "data:"+s.collection) {
			t.Fatalf("Invoke(%s, %q, %q): label %v lacks the data taint", s, op, args, res.Label)
		}
	})
}
