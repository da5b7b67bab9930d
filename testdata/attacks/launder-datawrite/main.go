// Command launder-datawrite reads Alice's passport (pii:alice) and writes
// it into her unlabelled "plan" field, where a task with only the plan,
// public and clean, can read it back and send it anywhere. Law 6 requires
// a write to carry the writer's label: the write must be refused (or the
// field must keep the label), and the store must not change.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	readInput()
	mydata := must(mandate.Lookup("mydata"))
	plan := must(mandate.Lookup("myplan"))
	pb, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	raw, err := pb.Bytes()
	rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	w, _ := json.Marshal(map[string]any{"id": "b-alice", "fields": map[string]string{"plan": r.Fields.Passport}})
	_, err = plan.Call("write", w)
	rec("write_passport_into_plan", err)
	finish()
}

// res collects each attempt's errno (keys) and details ("#" keys).
var res = map[string]string{}

func rec(k string, err error) { res[k] = mandate.ErrnoOf(err).String() }

func note(k, v string) { res["#"+k] = v }

func finish() {
	b, _ := json.Marshal(res)
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}

type input struct {
	Granted     string            `json:"granted"`
	GrantedHost string            `json:"granted_host"`
	GrantedPort string            `json:"granted_port"`
	Evil        string            `json:"evil"`
	EvilPort    string            `json:"evil_port"`
	Self        string            `json:"self"`
	Digests     map[string]string `json:"digests"`
	Mode        string            `json:"mode"`
}

func readInput() input {
	var in input
	b, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		panic(err)
	}
	return in
}

func must(c mandate.Cap, err error) mandate.Cap {
	if err != nil {
		panic(err)
	}
	return c
}
