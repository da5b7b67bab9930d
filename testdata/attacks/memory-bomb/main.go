// Command memory-bomb exhausts linear memory: in mode "slices" it keeps
// allocating 1 MiB slices; in mode "huge" it asks for 1 GiB at once; in
// mode "grow" it grows memory by hand (memory.grow through append of an
// ever larger slice). memory.grow fails past the task's memory limit and
// the task dies out_of_memory (law 10); the kernel and the next task are
// fine.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

var keep [][]byte

func main() {
	in := readInput()
	switch in.Mode {
	case "huge":
		b := make([]byte, 1<<30)
		b[len(b)-1] = 1
		keep = append(keep, b)
	case "grow":
		var b []byte
		for {
			b = append(b, make([]byte, len(b)+1<<20)...)
			b[len(b)-1] = 1
		}
	default:
		for {
			b := make([]byte, 1<<20)
			b[0] = 1
			keep = append(keep, b)
		}
	}
	res["survived"] = "EBOMB"
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
