// Command spawn-bench measures what a child costs (issue 31): as the root
// task, with an input of a number N, it spawns N children of its own module
// (the first module its "spawner" capability allows) one after another,
// each waited for and dropped, and sets the number spawned as its result.
// As a child (its input is "child") it sets an empty result and returns.
// With N = 0 the root spawns nothing: the difference of a whole run's CPU
// at N and at 0, divided by N, is one child (internal/childbench).
package main

import (
	"encoding/json"
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	in, _ := mandate.InputBytes()
	if string(in) == "child" {
		mandate.SetResult(nil)
		return
	}
	n, err := strconv.Atoi(string(in))
	if err != nil {
		panic("input: " + err.Error())
	}
	sp, err := mandate.Lookup("spawner")
	if err != nil {
		panic(err)
	}
	var desc struct {
		Scope struct{ Modules []string } `json:"scope"`
	}
	d, err := sp.Describe()
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(d, &desc); err != nil || len(desc.Scope.Modules) == 0 {
		panic("spawner: no module")
	}
	msg, err := mandate.NewBlob([]byte("child"))
	if err != nil {
		panic(err)
	}
	for i := range n {
		t, err := mandate.Spawn(sp, abi.SpawnRequest{Module: desc.Scope.Modules[0], Input: msg.Handle()})
		if err != nil {
			panic("spawn " + strconv.Itoa(i) + ": " + err.Error())
		}
		res, err := t.Wait()
		if err != nil {
			panic("wait " + strconv.Itoa(i) + ": " + err.Error())
		}
		if !res.IsZero() {
			res.Drop()
		}
		t.Drop()
	}
	mandate.SetResult([]byte(strconv.Itoa(n)))
}
