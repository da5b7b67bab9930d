package attacks_test

import (
	"encoding/binary"
	"testing"

	"github.com/mandatevm/mandate/internal/wasmasm"
)

// The table-exhaustion attack cannot be written in Go: the Go compiler
// never emits table.grow, and a Go guest's one table is fixed at link
// time. So it is a module assembled here, byte by byte (tableBomb). Its
// _start grows its funcref table by delta null entries at a time until
// table.grow returns -1 (or 4,096 rounds pass: with a delta of 65,536,
// 2^28 entries, 2 GiB of host memory if nothing bounds it), then stores [rounds, table.size] at
// memory[0:8], hands those 8 bytes to the kernel (blob_create) and makes
// them its result (task_result). The table's memory is host memory, not
// linear memory, so the task's memory limit does not bound it: the engine
// must (sandbox/wazero caps every table at max(initial, 10,000) elements).
//
// initial is the table's declared initial size: a second variant declares
// a huge one, which the engine must refuse rather than allocate.

// tableBomb assembles the module.
func tableBomb(initial uint32, delta int64) []byte {
	const (
		i32      = 0x7f
		funcref  = 0x70
		opI32    = 0x41
		opGet    = 0x20
		opTee    = 0x22
		opBrIf   = 0x0d
		opBr     = 0x0c
		opEnd    = 0x0b
		opCall   = 0x10
		opDrop   = 0x1a
		opEq     = 0x46
		opGeU    = 0x4f
		opAdd    = 0x6a
		opStore  = 0x36
		opLoad   = 0x28
		opBlock  = 0x02
		opLoop   = 0x03
		void     = 0x40
		opPrefix = 0xfc
	)
	types := wasmasm.Section(1, wasmasm.Cat(wasmasm.Uleb(3),
		[]byte{0x60, 0, 0},                     // 0: () -> ()
		[]byte{0x60, 3, i32, i32, i32, 1, i32}, // 1: blob_create
		[]byte{0x60, 1, i32, 1, i32},           // 2: task_result
	))
	imports := wasmasm.Section(2, wasmasm.Cat(wasmasm.Uleb(2),
		wasmasm.Name("mandate"), wasmasm.Name("blob_create"), []byte{0x00}, wasmasm.Uleb(1),
		wasmasm.Name("mandate"), wasmasm.Name("task_result"), []byte{0x00}, wasmasm.Uleb(2),
	))
	funcs := wasmasm.Section(3, wasmasm.Cat(wasmasm.Uleb(1), wasmasm.Uleb(0)))
	table := wasmasm.Section(4, wasmasm.Cat(wasmasm.Uleb(1), []byte{funcref, 0x00}, wasmasm.Uleb(uint64(initial))))
	memory := wasmasm.Section(5, wasmasm.Cat(wasmasm.Uleb(1), []byte{0x00}, wasmasm.Uleb(1)))
	exports := wasmasm.Section(7, wasmasm.Cat(wasmasm.Uleb(2),
		wasmasm.Name("memory"), []byte{0x02}, wasmasm.Uleb(0),
		wasmasm.Name("_start"), []byte{0x00}, wasmasm.Uleb(2), // functions 0 and 1 are imports
	))
	code := wasmasm.Cat(
		wasmasm.Uleb(1), []byte{1, i32}, // local 0: rounds
		[]byte{opBlock, void, opLoop, void},
		[]byte{0xd0, funcref}, []byte{opI32}, wasmasm.Sleb(delta), []byte{opPrefix}, wasmasm.Uleb(15), wasmasm.Uleb(0), // table.grow 0
		[]byte{opI32}, wasmasm.Sleb(-1), []byte{opEq, opBrIf}, wasmasm.Uleb(1),
		[]byte{opGet}, wasmasm.Uleb(0), []byte{opI32}, wasmasm.Sleb(1), []byte{opAdd, opTee}, wasmasm.Uleb(0),
		[]byte{opI32}, wasmasm.Sleb(4096), []byte{opGeU, opBrIf}, wasmasm.Uleb(1),
		[]byte{opBr}, wasmasm.Uleb(0),
		[]byte{opEnd, opEnd},
		// memory[0] = rounds; memory[4] = table.size
		[]byte{opI32}, wasmasm.Sleb(0), []byte{opGet}, wasmasm.Uleb(0), []byte{opStore, 2, 0},
		[]byte{opI32}, wasmasm.Sleb(4), []byte{opPrefix}, wasmasm.Uleb(16), wasmasm.Uleb(0), []byte{opStore, 2, 0},
		// blob_create(0, 8, 16); task_result(memory[16])
		[]byte{opI32}, wasmasm.Sleb(0), []byte{opI32}, wasmasm.Sleb(8), []byte{opI32}, wasmasm.Sleb(16), []byte{opCall}, wasmasm.Uleb(0), []byte{opDrop},
		[]byte{opI32}, wasmasm.Sleb(16), []byte{opLoad, 2, 0}, []byte{opCall}, wasmasm.Uleb(1), []byte{opDrop},
		[]byte{opEnd},
	)
	body := wasmasm.Cat(wasmasm.Uleb(uint64(len(code))), code)
	codeSec := wasmasm.Section(10, wasmasm.Cat(wasmasm.Uleb(1), body))
	return wasmasm.Module(types, imports, funcs, table, memory, exports, codeSec)
}

// tableResult decodes the bomb's 8-byte result: rounds, final table size.
func tableResult(t *testing.T, raw []byte) (rounds, size uint32) {
	t.Helper()
	if len(raw) != 8 {
		t.Fatalf("table bomb result %x, want 8 bytes", raw)
	}
	return binary.LittleEndian.Uint32(raw), binary.LittleEndian.Uint32(raw[4:])
}
