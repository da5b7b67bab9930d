// Package wasmbin is a minimal reader and rewriter of the WebAssembly binary
// format shared by the sandbox engines: just enough to list a module's
// imports, memory and tables before an engine sees it, to merge its data
// segments (coalesce.go), to cap its tables (CapTables), to make a
// refused memory.grow observable (TrackGrowth, growth.go), to make a
// running guest stoppable and preemptible (Preempt, preempt.go) and to run
// a module without its function table (Devirtualize, devirt.go). The engine
// validates the module fully afterwards; anything this reader does not
// understand is an error, and callers treat an error as "do not touch the
// module" (or refuse it).
//
//	m, err := wasmbin.Parse(wasm)
//	if err != nil {
//		return err
//	}
//	for _, imp := range m.Imports {
//		// check imp.Module, imp.Name, imp.Kind
//	}
//	if merged, ok := wasmbin.Coalesce(wasm, m); ok {
//		wasm = merged
//	}
//	wasm, err = wasmbin.CapTables(wasm, wasmbin.MaxTableElements)
//	wasm, _, err = wasmbin.TrackGrowth(wasm) // then read GrowthExport after a run
//	wasm, err = wasmbin.Preempt(wasm, wasmbin.PreemptBudget) // wazero: then set StopExport to stop it
//	wasm, _ = wasmbin.Devirtualize(wasm)                     // wazero: no table built per instance
package wasmbin

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Section ids.
const (
	SecCustom = 0
	SecImport = 2
	SecTable  = 4
	SecMemory = 5
	SecExport = 7
	SecData   = 11

	// Import kinds.
	ExternFunc   = 0
	ExternTable  = 1
	ExternMemory = 2
	ExternGlobal = 3
	ExternTag    = 4
)

// ErrMalformed is what Parse returns, wrapped, for bytes it cannot read.
var ErrMalformed = errors.New("malformed module")

// Import is one entry of the import section.
type Import struct {
	Module, Name string
	Kind         byte // ExternFunc, ExternTable, ...
}

// Section locates one section in a module's bytes.
type Section struct {
	ID         byte
	Hdr        int // index of the id byte
	Start, End int // payload bounds in the module's bytes
}

// Module is what Parse extracts.
type Module struct {
	Sections []Section
	Imports  []Import
	// MemMin is the initial size in pages of the module's defined memory;
	// HasMem reports whether it defines one.
	MemMin uint64
	HasMem bool
	// Tables is the number of tables the module defines, and TableMin the
	// largest initial size (in elements) among them.
	Tables   int
	TableMin uint64
	// Exports maps each export's name to its kind (ExternFunc, ...).
	Exports map[string]byte
}

// ExternName names an import kind.
func ExternName(k byte) string {
	switch k {
	case ExternFunc:
		return "function"
	case ExternTable:
		return "table"
	case ExternMemory:
		return "memory"
	case ExternGlobal:
		return "global"
	case ExternTag:
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
		return 0, ErrMalformed
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
			return 0, ErrMalformed
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, ErrMalformed
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
			return 0, ErrMalformed
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, ErrMalformed
}

func (r *reader) bytes(n uint32) ([]byte, error) {
	if uint64(r.off)+uint64(n) > uint64(len(r.b)) {
		return nil, ErrMalformed
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
		return 0, ErrMalformed
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

// Parse splits wasm into sections and decodes the import, table and memory
// sections.
func Parse(wasm []byte) (*Module, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, fmt.Errorf("%w: bad magic or version", ErrMalformed)
	}
	m := &Module{}
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
			return nil, fmt.Errorf("%w: Section %d overruns the module", ErrMalformed, id)
		}
		m.Sections = append(m.Sections, Section{ID: id, Hdr: hdr, Start: start, End: r.off})
		sr := &reader{b: wasm[:r.off], off: start}
		switch id {
		case SecImport:
			if err := m.parseImports(sr); err != nil {
				return nil, fmt.Errorf("import Section: %w", err)
			}
		case SecTable:
			n, err := sr.u32()
			if err != nil {
				return nil, err
			}
			if uint64(n) > uint64(size) {
				return nil, fmt.Errorf("%w: %d tables in %d bytes", ErrMalformed, n, size)
			}
			for i := uint32(0); i < n; i++ {
				if _, err := sr.byte(); err != nil { // reftype
					return nil, err
				}
				min, err := sr.limits()
				if err != nil {
					return nil, err
				}
				m.TableMin = max(m.TableMin, min)
			}
			m.Tables += int(n)
		case SecExport:
			if err := m.parseExports(sr, size); err != nil {
				return nil, fmt.Errorf("export Section: %w", err)
			}
		case SecMemory:
			n, err := sr.u32()
			if err != nil {
				return nil, err
			}
			if n > 1 {
				return nil, fmt.Errorf("%w: %d memories", ErrMalformed, n)
			}
			if n == 1 {
				if m.MemMin, err = sr.limits(); err != nil {
					return nil, err
				}
				m.HasMem = true
			}
		}
	}
	return m, nil
}

func (m *Module) parseExports(r *reader, size uint32) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	if uint64(n) > uint64(size) {
		return fmt.Errorf("%w: %d exports in %d bytes", ErrMalformed, n, size)
	}
	m.Exports = make(map[string]byte, n)
	for i := uint32(0); i < n; i++ {
		name, err := r.name()
		if err != nil {
			return err
		}
		kind, err := r.byte()
		if err != nil {
			return err
		}
		if _, err := r.u32(); err != nil { // index
			return err
		}
		m.Exports[name] = kind
	}
	return nil
}

