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
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	raw, _ := mandate.InputBytes()
	var in attack.Input
	json.Unmarshal(raw, &in)
	sp := attack.Must(mandate.Lookup("spawner"))
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
	attack.Rec("stopped_by", stop)
	if worst != "" {
		attack.Set("descendants_stopped_by", worst)
	} else {
		attack.Set("descendants_stopped_by", "ELIMIT")
	}
	attack.Note("children", strconv.Itoa(len(kids)))
	attack.Note("total", strconv.Itoa(total))
	attack.Finish()
}
