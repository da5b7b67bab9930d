// Command spawn-bomb spawns copies of itself as fast as it can, each of
// which does the same: a fork bomb. The spawn capability's max_children
// and max_depth and the kernel's MaxTasks stop it with ELIMIT (law 10);
// every task reports how many children it got and what stopped it.
package main

import (
	"encoding/json"
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	raw, _ := mandate.InputBytes()
	var in input
	json.Unmarshal(raw, &in)
	sp := must(mandate.Lookup("spawner"))
	inb, _ := mandate.NewBlob(raw)
	var kids []mandate.Task
	var stop error
	for i := 0; i < 1000; i++ {
		c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: inb.Handle(),
			Caps: []abi.SpawnCap{{Handle: sp.Handle(), Name: "spawner"}}, Memory: 16 << 20})
		if err != nil {
			stop = err
			break
		}
		kids = append(kids, c)
	}
	total := len(kids)
	worst := ""
	for _, c := range kids {
		b, err := c.Wait()
		if err != nil {
			worst = mandate.ErrnoOf(err).String()
			continue
		}
		raw, _ := b.Bytes()
		var r map[string]string
		json.Unmarshal(raw, &r)
		n, _ := strconv.Atoi(r["#total"])
		total += n
		if r["stopped_by"] != "ELIMIT" {
			worst = r["stopped_by"]
		}
	}
	rec("stopped_by", stop)
	if worst != "" {
		res["descendants_stopped_by"] = worst
	} else {
		res["descendants_stopped_by"] = "ELIMIT"
	}
	note("children", strconv.Itoa(len(kids)))
	note("total", strconv.Itoa(total))
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
