// Command stdout-flood writes 64 MiB to stdout and 64 MiB to stderr, in
// big writes, small writes and one giant line. The kernel keeps at most the
// task's output limit of each stream and counts the rest (law 10); the
// task goes on and finishes.
package main

import (
	"encoding/json"
	"os"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	readInput()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = 'A' + byte(i%26)
	}
	for i := 0; i < 48; i++ {
		os.Stdout.Write(chunk)
		os.Stderr.Write(chunk)
	}
	line := []byte("flood\n")
	for i := 0; i < 100000; i++ {
		os.Stdout.Write(line)
	}
	big := make([]byte, 16<<20)
	os.Stderr.Write(big)
	res["survived"] = "ESUCCESS"
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
