package wasmbin

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/mandatevm/mandate/internal/wasmasm"
)

func TestParseTablesAndImports(t *testing.T) {
	wasm := module(
		[]byte{SecImport, 1, 1, 'a', 1, 'b', ExternFunc, 0},
		[]byte{SecTable, 2, 0x70, 0, 5, 0x70, 1, 9, 20},
		[]byte{SecMemory, 1, 0, 2},
	)
	m, err := Parse(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Tables, 2; got != want {
		t.Errorf("Tables = %d, want %d", got, want)
	}
	if got, want := m.TableMin, uint64(9); got != want {
		t.Errorf("TableMin = %d, want %d", got, want)
	}
	if !m.HasMem || m.MemMin != 2 {
		t.Errorf("memory = %v/%d, want true/2", m.HasMem, m.MemMin)
	}
	if len(m.Imports) != 1 || m.Imports[0] != (Import{Module: "a", Name: "b", Kind: ExternFunc}) {
		t.Errorf("Imports = %+v", m.Imports)
	}
}

// module assembles a module from sections given as id then payload.
func module(secs ...[]byte) []byte {
	var out [][]byte
	for _, s := range secs {
		out = append(out, wasmasm.Section(s[0], s[1:]))
	}
	return wasmasm.Module(out...)
}

func TestCoalesceRefuses(t *testing.T) {
	mem := []byte{SecMemory, 1, 0, 1}
	active := func(off byte, b ...byte) []byte {
		return append([]byte{0, 0x41, off, 0x0b, byte(len(b))}, b...)
	}
	data := func(segs ...[]byte) []byte {
		s := []byte{SecData, byte(len(segs))}
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
		{"datacount", module(mem, []byte{SecDataCount, 2}, data(active(0, 1), active(4, 2))), false},
		{"non-const offset", module(mem, data(active(0, 1), []byte{0, 0x23, 0, 0x0b, 1, 5})), false},
		{"one segment", module(mem, data(active(0, 1))), false},
		{"trailing bytes", module(mem, append(data(active(0, 1), active(4, 2)), 0)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, err := Parse(tt.wasm)
			if err != nil {
				t.Fatal(err)
			}
			out, ok := Coalesce(tt.wasm, bin)
			if ok != tt.want {
				t.Fatalf("Coalesce ok = %v, want %v", ok, tt.want)
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
		b := wasmasm.Sleb(int64(v))
		got, err := (&reader{b: b}).sleb32()
		if err != nil || got != v {
			t.Errorf("sleb32(% x) = %d, %v; want %d", b, got, err, v)
		}
	}
}

func FuzzParseAndCoalesce(f *testing.F) {
	f.Add(module([]byte{SecMemory, 1, 0, 1}, []byte{SecData, 2, 0, 0x41, 0, 0x0b, 1, 1, 0, 0x41, 4, 0x0b, 1, 2}))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x02\x07\x01\x01a\x01b\x00\x00"))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		bin, err := Parse(wasm)
		if err != nil {
			return
		}
		if out, ok := Coalesce(wasm, bin); ok {
			if _, err := Parse(out); err != nil {
				t.Fatalf("coalesced module does not parse: %v", err)
			}
		}
	})
}

func TestCapTables(t *testing.T) {
	mem := []byte{SecMemory, 1, 0, 1}
	tests := []struct {
		name      string
		table     []byte // table section payload
		want      []byte // nil: unchanged
		wantError bool
	}{
		{"no max", []byte{1, 0x70, 0, 5}, []byte{1, 0x70, 1, 5, 0x90, 0x4e}, false}, // max 10,000
		{"larger max", []byte{1, 0x70, 1, 0, 0xff, 0xff, 0x03}, []byte{1, 0x70, 1, 0, 0x90, 0x4e}, false},
		{"smaller max", []byte{1, 0x70, 1, 0, 7}, nil, false},
		{"initial above the cap", []byte{1, 0x70, 0, 0xa0, 0x9c, 0x01}, []byte{1, 0x70, 1, 0xa0, 0x9c, 0x01, 0xa0, 0x9c, 0x01}, false}, // 20,000
		{"table64", []byte{1, 0x70, 4, 0}, nil, true},
		{"initial over MaxTableInitial", []byte{1, 0x70, 0, 0x80, 0x80, 0x80, 0x20}, nil, true}, // 2^26
		{"initial at MaxTableInitial", []byte{1, 0x70, 0, 0x80, 0x80, 0x04}, []byte{1, 0x70, 1, 0x80, 0x80, 0x04, 0x80, 0x80, 0x04}, false},
		{"too many tables", manyTables(MaxTables + 1), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := module(append([]byte{SecTable}, tt.table...), mem)
			out, err := CapTables(in, MaxTableElements)
			if tt.wantError {
				if err == nil {
					t.Fatalf("CapTables = nil error, want one")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := in
			if tt.want != nil {
				want = module(append([]byte{SecTable}, tt.want...), mem)
			}
			if !bytes.Equal(out, want) {
				t.Errorf("CapTables = % x\nwant        % x", out, want)
			}
		})
	}
	// No table: unchanged.
	if out, err := CapTables(module(mem), MaxTableElements); err != nil || !bytes.Equal(out, module(mem)) {
		t.Errorf("CapTables without a table = % x, %v", out, err)
	}
}

func FuzzCapTables(f *testing.F) {
	f.Add(module([]byte{SecTable, 1, 0x70, 0, 5}, []byte{SecMemory, 1, 0, 1}))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := CapTables(wasm, MaxTableElements)
		if err != nil {
			return
		}
		m, err := Parse(out)
		if err != nil {
			t.Fatalf("capped module does not parse: %v", err)
		}
		_ = m
	})
}

// manyTables is a table section payload declaring n one-element tables.
func manyTables(n int) []byte {
	b := binary.AppendUvarint(nil, uint64(n))
	for range n {
		b = append(b, 0x70, 0, 1)
	}
	return b
}
