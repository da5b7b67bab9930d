// Command infinite-loop never ends: mode "spin" is a tight loop with no
// calls, "hostcalls" loops on a cheap host call, "sleep" sleeps forever
// in the host (poll_oneoff), "wait-child" waits on a child that spins
// forever. The task's wall-clock timeout stops each (law 10), child
// included.
package main

import (
	"encoding/json"
	"time"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

var sink int

func main() {
	in := readInput()
	switch in.Mode {
	case "hostcalls":
		b, _ := mandate.NewBlob([]byte("x"))
		for {
			n, _ := b.Len()
			sink += n
		}
	case "sleep":
		for {
			time.Sleep(time.Hour)
		}
	case "wait-child":
		sp := must(mandate.Lookup("spawner"))
		ib, _ := json.Marshal(map[string]string{"mode": "spin"})
		inb, _ := mandate.NewBlob(ib)
		c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: inb.Handle()})
		if err != nil {
			panic(err)
		}
		c.Wait()
		// The wait ends at this task's deadline; keep spinning so the
		// task is stopped by it, not by finishing in the same instant.
		for i := 0; ; i++ {
			sink += i
		}
	default:
		for i := 0; ; i++ {
			sink += i
		}
	}
	res["ended"] = "ELOOP"
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
