// Command spawn-chain spawns a copy of itself that spawns a copy of itself,
// and so on: a chain as deep as it can go, each link passing the spawn
// capability on (and trying to widen max_depth when it does). The chain
// stops at the capability's max_depth, never beyond kernel.MaxSpawnDepth,
// with ELIMIT (law 10); widening is EDENIED (law 3).
package main

import (
	"encoding/json"
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

type chainInput struct {
	attack.Input
	Depth int `json:"depth"`
}

func main() {
	raw, _ := mandate.InputBytes()
	var in chainInput
	json.Unmarshal(raw, &in)
	sp := attack.Must(mandate.Lookup("spawner"))
	in.Depth++
	next, _ := json.Marshal(in)
	inb, _ := mandate.NewBlob(next)
	var widen error
	if in.Depth == 1 {
		// Widening the spawn capability while passing it on is refused.
		_, widen = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: inb.Handle(),
			Caps: []abi.SpawnCap{{Handle: sp.Handle(), Name: "spawner", Narrow: json.RawMessage(`{"max_depth":20}`)}}})
	}
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: inb.Handle(), Memory: 16 << 20,
		Caps: []abi.SpawnCap{{Handle: sp.Handle(), Name: "spawner"}}})
	if err != nil {
		attack.Rec("stopped_by", err)
		attack.Note("depth", strconv.Itoa(in.Depth-1))
		attack.Finish()
		return
	}
	b, err := c.Wait()
	if err != nil {
		attack.Rec("child", err)
		attack.Finish()
		return
	}
	// The deepest link's report travels up.
	cr, _ := b.Bytes()
	attack.Merge(cr)
	if in.Depth == 1 {
		attack.Rec("widen_depth", widen)
	}
	attack.Finish()
}
