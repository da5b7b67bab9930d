// Package wasmasm encodes the WebAssembly binary format: the integers,
// names, vectors and sections that sandbox/internal/wasmbin writes when it
// rewrites a module, and that tests use to assemble small modules byte by
// byte for what a Go guest cannot do: recurse on the wasm stack, grow a
// table, import a host function with the wrong signature.
//
//	wasm := wasmasm.Module(
//		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0, 1, 0x7f})), // type 0: () -> i32
//		wasmasm.Section(3, wasmasm.Vec(wasmasm.Uleb(0))),          // func 0: type 0
//		...
//	)
package wasmasm

import "encoding/binary"

// Uleb is v in unsigned LEB128.
func Uleb(v uint64) []byte { return binary.AppendUvarint(nil, v) }

// Sleb is v in signed LEB128, as i32.const and i64.const take it.
func Sleb(v int64) []byte {
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

// Name is a length-prefixed UTF-8 name.
func Name(s string) []byte { return append(Uleb(uint64(len(s))), s...) }

// Cat concatenates byte strings.
func Cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// Vec is a vector: the count of items, then the items.
func Vec(items ...[]byte) []byte { return append(Uleb(uint64(len(items))), Cat(items...)...) }

// Section is section id with the concatenated payload, length-prefixed.
func Section(id byte, payload ...[]byte) []byte {
	p := Cat(payload...)
	return Cat([]byte{id}, Uleb(uint64(len(p))), p)
}

// Module is the magic number and version, then the sections as given.
func Module(sections ...[]byte) []byte {
	return append([]byte("\x00asm\x01\x00\x00\x00"), Cat(sections...)...)
}
