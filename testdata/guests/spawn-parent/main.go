// Command spawn-parent exercises spawning: its input names a mode and the
// digests of the modules it may start; it reports what happened as JSON.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

type input struct {
	Mode  string `json:"mode"`
	Child string `json:"child"` // spawn-child
	Spin  string `json:"spin"`  // hostile-spin
	Wait  string `json:"wait"`  // revoke-wait
	Other string `json:"other"` // a module not allowed
}

var out = map[string]string{}

func rec(k string, err error) { out[k] = mandate.ErrnoOf(err).String() }

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
	test, err := mandate.Lookup("test")
	if err != nil {
		panic(err)
	}
	pass := func(narrow string) []abi.SpawnCap {
		return []abi.SpawnCap{{Handle: test.Handle(), Name: "test", Narrow: json.RawMessage(narrow)}}
	}
	switch in.Mode {
	case "basic":
		msg, _ := mandate.NewBlob([]byte("hello"))
		child, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Child, Input: msg.Handle(), Caps: pass(`{"level":2}`), Timeout: "20s"})
		rec("spawn", err)
		res, err := child.Wait()
		rec("wait", err)
		b, _ := res.Bytes()
		out["result"] = string(b)
		_, err = child.Wait()
		rec("wait_again", err)
	case "attacks":
		_, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Child, Caps: pass(`{"level":9}`)})
		rec("widen_passed_cap", err)
		_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Other})
		rec("module_not_allowed", err)
		_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Child, Memory: 1 << 40})
		rec("more_memory", err)
		_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Child, Timeout: "100h"})
		rec("more_time", err)
		_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Child, Caps: []abi.SpawnCap{{Handle: 0x7777, Name: "x"}}})
		rec("invented_handle", err)
		_, err = mandate.Spawn(test, abi.SpawnRequest{Module: in.Child})
		rec("not_a_spawn_cap", err)
		_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Child, Caps: pass(`{}`), Input: test.Handle()})
		rec("cap_as_input", err)
		_, err = mandate.Task{}.Wait()
		rec("wait_invented", err)
		_, err = sp.Derive(map[string]any{"max_children": 1000})
		rec("widen_spawn_cap", err)
		// Refused spawns start no child, so they do not use up
		// max_children: after more refusals than it allows, a proper
		// spawn still succeeds.
		for range 8 {
			mandate.Spawn(sp, abi.SpawnRequest{Module: in.Child, Caps: pass(`{"level":9}`)})
		}
		child, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Child, Caps: pass(`{"level":2}`), Timeout: "20s"})
		rec("spawn_after_refusals", err)
		if err == nil {
			_, err = child.Wait()
			rec("wait_after_refusals", err)
		}
	case "bomb":
		n := 0
		var err error
		for n < 10000 {
			var t mandate.Task
			t, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Child, Timeout: "20s"})
			if err != nil {
				break
			}
			t.Drop()
			n++
		}
		out["spawned"] = itoa(n)
		rec("stopped_by", err)
	case "revoke":
		d, _ := test.Derive(nil)
		child, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Wait, Caps: []abi.SpawnCap{{Handle: d.Handle(), Name: "test"}}, Timeout: "20s"})
		rec("spawn", err)
		rec("revoke", d.Revoke())
		res, err := child.Wait()
		rec("wait", err)
		b, _ := res.Bytes()
		out["result"] = string(b)
	case "orphan":
		_, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Spin, Timeout: "20s"})
		rec("spawn", err) // and end without waiting
	case "kill":
		child, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Spin, Timeout: "20s"})
		rec("spawn", err)
		rec("kill", child.Kill())
		_, err = child.Wait()
		rec("wait", err)
	}
	b, _ := json.Marshal(out)
	mandate.SetResult(b)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
