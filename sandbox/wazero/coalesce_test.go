package wazero

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// TestCoalesceSameMemory instantiates each guest from its original and its
// coalesced bytes and compares the initial memories byte for byte.
func TestCoalesceSameMemory(t *testing.T) {
	ctx := context.Background()
	e := newTestEngine(t, sandbox.Config{})
	if err := e.Host("mandate_test", (&sandboxtest.TestHost{}).Funcs()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hello", "reactor", "compute"} {
		t.Run(name, func(t *testing.T) {
			orig := sandboxtest.Guest(name)
			bin, err := wasmbin.Parse(orig)
			if err != nil {
				t.Fatal(err)
			}
			merged, ok := wasmbin.Coalesce(orig, bin)
			if !ok {
				t.Fatal("coalesceData refused a Go guest")
			}
			before, _ := dataSegmentCount(orig)
			after, _ := dataSegmentCount(merged)
			t.Logf("data segments: %d -> %d; module %d -> %d bytes", before, after, len(orig), len(merged))
			if after >= before {
				t.Errorf("segments %d -> %d, want fewer", before, after)
			}
			memOf := func(wasm []byte) []byte {
				t.Helper()
				inst, err := e.rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithStartFunctions().WithName(""))
				if err != nil {
					t.Fatal(err)
				}
				defer inst.Close(ctx)
				b, _ := inst.Memory().Read(0, inst.Memory().Size())
				return bytes.Clone(b)
			}
			if !bytes.Equal(memOf(orig), memOf(merged)) {
				t.Fatal("initial memory differs after coalescing")
			}
		})
	}
}

func dataSegmentCount(wasm []byte) (uint32, bool) {
	bin, err := wasmbin.Parse(wasm)
	if err != nil {
		return 0, false
	}
	for _, s := range bin.Sections {
		if s.ID == wasmbin.SecData {
			n, _ := binary.Uvarint(wasm[s.Start:s.End])
			return uint32(n), true
		}
	}
	return 0, false
}
