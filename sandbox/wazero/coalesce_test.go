package wazero

import (
	"bytes"
	"context"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/mandatevm/mandate/sandbox"
)

// TestCoalesceSameMemory instantiates each guest from its original and its
// coalesced bytes and compares the initial memories byte for byte.
func TestCoalesceSameMemory(t *testing.T) {
	ctx := context.Background()
	e, _ := newTestEngine(t, sandbox.Config{})
	for _, name := range []string{"hello", "reactor", "compute"} {
		t.Run(name, func(t *testing.T) {
			orig := guests[name]
			bin, err := parseModule(orig)
			if err != nil {
				t.Fatal(err)
			}
			merged, ok := coalesceData(orig, bin)
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
	bin, err := parseModule(wasm)
	if err != nil {
		return 0, false
	}
	for _, s := range bin.sections {
		if s.id == secData {
			r := &reader{b: wasm[:s.end], off: s.start}
			n, err := r.u32()
			return n, err == nil
		}
	}
	return 0, false
}

// module assembles a module from sections (id, payload).
func module(secs ...[]byte) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range secs {
		out = append(out, s[0], byte(len(s)-1)) // payloads here are < 128 bytes
		out = append(out, s[1:]...)
	}
	return out
}

func TestCoalesceRefuses(t *testing.T) {
	mem := []byte{secMemory, 1, 0, 1}
	active := func(off byte, b ...byte) []byte {
		return append([]byte{0, 0x41, off, 0x0b, byte(len(b))}, b...)
	}
	data := func(segs ...[]byte) []byte {
		s := []byte{secData, byte(len(segs))}
		for _, seg := range segs {
			s = append(s, seg...)
		}
		return s
	}
	tests := []struct {
		name string
		wasm []byte
		want bool
	}{
		{"mergeable", module(mem, data(active(0, 1), active(4, 2), active(8, 3))), true},
		{"unsorted", module(mem, data(active(8, 3), active(0, 1), active(4, 2))), true},
		{"overlapping", module(mem, data(active(2, 9), active(0, 1, 2, 3))), false},
		{"passive", module(mem, data(active(0, 1), []byte{1, 1, 7})), false},
		{"datacount", module(mem, []byte{secDataCount, 2}, data(active(0, 1), active(4, 2))), false},
		{"non-const offset", module(mem, data(active(0, 1), []byte{0, 0x23, 0, 0x0b, 1, 5})), false},
		{"one segment", module(mem, data(active(0, 1))), false},
		{"trailing bytes", module(mem, append(data(active(0, 1), active(4, 2)), 0)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, err := parseModule(tt.wasm)
			if err != nil {
				t.Fatal(err)
			}
			out, ok := coalesceData(tt.wasm, bin)
			if ok != tt.want {
				t.Fatalf("coalesceData ok = %v, want %v", ok, tt.want)
			}
			if ok {
				want := module(mem, data(active(0, 1, 0, 0, 0, 2, 0, 0, 0, 3)))
				if !bytes.Equal(out, want) {
					t.Errorf("coalesced = % x\nwant        % x", out, want)
				}
			}
		})
	}
}

func TestSleb32RoundTrip(t *testing.T) {
	for _, v := range []int32{0, 1, -1, 63, 64, -64, -65, 1 << 20, -1 << 31, 1<<31 - 1} {
		b := appendSleb32(nil, v)
		got, err := (&reader{b: b}).sleb32()
		if err != nil || got != v {
			t.Errorf("sleb32(% x) = %d, %v; want %d", b, got, err, v)
		}
	}
}

func FuzzParseAndCoalesce(f *testing.F) {
	f.Add(module([]byte{secMemory, 1, 0, 1}, []byte{secData, 2, 0, 0x41, 0, 0x0b, 1, 1, 0, 0x41, 4, 0x0b, 1, 2}))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x02\x07\x01\x01a\x01b\x00\x00"))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		bin, err := parseModule(wasm)
		if err != nil {
			return
		}
		if out, ok := coalesceData(wasm, bin); ok {
			if _, err := parseModule(out); err != nil {
				t.Fatalf("coalesced module does not parse: %v", err)
			}
		}
	})
}
