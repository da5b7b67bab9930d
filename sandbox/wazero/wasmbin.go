package wazero

import (
	"errors"
	"fmt"
)

// A minimal reader of the WebAssembly binary format: just enough to list a
// module's imports and its memory before wazero sees it, and to find the data
// section (see coalesce.go). wazero validates the module fully afterwards;
// anything this reader does not understand is an error, and callers treat an
// error as "do not touch the module".

const (
	secCustom = 0
	secImport = 2
	secMemory = 5
	secData   = 11

	externFunc   = 0
	externTable  = 1
	externMemory = 2
	externGlobal = 3
	externTag    = 4
)

var errMalformed = errors.New("malformed module")

type wasmImport struct {
	module, name string
	kind         byte
}

type section struct {
	id         byte
	hdr        int // index of the id byte
	start, end int // payload bounds in the module's bytes
}

// binModule is what parseModule extracts.
type binModule struct {
	sections []section
	imports  []wasmImport
	// memMin is the initial size in pages of the module's defined memory;
	// hasMem reports whether it defines one.
	memMin uint64
	hasMem bool
}

func externName(k byte) string {
	switch k {
	case externFunc:
		return "function"
	case externTable:
		return "table"
	case externMemory:
		return "memory"
	case externGlobal:
		return "global"
	case externTag:
		return "tag"
	}
	return fmt.Sprintf("extern kind %d", k)
}

type reader struct {
	b   []byte
	off int
}

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errMalformed
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

// u32 reads an unsigned LEB128 of at most 32 bits.
func (r *reader) u32() (uint32, error) {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift == 28 && c&0x70 != 0 {
			return 0, errMalformed
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errMalformed
}

// u64 reads an unsigned LEB128 of at most 64 bits (memory64 limits).
func (r *reader) u64() (uint64, error) {
	var v uint64
	for shift := 0; shift < 70; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift == 63 && c&0x7e != 0 {
			return 0, errMalformed
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errMalformed
}

func (r *reader) bytes(n uint32) ([]byte, error) {
	if uint64(r.off)+uint64(n) > uint64(len(r.b)) {
		return nil, errMalformed
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s, nil
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n)
	return string(b), err
}

// limits reads a limits/memtype and returns its minimum.
func (r *reader) limits() (uint64, error) {
	flags, err := r.byte()
	if err != nil {
		return 0, err
	}
	if flags&^0x07 != 0 { // bit 0 max, bit 1 shared, bit 2 memory64
		return 0, errMalformed
	}
	min, err := r.u64()
	if err != nil {
		return 0, err
	}
	if flags&1 != 0 {
		if _, err := r.u64(); err != nil {
			return 0, err
		}
	}
	return min, nil
}

// parseModule splits wasm into sections and decodes the import and memory
// sections.
func parseModule(wasm []byte) (*binModule, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, fmt.Errorf("%w: bad magic or version", errMalformed)
	}
	m := &binModule{}
	r := &reader{b: wasm, off: 8}
	for r.off < len(wasm) {
		hdr := r.off
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		start := r.off
		if _, err := r.bytes(size); err != nil {
			return nil, fmt.Errorf("%w: section %d overruns the module", errMalformed, id)
		}
		m.sections = append(m.sections, section{id: id, hdr: hdr, start: start, end: r.off})
		sr := &reader{b: wasm[:r.off], off: start}
		switch id {
		case secImport:
			if err := m.parseImports(sr); err != nil {
				return nil, fmt.Errorf("import section: %w", err)
			}
		case secMemory:
			n, err := sr.u32()
			if err != nil {
				return nil, err
			}
			if n > 1 {
				return nil, fmt.Errorf("%w: %d memories", errMalformed, n)
			}
			if n == 1 {
				if m.memMin, err = sr.limits(); err != nil {
					return nil, err
				}
				m.hasMem = true
			}
		}
	}
	return m, nil
}

func (m *binModule) parseImports(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		mod, err := r.name()
		if err != nil {
			return err
		}
		name, err := r.name()
		if err != nil {
			return err
		}
		kind, err := r.byte()
		if err != nil {
			return err
		}
		m.imports = append(m.imports, wasmImport{module: mod, name: name, kind: kind})
		switch kind {
		case externFunc:
			_, err = r.u32()
		case externTable:
			if _, err = r.byte(); err == nil { // reftype
				_, err = r.limits()
			}
		case externMemory:
			_, err = r.limits()
		case externGlobal:
			if _, err = r.byte(); err == nil { // valtype
				_, err = r.byte() // mutability
			}
		case externTag:
			if _, err = r.byte(); err == nil { // attribute
				_, err = r.u32()
			}
		default:
			// Unknown kinds cannot be skipped reliably; stop here. The
			// import is recorded, so the caller refuses the module.
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}
