package guestbuild

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// CheckModule reports whether b is a WebAssembly module a build can have
// written: the magic number and version 1, then well-formed sections
// (each id known, each size within the file, the standard sections in
// order), with a code section. It does not validate the functions'
// bodies (the engine does, when it compiles the module): it tells a
// module from an empty file, a truncated one or something else.
func CheckModule(b []byte) error {
	if len(b) == 0 {
		return errors.New("empty file, not a WebAssembly module")
	}
	if len(b) < 8 || !bytes.Equal(b[:4], []byte("\x00asm")) {
		return errors.New("not a WebAssembly module (no \\0asm magic number)")
	}
	if v := binary.LittleEndian.Uint32(b[4:8]); v != 1 {
		return fmt.Errorf("WebAssembly binary version %d, want 1", v)
	}
	// The order of the standard sections: type 1, import 2, function 3,
	// table 4, memory 5, tag 13, global 6, export 7, start 8, element 9,
	// data count 12, code 10, data 11.
	rank := map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}
	last, code := 0, false
	for off := 8; off < len(b); {
		id := b[off]
		off++
		size, n := binary.Uvarint(b[off:])
		if n <= 0 || n > 5 {
			return fmt.Errorf("section %d at byte %d: bad size", id, off-1)
		}
		off += n
		if size > uint64(len(b)-off) {
			return fmt.Errorf("section %d at byte %d: %d bytes, past the end of the file (%d bytes)", id, off-n-1, size, len(b))
		}
		if id != 0 {
			r, ok := rank[id]
			if !ok {
				return fmt.Errorf("unknown section id %d at byte %d", id, off-n-1)
			}
			if r <= last {
				return fmt.Errorf("section %d at byte %d out of order", id, off-n-1)
			}
			last = r
			code = code || id == 10
		}
		off += int(size)
	}
	if !code {
		return errors.New("the module has no code section: no functions")
	}
	return nil
}