// EntryError explains why a reactor cannot run name as its entry, which
// is not an exported function: it is exported as something else (a
// memory, a table, a global), or not at all.
func EntryError(exports map[string]byte, engine, digest, name string) error {
	if k, ok := exports[name]; ok && k != ExternFunc {
		return fmt.Errorf("%s: reactor %s exports %q as a %s, not a function: the entry must be an exported function", engine, digest, name, ExternName(k))
	}
	return fmt.Errorf("%s: reactor %s does not export %q", engine, digest, name)
}

func (m *Module) parseImports(r *reader) error {
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
		m.Imports = append(m.Imports, Import{Module: mod, Name: name, Kind: kind})
		switch kind {
		case ExternFunc:
			_, err = r.u32()
		case ExternTable:
			if _, err = r.byte(); err == nil { // reftype
				_, err = r.limits()
			}
		case ExternMemory:
			_, err = r.limits()
		case ExternGlobal:
			if _, err = r.byte(); err == nil { // valtype
				_, err = r.byte() // mutability
			}
		case ExternTag:
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

// MaxTableElements is how far a table may grow: a table.grow past
// max(the table's initial size, MaxTableElements) elements returns -1. A Go
// guest never grows its table, and without a cap a single table.grow can
// ask an engine for gigabytes (2^32 elements of 8 bytes) in one step that
// neither a deadline nor a memory limit interrupts.
const MaxTableElements = 10_000

// Bounds on what a module may declare, checked by CapTables before any
// engine allocates: a table's initial size (Go guests start near 10,200
// elements) and the number of tables. Without them a 20-byte declaration
// makes the host allocate gigabytes at instantiation, outside the task's
// memory limit.
const (
	MaxTableInitial = 1 << 16
	MaxTables       = 100
)

// ErrTooLarge is what CapTables returns, wrapped, for a module whose tables
// exceed MaxTableInitial or MaxTables, and Preempt for a function with more
// than MaxLocals locals.
var ErrTooLarge = errors.New("module too large")

// CapTables returns wasm with a maximum set on every table it defines:
// max(initial, limit) for a table without one, and the smaller of its own
// and that for a table with one. It returns wasm itself when no table
// changes, and an error when the table section can not be read (the caller
// then refuses the module rather than run it uncapped).
func CapTables(wasm []byte, limit uint64) ([]byte, error) {
	m, err := Parse(wasm)
	if err != nil {
		return nil, err
	}
	var sec *Section
	for i := range m.Sections {
		if m.Sections[i].ID == SecTable {
			if sec != nil {
				return nil, fmt.Errorf("%w: two table sections", ErrMalformed)
			}
			sec = &m.Sections[i]
		}
	}
	if sec == nil {
		return wasm, nil
	}
	r := &reader{b: wasm[:sec.End], off: sec.Start}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	if n > MaxTables {
		return nil, fmt.Errorf("%w: %d tables (at most %d)", ErrTooLarge, n, MaxTables)
	}
	body := binary.AppendUvarint(nil, uint64(n))
	changed := false
	for i := uint32(0); i < n; i++ {
		ref, err := r.byte()
		if err != nil {
			return nil, err
		}
		flags, err := r.byte()
		if err != nil {
			return nil, err
		}
		if flags > 1 { // table64 or unknown: not something we rewrite
			return nil, fmt.Errorf("%w: table limits flags %#x", ErrMalformed, flags)
		}
		min, err := r.u32()
		if err != nil {
			return nil, err
		}
		if min > MaxTableInitial {
			return nil, fmt.Errorf("%w: a table of %d elements (at most %d)", ErrTooLarge, min, MaxTableInitial)
		}
		want := max(uint64(min), limit)
		if flags == 1 {
			tmax, err := r.u32()
			if err != nil {
				return nil, err
			}
			if uint64(tmax) <= want {
				want = uint64(tmax)
			} else {
				changed = true
			}
		} else {
			changed = true
		}
		body = append(body, ref, 1)
		body = binary.AppendUvarint(body, uint64(min))
		body = binary.AppendUvarint(body, want)
	}
	if r.off != sec.End {
		return nil, fmt.Errorf("%w: trailing bytes in the table section", ErrMalformed)
	}
	if !changed {
		return wasm, nil
	}
	out := make([]byte, 0, len(wasm)+len(body))
	out = append(out, wasm[:sec.Hdr]...)
	out = append(out, SecTable)
	out = binary.AppendUvarint(out, uint64(len(body)))
	out = append(out, body...)
	out = append(out, wasm[sec.End:]...)
	return out, nil
}

// CheckImports refuses a module importing anything but functions that
// hosts defines (an import module name to its functions): no tables,
// memories, globals or tags, which could reach another live instance, and
// no function the host does not have. Both engines apply it before
// compiling; signatures are checked by each engine.
func CheckImports[F any](m *Module, hosts map[string]map[string]F) error {
	for _, imp := range m.Imports {
		if imp.Kind != ExternFunc {
			return fmt.Errorf("module imports %s %s.%s: only functions of host modules may be imported",
				ExternName(imp.Kind), imp.Module, imp.Name)
		}
		fns := hosts[imp.Module]
		if fns == nil {
			return fmt.Errorf("module imports %s.%s: %q is not a registered host module", imp.Module, imp.Name, imp.Module)
		}
		if _, ok := fns[imp.Name]; !ok {
			return fmt.Errorf("module imports %s.%s: host module %q has no function %q", imp.Module, imp.Name, imp.Module, imp.Name)
		}
	}
	if !m.HasMem {
		return errors.New("module defines no memory")
	}
	return nil
}
