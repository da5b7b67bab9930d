// Command length-overflow passes lengths that overflow: ptr+len wrapping
// past 2^32, lengths of 4 GiB, ranges that end one byte past memory,
// lengths above each call's limit, and a read buffer that wraps. Limits are
// checked before ranges, and ranges in 64-bit arithmetic (law 10): ELIMIT
// or EFAULT, no effect, no crash.
package main

import (
	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
	"github.com/mandatevm/mandate/internal/attacks/attack/raw"
)

func main() {
	attack.ReadInput()
	web := uint32(attack.Must(mandate.Lookup("web")).Handle())
	name := []byte("web")
	fetch := []byte("fetch")
	get := []byte(`{"method":"POST","url":"/api/overflow"}`)

	raw.Rec("lookup_len_wrap", raw.CapLookup(raw.Addr(name), raw.Top, raw.Out()))
	raw.Rec("lookup_len_limit", raw.CapLookup(raw.Addr(name), abi.MaxNameLen+1, raw.Out()))
	raw.Rec("op_len_wrap", raw.CapCall(web, raw.Addr(fetch), raw.Top-raw.Addr(fetch)+2, raw.Addr(get), uint32(len(get)), raw.Out()))
	raw.Rec("op_len_limit", raw.CapCall(web, raw.Addr(fetch), abi.MaxOpLen+1, raw.Addr(get), uint32(len(get)), raw.Out()))
	raw.Rec("args_len_wrap", raw.CapCall(web, raw.Addr(fetch), 5, raw.Addr(get), raw.Top-raw.Addr(get)+1, raw.Out()))
	raw.Rec("args_len_4g", raw.CapCall(web, raw.Addr(fetch), 5, 0, raw.Top, raw.Out()))
	big := make([]byte, abi.MaxArgLen+1)
	copy(big, get)
	raw.Rec("args_len_limit", raw.CapCall(web, raw.Addr(fetch), 5, raw.Addr(big), uint32(len(big)), raw.Out()))
	raw.Rec("derive_len_wrap", raw.CapDerive(web, 0x10, raw.Top-0xf, raw.Out()))
	raw.Rec("blob_create_wrap", raw.BlobCreate(raw.Top-10, 20, raw.Out()))
	raw.Rec("blob_create_limit", raw.BlobCreate(0, abi.MaxBlobLen+1, raw.Out()))
	raw.Rec("blob_create_past_end", raw.BlobCreate(0x3fff_fff0, 0x11, raw.Out()))
	b, _ := mandate.NewBlob([]byte("hello, world"))
	buf := make([]byte, 16)
	raw.Rec("read_buf_wrap", raw.BlobRead(uint32(b.Handle()), 0, raw.Addr(buf), raw.Top-raw.Addr(buf)+1, raw.Out()))
	raw.Rec("read_offset_past_end", raw.BlobRead(uint32(b.Handle()), 13, raw.Addr(buf), 16, raw.Out()))
	raw.Rec("read_offset_4g", raw.BlobRead(uint32(b.Handle()), raw.Top, raw.Addr(buf), 16, raw.Out()))
	raw.Rec("last_error_wrap", raw.LastError(raw.Addr(buf), raw.Top, raw.Out()))
	raw.Rec("spawn_len_wrap", raw.TaskSpawn(uint32(attack.Must(mandate.Lookup("spawner")).Handle()), raw.Addr(buf), raw.Top-raw.Addr(buf)+1, raw.Out()))
	// Good lengths still work.
	raw.Rec("read_ok", raw.BlobRead(uint32(b.Handle()), 7, raw.Addr(buf), 16, raw.Out()))
	attack.Note("read", string(buf[:raw.OutValue()]))
	attack.Finish()
}
