package attacks_test

import (
	"encoding/binary"
	"testing"
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

func uleb(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func section(id byte, body []byte) []byte {
	return append(append([]byte{id}, uleb(uint64(len(body)))...), body...)
}

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

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
	types := section(1, cat(uleb(3),
		[]byte{0x60, 0, 0},                     // 0: () -> ()
		[]byte{0x60, 3, i32, i32, i32, 1, i32}, // 1: blob_create
		[]byte{0x60, 1, i32, 1, i32},           // 2: task_result
	))
	imports := section(2, cat(uleb(2),
		name("mandate"), name("blob_create"), []byte{0x00}, uleb(1),
		name("mandate"), name("task_result"), []byte{0x00}, uleb(2),
	))
	funcs := section(3, cat(uleb(1), uleb(0)))
	table := section(4, cat(uleb(1), []byte{funcref, 0x00}, uleb(uint64(initial))))
	memory := section(5, cat(uleb(1), []byte{0x00}, uleb(1)))
	exports := section(7, cat(uleb(2),
		name("memory"), []byte{0x02}, uleb(0),
		name("_start"), []byte{0x00}, uleb(2), // functions 0 and 1 are imports
	))
	code := cat(
		uleb(1), []byte{1, i32}, // local 0: rounds
		[]byte{opBlock, void, opLoop, void},
		[]byte{0xd0, funcref}, []byte{opI32}, sleb(delta), []byte{opPrefix}, uleb(15), uleb(0), // table.grow 0
		[]byte{opI32}, sleb(-1), []byte{opEq, opBrIf}, uleb(1),
		[]byte{opGet}, uleb(0), []byte{opI32}, sleb(1), []byte{opAdd, opTee}, uleb(0),
		[]byte{opI32}, sleb(4096), []byte{opGeU, opBrIf}, uleb(1),
		[]byte{opBr}, uleb(0),
		[]byte{opEnd, opEnd},
		// memory[0] = rounds; memory[4] = table.size
		[]byte{opI32}, sleb(0), []byte{opGet}, uleb(0), []byte{opStore, 2, 0},
		[]byte{opI32}, sleb(4), []byte{opPrefix}, uleb(16), uleb(0), []byte{opStore, 2, 0},
		// blob_create(0, 8, 16); task_result(memory[16])
		[]byte{opI32}, sleb(0), []byte{opI32}, sleb(8), []byte{opI32}, sleb(16), []byte{opCall}, uleb(0), []byte{opDrop},
		[]byte{opI32}, sleb(16), []byte{opLoad, 2, 0}, []byte{opCall}, uleb(1), []byte{opDrop},
		[]byte{opEnd},
	)
	body := cat(uleb(uint64(len(code))), code)
	codeSec := section(10, cat(uleb(1), body))
	return cat([]byte{0, 'a', 's', 'm', 1, 0, 0, 0}, types, imports, funcs, table, memory, exports, codeSec)
}

// tableResult decodes the bomb's 8-byte result: rounds, final table size.
func tableResult(t *testing.T, raw []byte) (rounds, size uint32) {
	t.Helper()
	if len(raw) != 8 {
		t.Fatalf("table bomb result %x, want 8 bytes", raw)
	}
	return binary.LittleEndian.Uint32(raw), binary.LittleEndian.Uint32(raw[4:])
}
