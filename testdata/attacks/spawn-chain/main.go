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
)

type chainInput struct {
	input
	Depth int `json:"depth"`
}

func main() {
	raw, _ := mandate.InputBytes()
	var in chainInput
	json.Unmarshal(raw, &in)
	sp := must(mandate.Lookup("spawner"))
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
		rec("stopped_by", err)
		note("depth", strconv.Itoa(in.Depth-1))
		finish()
		return
	}
	b, err := c.Wait()
	if err != nil {
		rec("child", err)
		finish()
		return
	}
	// The deepest link's report travels up.
	cr, _ := b.Bytes()
	json.Unmarshal(cr, &res)
	if in.Depth == 1 {
		rec("widen_depth", widen)
	}
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
