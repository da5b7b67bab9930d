// Command blob-hoard makes the kernel hold as many bytes as it can: it
// creates 1 MiB blobs and never drops them (each only costs the guest a
// handle, while the kernel keeps the bytes). The task's MaxBlobBytes
// bounds the bytes of blobs it holds (law 10): ELIMIT, and room again
// after a drop.
package main

import (
	"encoding/json"
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	readInput()
	chunk := make([]byte, 1<<20)
	var held []mandate.Blob
	var stop error
	for i := 0; i < 1000; i++ {
		b, err := mandate.NewBlob(chunk)
		if err != nil {
			stop = err
			break
		}
		held = append(held, b)
	}
	rec("stopped_by", stop)
	note("held_mib", strconv.Itoa(len(held)))
	// Results of calls count too: echo a big argument back.
	test := must(mandate.Lookup("test"))
	_, err := test.Call("echo", make([]byte, 512<<10))
	rec("call_result_over", err)
	if len(held) > 0 {
		held[0].Drop()
	}
	_, err = mandate.NewBlob(chunk)
	rec("after_drop", err)
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
