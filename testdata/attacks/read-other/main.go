// Command read-other runs for Alice and tries to read Bob's record: by id,
// by owner, through queries (matching his plan, or with no condition),
// through narrowings that name him or a relation, by writing to his
// record, and through a child task that names its own principal. Data
// rules are resolved against the calling task's principal (caps/data):
// EDENIED, and a missing record looks the same as his.
package main

import (
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.ReadInput()
	d := attack.Must(mandate.Lookup("mydata"))
	call := func(k, op, args string) string {
		b, err := d.Call(op, []byte(args))
		attack.Rec(k, err)
		if err != nil {
			return mandate.LastError()
		}
		raw, _ := b.Bytes()
		return string(raw)
	}
	bob := call("bob_by_id", "read", `{"id":"b-bob"}`)
	nobody := call("nobody_by_id", "read", `{"id":"b-nobody"}`)
	attack.Note("same_error", boolStr(strings.Replace(bob, "b-bob", "X", 1) == strings.Replace(nobody, "b-nobody", "X", 1)))
	call("bob_by_owner", "read", `{"owner":"bob"}`)
	q1 := call("query_bobs_plan", "query", `{"where":{"plan":"silver"}}`)
	q2 := call("query_all", "query", `{"limit":1000}`)
	q3 := call("query_passport", "query", `{"where":{"passport":"P-BOB-5512"}}`)
	attack.Note("queries_saw_bob", boolStr(strings.Contains(q1+q2+q3, "bob")))
	call("write_bob", "write", `{"id":"b-bob","fields":{"plan":"gold"}}`)
	_, err := d.Derive(`{"records":{"owners":["bob"]}}`)
	attack.Rec("derive_owners_bob", err) // allowed: own AND bob, which is nobody
	if nb, err := d.Derive(`{"records":{"owners":["bob"]}}`); err == nil {
		_, err = nb.Call("read", []byte(`{"id":"b-bob"}`))
		attack.Rec("read_via_owners_bob", err)
	}
	_, err = d.Derive(`{"records":{"relation":"manager_of"}}`)
	attack.Rec("derive_relation", err)
	_, err = d.Derive(`{"records":{"ids":["b-bob"]}}`)
	attack.Rec("derive_ids_bob", err)
	if nb, err := d.Derive(`{"records":{"ids":["b-bob"]}}`); err == nil {
		_, err = nb.Call("read", []byte(`{"id":"b-bob"}`))
		attack.Rec("read_via_ids_bob", err)
	}
	_, err = d.Derive(`{"collection":"people"}`)
	attack.Rec("derive_other_collection", err)
	// A child acts for the same principal; a request naming another is
	// malformed.
	sp := attack.Must(mandate.Lookup("spawner"))
	b := []byte(`{"module":"` + in.Self + `","principal":"bob"}`)
	attack.Rec("spawn_as_bob", errno(taskSpawn(uint32(sp.Handle()), &b[0], uint32(len(b)), &out)))
	attack.Finish()
}

//go:wasmimport mandate task_spawn
func taskSpawn(h uint32, req *byte, n uint32, out *uint32) uint32

var out uint32

func errno(e uint32) error {
	if e == 0 {
		return nil
	}
	return &mandate.Error{Errno: abi.Errno(e)}
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
