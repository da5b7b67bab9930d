// Command oob-pointers hands every host call pointers outside its linear
// memory: names, ops, arguments, buffers and, above all, out pointers on
// calls that would have an effect (a fetch, a charge, a derive, a spawn).
// Every range is checked before anything happens (law 10, EFAULT): the
// servers see no request, the provider no charge, the graph no new
// capability or task.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
	"github.com/mandatevm/mandate/internal/attacks/attack/raw"
)

func main() {
	in := attack.ReadInput()
	web := uint32(attack.Must(mandate.Lookup("web")).Handle())
	card := uint32(attack.Must(mandate.Lookup("card")).Handle())
	sp := uint32(attack.Must(mandate.Lookup("spawner")).Handle())
	name := []byte("web")
	fetch := []byte("fetch")
	get := []byte(`{"method":"POST","url":"/api/oob-effect"}`)
	charge := []byte(`{"payee":"airline.example","amount":"10.00","currency":"USD","idempotency_key":"oob"}`)
	chargeOp := []byte("charge")
	derive := []byte(`{"paths":["/api/oob"]}`)
	spawn, _ := json.Marshal(abi.SpawnRequest{Module: in.Self, Timeout: "1s"})

	raw.Rec("lookup_name_oob", raw.CapLookup(0x7fff_fff0, 3, raw.Out()))
	raw.Rec("lookup_out_oob", raw.CapLookup(raw.Addr(name), 3, raw.Top-1))
	raw.Rec("call_op_oob", raw.CapCall(web, raw.Top-4, 5, raw.Addr(get), uint32(len(get)), raw.Out()))
	raw.Rec("call_args_oob", raw.CapCall(web, raw.Addr(fetch), 5, 0x7000_0000, 64, raw.Out()))
	// Effects whose result cannot be written: refused before they happen.
	raw.Rec("fetch_out_oob", raw.CapCall(web, raw.Addr(fetch), 5, raw.Addr(get), uint32(len(get)), raw.Top-2))
	raw.Rec("fetch_out_unaligned_end", raw.CapCall(web, raw.Addr(fetch), 5, raw.Addr(get), uint32(len(get)), 0x7fff_fffe))
	raw.Rec("charge_out_oob", raw.CapCall(card, raw.Addr(chargeOp), 6, raw.Addr(charge), uint32(len(charge)), raw.Top))
	raw.Rec("derive_out_oob", raw.CapDerive(web, raw.Addr(derive), uint32(len(derive)), raw.Top-3))
	raw.Rec("spawn_out_oob", raw.TaskSpawn(sp, raw.Addr(spawn), uint32(len(spawn)), raw.Top-3))
	raw.Rec("spawn_req_oob", raw.TaskSpawn(sp, 0x7fff_0000, 100, raw.Out()))
	raw.Rec("describe_out_oob", raw.CapDescribe(web, raw.Top))
	raw.Rec("input_out_oob", raw.TaskInput(raw.Top-1))
	raw.Rec("blob_create_oob", raw.BlobCreate(0x7fff_ff00, 0x200, raw.Out()))
	b, _ := mandate.NewBlob([]byte("hello"))
	raw.Rec("blob_read_buf_oob", raw.BlobRead(uint32(b.Handle()), 0, 0x7fff_fff0, 16, raw.Out()))
	raw.Rec("blob_read_out_oob", raw.BlobRead(uint32(b.Handle()), 0, raw.Addr(name), 3, raw.Top))
	raw.Rec("blob_len_out_oob", raw.BlobLen(uint32(b.Handle()), raw.Top-2))
	raw.Rec("last_error_oob", raw.LastError(raw.Top-5, 100, raw.Out()))
	raw.Rec("wait_out_oob", raw.TaskWait(uint32(b.Handle()), raw.Top))
	// The same calls with good pointers work.
	raw.Rec("fetch_ok", raw.CapCall(web, raw.Addr(fetch), 5, raw.Addr(get), uint32(len(get)), raw.Out()))
	attack.Finish()
}
