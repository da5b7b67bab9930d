// Command pay-racer spawns N children that each charge the card it passes
// them, all at once, and reports how many charges succeeded: a budget
// shared by the whole derivation subtree must hold against racing children.
package main

import (
	"encoding/json"
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	in, _ := mandate.InputBytes()
	var cfg struct {
		Child  string
		N      int
		Amount string
	}
	json.Unmarshal(in, &cfg)
	card, _ := mandate.Lookup("card")
	sp, _ := mandate.Lookup("children")
	var kids []mandate.Task
	for i := 0; i < cfg.N; i++ {
		arg, _ := json.Marshal(map[string]string{"Key": fmt.Sprintf("race-%d", i), "Amount": cfg.Amount})
		b, _ := mandate.NewBlob(arg)
		k, err := mandate.Spawn(sp, abi.SpawnRequest{Module: cfg.Child, Input: b.Handle(),
			Caps: []abi.SpawnCap{{Handle: card.Handle(), Name: "card"}}, Timeout: "30s"})
		if err != nil {
			panic(err)
		}
		kids = append(kids, k)
	}
	counts := map[string]int{}
	for _, k := range kids {
		res, err := k.Wait()
		if err != nil {
			counts["wait:"+mandate.ErrnoOf(err).String()]++
			continue
		}
		b, _ := res.Bytes()
		counts[string(b)]++
	}
	out, _ := json.Marshal(counts)
	mandate.SetResult(out)
}
