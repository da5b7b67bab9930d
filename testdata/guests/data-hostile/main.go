// Command data-hostile is a malicious guest holding a data capability on
// the principal's own benefits record (see caps/data/guest_test.go):
//
//	benefits  collection benefits, records "own", fields [plan, dental],
//	          ops [read, query, write]
//
// It tries to read another person's record by id and by owner, to learn
// whether a record exists, to read or filter on a field outside its slice,
// to query others' records, to write outside its fields or records, to
// widen its capability by derivation, and to use an invented handle. It
// returns a JSON map from attack name to {"errno", "body"} and prints
// everything it read to stdout.
package main

import (
	"encoding/json"
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

type res struct {
	Errno string `json:"errno"`
	Body  string `json:"body,omitempty"`
}

var out = map[string]res{}

func rec(key string, b mandate.Blob, err error) {
	r := res{Errno: mandate.ErrnoOf(err).String()}
	if err == nil && !b.IsZero() {
		data, rerr := b.Bytes()
		if rerr != nil {
			r.Errno = "read:" + mandate.ErrnoOf(rerr).String()
		}
		r.Body = string(data)
	}
	fmt.Printf("%s: %s %s %s\n", key, r.Errno, r.Body, lastErr(err))
	out[key] = r
}

func lastErr(err error) string {
	if err == nil {
		return ""
	}
	return mandate.LastError()
}

func call(key string, c mandate.Cap, op, args string) {
	b, err := c.Call(op, []byte(args))
	rec(key, b, err)
}

func derive(key string, c mandate.Cap, req string) mandate.Cap {
	d, err := c.Derive([]byte(req))
	rec(key, mandate.Blob{}, err)
	return d
}

func main() {
	c, err := mandate.Lookup("benefits")
	if err != nil {
		mandate.SetResult([]byte(`{"lookup":{"errno":"` + mandate.ErrnoOf(err).String() + `"}}`))
		return
	}

	call("own_by_owner", c, "read", `{"owner":"alice"}`)
	call("own_by_id", c, "read", `{"id":"b-alice"}`)

	// Another person's record.
	call("bob_by_id", c, "read", `{"id":"b-bob"}`)
	call("bob_by_owner", c, "read", `{"owner":"bob"}`)
	call("nobody_by_id", c, "read", `{"id":"b-nobody"}`)
	call("nobody_by_owner", c, "read", `{"owner":"nobody"}`)

	// Fields outside the slice.
	call("field_outside", c, "read", `{"id":"b-alice","fields":["passport"]}`)
	call("field_outside_mixed", c, "read", `{"id":"b-alice","fields":["plan","salary"]}`)
	call("where_outside", c, "query", `{"where":{"salary":100}}`)
	call("query_fields_outside", c, "query", `{"fields":["passport"]}`)

	// Queries that would match others' records.
	call("query_match_others", c, "query", `{"where":{"dental":true}}`)
	call("query_all", c, "query", `{"limit":1000}`)
	call("query_huge_limit", c, "query", `{"limit":1000000}`)

	// Writes outside the slice.
	call("write_outside_fields", c, "write", `{"id":"b-alice","fields":{"salary":1000000}}`)
	call("write_mixed_fields", c, "write", `{"id":"b-alice","fields":{"plan":"hacked","passport":"X"}}`)
	call("write_bob", c, "write", `{"id":"b-bob","fields":{"plan":"hacked"}}`)
	call("write_new_record", c, "write", `{"id":"b-new","fields":{"plan":"hacked"}}`)
	call("write_new_field", c, "write", `{"id":"b-alice","fields":{"dental":false,"plan":"hacked","extra":1}}`)

	// Derivations that widen.
	derive("derive_widen_fields", c, `{"fields":["plan","passport"]}`)
	derive("derive_star_fields", c, `{"fields":["*"]}`)
	derive("derive_other_collection", c, `{"collection":"salaries"}`)
	derive("derive_relation", c, `{"records":{"relation":"manager_of"}}`)
	ro := derive("derive_read_only", c, `{"ops":["read"],"fields":["plan"]}`)
	derive("derive_widen_ops", ro, `{"ops":["read","write"]}`)
	derive("derive_widen_fields_child", ro, `{"fields":["plan","dental"]}`)
	call("read_only_write", ro, "write", `{"id":"b-alice","fields":{"plan":"hacked"}}`)
	call("read_only_dental", ro, "read", `{"id":"b-alice","fields":["dental"]}`)
	// Narrowing "own" to Bob's owner list keeps "own": still not Bob's.
	toBob := derive("derive_owners_bob", c, `{"records":{"owners":["bob"]}}`)
	call("owners_bob_read", toBob, "read", `{"id":"b-bob"}`)
	call("owners_bob_query", toBob, "query", `{}`)
	ids := derive("derive_ids_bob", c, `{"records":{"ids":["b-bob","b-alice"]}}`)
	call("ids_bob_read", ids, "read", `{"id":"b-bob"}`)
	call("ids_alice_read", ids, "read", `{"id":"b-alice"}`)

	// Invented handles.
	call("invented_handle", mandate.CapFromHandle(abi.MakeHandle(77, 5)), "read", `{"id":"b-bob"}`)
	call("invented_generation", mandate.CapFromHandle(c.Handle()+1<<abi.HandleIndexBits), "read", `{"id":"b-bob"}`)

	d, err := c.Describe()
	rec("describe", mandate.Blob{}, err)
	out["describe"] = res{Errno: out["describe"].Errno, Body: string(d)}

	b, _ := json.Marshal(out)
	mandate.SetResult(b)
}
