// Command deep-recursion recurses without end, each frame holding a
// kilobyte, until the Go runtime's stack cannot grow: the stack lives in
// linear memory, so it is bounded by the task's memory limit (law 10).
// The task dies (out_of_memory or failed); the kernel is unaffected.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

//go:noinline
func down(n int) int {
	var frame [1024]byte
	frame[n%1024] = byte(n)
	return down(n+1) + int(frame[(n+1)%1024])
}

func main() {
	readInput()
	res["depth"] = "ERECURSION"
	down(0)
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
