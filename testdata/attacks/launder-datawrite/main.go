// Command launder-datawrite reads Alice's passport (pii:alice) and writes
// it into her unlabelled "plan" field, where a task with only the plan,
// public and clean, can read it back and send it anywhere. Law 6 requires
// a write to carry the writer's label: the write must be refused (or the
// field must keep the label), and the store must not change.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	attack.ReadInput()
	mydata := attack.Must(mandate.Lookup("mydata"))
	plan := attack.Must(mandate.Lookup("myplan"))
	pb, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	raw, err := pb.Bytes()
	attack.Rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	w, _ := json.Marshal(map[string]any{"id": "b-alice", "fields": map[string]string{"plan": r.Fields.Passport}})
	_, err = plan.Call("write", w)
	attack.Rec("write_passport_into_plan", err)
	attack.Finish()
}
