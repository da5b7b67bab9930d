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
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

var sink int

func main() {
	in := attack.ReadInput()
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
		sp := attack.Must(mandate.Lookup("spawner"))
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
	attack.Set("ended", "ELOOP")
	attack.Finish()
}
