// Command spawn-tree spawns many short children, for the host's soak
// benchmark: as "root" it spawns Fan children of its own module (each
// passed its spawn capability) one after another, each a "mid" that spawns
// N children of the Leaf module one after another. Every child is waited
// for and its handle dropped before the next one starts, so the tasks
// that are alive at once stay few however many run. It returns
// {"spawned":S,"failed":F,"last_error":"..."}.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

type input struct {
	Mode string `json:"mode"` // "root" or "mid"
	Self string `json:"self"` // this module's digest
	Leaf string `json:"leaf"` // the leaves' module digest
	Fan  int    `json:"fan"`  // mids the root spawns
	N    int    `json:"n"`    // leaves each mid spawns
}

type report struct {
	Spawned   int    `json:"spawned"`
	Failed    int    `json:"failed"`
	LastError string `json:"last_error,omitempty"`
}

func main() {
	raw, _ := mandate.InputBytes()
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		panic(err)
	}
	sp, err := mandate.Lookup("spawner")
	if err != nil {
		panic(err)
	}
	var r report
	spawn := func(req abi.SpawnRequest) {
		child, err := mandate.Spawn(sp, req)
		if err == nil {
			var res mandate.Blob
			res, err = child.Wait()
			if err == nil && in.Mode == "root" {
				var sub report
				if b, _ := res.Bytes(); json.Unmarshal(b, &sub) == nil {
					r.Spawned += sub.Spawned
					r.Failed += sub.Failed
					if sub.LastError != "" {
						r.LastError = sub.LastError
					}
				}
			}
			if !res.IsZero() {
				res.Drop()
			}
			child.Drop()
		}
		if err != nil {
			r.Failed++
			r.LastError = err.Error()
			return
		}
		r.Spawned++
	}
	switch in.Mode {
	case "root":
		mid, _ := json.Marshal(input{Mode: "mid", Leaf: in.Leaf, N: in.N})
		for range in.Fan {
			b, err := mandate.NewBlob(mid)
			if err != nil {
				panic(err)
			}
			spawn(abi.SpawnRequest{Module: in.Self, Input: b.Handle(),
				Caps: []abi.SpawnCap{{Handle: sp.Handle(), Name: "spawner"}}})
			b.Drop()
		}
	case "mid":
		for range in.N {
			spawn(abi.SpawnRequest{Module: in.Leaf})
		}
	}
	out, _ := json.Marshal(r)
	mandate.SetResult(out)
}
