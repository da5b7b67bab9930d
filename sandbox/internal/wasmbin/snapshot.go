package wasmbin

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mandatevm/mandate/internal/wasmasm"
)

// Pre-initialised snapshots (Wizer's method, engine-independent).
//
// A Go reactor spends most of a task's start in _initialize: the Go
// runtime's start and every package's init. None of it depends on the task:
// it runs before any input or capability exists. So an engine runs it once
// per module, in an instance whose host calls into Mandate are refused (a
// module that makes one during init gets no snapshot), and writes a new
// module that starts where _initialize ended:
//
//   - ExportGlobals gives the module an export for each of its mutable
//     globals, so the engine can read them after _initialize (an instance
//     of that variant only ever runs the snapshot's init, never a task);
//   - ApplySnapshot takes the original module, the memory and the globals
//     read, and returns the module whose data segments are the memory's
//     non-zero ranges, whose memory starts at the size init left it, whose
//     mutable globals start at their values, and which no longer exports
//     _initialize.
//
// What this reader cannot prove equivalent is refused (ErrNoSnapshot): a
// start function (it would run again), passive data segments or a
// DataCount section (memory.init would see the image, not the segment, and
// a data.drop would be forgotten), code that changes a table or drops an
// element segment (the snapshot keeps memory and globals, not tables:
// TableWrites), a memory64 or shared memory, v128 or reference-typed
// mutable globals, or constant expressions it does not know. What init
// does is the engine's to check: that it made no host call, wrote no
// output and was refused no memory growth, each a difference a snapshot
// would hide.

// ErrNoSnapshot is what ExportGlobals and ApplySnapshot return, wrapped,
// for a module that cannot be snapshotted.
var ErrNoSnapshot = errors.New("cannot snapshot")

// SnapshotGlobalExport is the name ExportGlobals gives the export of the
// i-th mutable global (counted among the module's globals, from 0).
func SnapshotGlobalExport(i int) string { return fmt.Sprintf("mandate$snapshot_global_%d", i) }

// Global is one global of a module: its value type and whether it is
// mutable.
type Global struct {
	Type    byte // 0x7f i32, 0x7e i64, 0x7d f32, 0x7c f64, ...
	Mutable bool
}

func noSnapshot(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNoSnapshot, fmt.Sprintf(format, args...))
}

// ExportGlobals returns wasm with an export SnapshotGlobalExport(i) for
// each mutable global i, and the module's globals.
func ExportGlobals(wasm []byte) ([]byte, []Global, error) {
	m, err := Parse(wasm)
	if err != nil {
		return nil, nil, err
	}
	if err := snapshotable(wasm, m); err != nil {
		return nil, nil, err
	}
	globals, _, err := parseGlobals(wasm, m)
	if err != nil {
		return nil, nil, err
	}
	exp := section(m, SecExport)
	if exp == nil {
		return nil, nil, noSnapshot("no export section")
	}
	p := wasm[exp.Start:exp.End]
	n, err := sectionCount(p)
	if err != nil {
		return nil, nil, err
	}
	r := &reader{b: p}
	if _, err := r.u32(); err != nil {
		return nil, nil, err
	}
	entries := p[r.off:]
	added := 0
	var extra []byte
	for i, g := range globals {
		if !g.Mutable {
			continue
		}
		extra = append(extra, wasmasm.Name(SnapshotGlobalExport(i))...)
		extra = append(extra, ExternGlobal)
		extra = binary.AppendUvarint(extra, uint64(i))
		added++
	}
	body := binary.AppendUvarint(nil, uint64(n)+uint64(added))
	body = append(body, entries...)
	body = append(body, extra...)
	return replaceSection(wasm, exp, SecExport, body), globals, nil
}

// ApplySnapshot returns the module wasm starting from a snapshot: mem is
// its whole linear memory after _initialize (a whole number of pages) and
// globals the bits of every global after it, by index (only the mutable
// ones are used). The result exports no _initialize.
func ApplySnapshot(wasm []byte, mem []byte, globals []uint64) ([]byte, error) {
	if len(mem)%(1<<16) != 0 {
		return nil, noSnapshot("memory of %d bytes is not whole pages", len(mem))
	}
	m, err := Parse(wasm)
	if err != nil {
		return nil, err
	}
	if err := snapshotable(wasm, m); err != nil {
		return nil, err
	}
	defs, raw, err := parseGlobals(wasm, m)
	if err != nil {
		return nil, err
	}
	if len(globals) != len(defs) {
		return nil, noSnapshot("%d global values for %d globals", len(globals), len(defs))
	}
	out := wasm
	// Globals: each mutable one starts at its value.
	if g := section(m, secGlobal); g != nil {
		body := binary.AppendUvarint(nil, uint64(len(defs)))
		for i, d := range defs {
			if !d.Mutable {
				body = append(body, raw[i]...)
				continue
			}
			body = append(body, d.Type, 0x01)
			v := globals[i]
			switch d.Type {
			case 0x7f:
				body = append(body, 0x41)
				body = append(body, wasmasm.Sleb(int64(int32(uint32(v))))...)
			case 0x7e:
				body = append(body, 0x42)
				body = append(body, wasmasm.Sleb(int64(v))...)
			case 0x7d:
				body = append(body, 0x43)
				body = binary.LittleEndian.AppendUint32(body, uint32(v))
			case 0x7c:
				body = append(body, 0x44)
				body = binary.LittleEndian.AppendUint64(body, v)
			}
			body = append(body, 0x0b)
		}
		out = replaceSection(out, g, secGlobal, body)
	}
	// Memory: starts at the size init left it.
	pages := uint64(len(mem)) >> 16
	if m2, err := Parse(out); err != nil {
		return nil, err
	} else if s := section(m2, SecMemory); s != nil {
		r := &reader{b: out[:s.End], off: s.Start}
		if n, err := r.u32(); err != nil || n != 1 {
			return nil, noSnapshot("not one memory")
		}
		flags, err := r.byte()
		if err != nil {
			return nil, err
		}
		if flags&^1 != 0 {
			return nil, noSnapshot("memory flags %#x", flags)
		}
		min, err := r.u64()
		if err != nil {
			return nil, err
		}
		body := []byte{0x01, flags}
		body = binary.AppendUvarint(body, max(min, pages))
		if flags&1 != 0 {
			mx, err := r.u64()
			if err != nil {
				return nil, err
			}
			if pages > mx {
				return nil, noSnapshot("memory of %d pages past its maximum %d", pages, mx)
			}
			body = binary.AppendUvarint(body, mx)
		}
		out = replaceSection(out, s, SecMemory, body)
	}
	// Data: the memory's non-zero ranges.
	segs := nonZeroRanges(mem, MaxDataGap)
	body := encodeData(segs)
	m3, err := Parse(out)
	if err != nil {
		return nil, err
	}
	if s := section(m3, SecData); s != nil {
		out = replaceSection(out, s, SecData, body)
	} else if len(segs) > 0 {
		return nil, noSnapshot("no data section to replace")
	}
	// Exports: no _initialize.
	m4, err := Parse(out)
	if err != nil {
		return nil, err
	}
	if s := section(m4, SecExport); s != nil {
		body, err := dropExport(out[s.Start:s.End], "_initialize")
		if err != nil {
			return nil, err
		}
		out = replaceSection(out, s, SecExport, body)
	}
	return out, nil
}

// snapshotable refuses what ApplySnapshot cannot make equivalent.
func snapshotable(wasm []byte, m *Module) error {
	if what, err := tableWrite(wasm, m); err != nil {
		return err
	} else if what != "" {
		return noSnapshot("its code changes a table or drops an element segment (%s): a snapshot keeps memory and globals only", what)
	}
	if !m.HasMem {
		return noSnapshot("no memory")
	}
	if _, ok := m.Exports["_initialize"]; !ok {
		return noSnapshot("no _initialize")
	}
	if _, ok := m.Exports["_start"]; ok {
		return noSnapshot("a command (_start)")
	}
	for _, imp := range m.Imports {
		if imp.Kind != ExternFunc {
			return noSnapshot("imports a %s", ExternName(imp.Kind))
		}
	}
	for _, s := range m.Sections {
		switch s.ID {
		case secStart:
			return noSnapshot("a start function")
		case SecDataCount:
			return noSnapshot("a DataCount section")
		}
	}
	if d := section(m, SecData); d != nil {
		if _, ok := parseActiveData(wasm[d.Start:d.End]); !ok {
			return noSnapshot("data segments that are not active, constant and disjoint")
		}
	}
	return nil
}

// parseGlobals decodes the global section: each global's type and its raw
// bytes (type, mutability, init expression).
func parseGlobals(wasm []byte, m *Module) ([]Global, [][]byte, error) {
	s := section(m, secGlobal)
	if s == nil {
		return nil, nil, nil
	}
	r := &reader{b: wasm[:s.End], off: s.Start}
	n, err := r.u32()
	if err != nil {
		return nil, nil, err
	}
	if uint64(n) > uint64(s.End-s.Start) {
		return nil, nil, ErrMalformed
	}
	globals := make([]Global, 0, n)
	raw := make([][]byte, 0, n)
	for i := uint32(0); i < n; i++ {
		start := r.off
		t, err := r.byte()
		if err != nil {
			return nil, nil, err
		}
		mut, err := r.byte()
		if err != nil {
			return nil, nil, err
		}
		if mut > 1 {
			return nil, nil, ErrMalformed
		}
		if mut == 1 && (t < 0x7c || t > 0x7f) {
			return nil, nil, noSnapshot("a mutable global of type %#x", t)
		}
		if err := skipConstExpr(r); err != nil {
			return nil, nil, err
		}
		globals = append(globals, Global{Type: t, Mutable: mut == 1})
		raw = append(raw, wasm[start:r.off])
	}
	if r.off != s.End {
		return nil, nil, ErrMalformed
	}
	return globals, raw, nil
}

// skipConstExpr reads a constant expression up to its end.
func skipConstExpr(r *reader) error {
	for {
		op, err := r.byte()
		if err != nil {
			return err
		}
		switch op {
		case 0x0b: // end
			return nil
		case 0x41, 0x42, 0x23, 0xd2: // i32.const, i64.const, global.get, ref.func
			if err := skipLEB(r); err != nil {
				return err
			}
		case 0x43: // f32.const
			if _, err := r.bytes(4); err != nil {
				return err
			}
		case 0x44: // f64.const
			if _, err := r.bytes(8); err != nil {
				return err
			}
		case 0xd0: // ref.null t
			if _, err := r.byte(); err != nil {
				return err
			}
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constants
		default:
			return noSnapshot("constant expression opcode %#x", op)
		}
	}
}

// skipLEB skips one LEB128 of at most 10 bytes.
func skipLEB(r *reader) error {
	for i := 0; i < 10; i++ {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return ErrMalformed
}

// dropExport returns an export section body without the export name.
func dropExport(p []byte, name string) ([]byte, error) {
	r := &reader{b: p}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	var kept []byte
	count := uint32(0)
	for i := uint32(0); i < n; i++ {
		start := r.off
		nm, err := r.name()
		if err != nil {
			return nil, err
		}
		if _, err := r.byte(); err != nil {
			return nil, err
		}
		if _, err := r.u32(); err != nil {
			return nil, err
		}
		if nm == name {
			continue
		}
		kept = append(kept, p[start:r.off]...)
		count++
	}
	if r.off != len(p) {
		return nil, ErrMalformed
	}
	return append(binary.AppendUvarint(nil, uint64(count)), kept...), nil
}

// nonZeroRanges is mem's non-zero bytes as segments, runs of at most maxGap
// zeros between two of them merged into one.
func nonZeroRanges(mem []byte, maxGap int) []dataSeg {
	var segs []dataSeg
	i := 0
	for i < len(mem) {
		// Skip zeros a word at a time.
		for i+8 <= len(mem) && binary.LittleEndian.Uint64(mem[i:]) == 0 {
			i += 8
		}
		for i < len(mem) && mem[i] == 0 {
			i++
		}
		if i >= len(mem) {
			break
		}
		start := i
		end := i // one past the last non-zero byte seen
		for i < len(mem) {
			if mem[i] != 0 {
				i++
				end = i
				continue
			}
			z := i
			for i < len(mem) && mem[i] == 0 && i-z <= maxGap {
				i++
			}
			if i >= len(mem) || i-z > maxGap {
				break
			}
		}
		segs = append(segs, dataSeg{off: uint32(start), init: mem[start:end]})
		i = end
	}
	return segs
}

// encodeData encodes a data section body of active segments on memory 0.
func encodeData(segs []dataSeg) []byte {
	body := binary.AppendUvarint(nil, uint64(len(segs)))
	for _, s := range segs {
		body = append(body, 0x00, 0x41) // active on memory 0; i32.const
		body = append(body, wasmasm.Sleb(int64(int32(s.off)))...)
		body = append(body, 0x0b) // end
		body = binary.AppendUvarint(body, uint64(len(s.init)))
		body = append(body, s.init...)
	}
	return body
}

// section is m's section id, nil when it has none.
func section(m *Module, id byte) *Section {
	for i := range m.Sections {
		if m.Sections[i].ID == id {
			return &m.Sections[i]
		}
	}
	return nil
}

// replaceSection returns wasm with section s replaced by one of id with
// body.
func replaceSection(wasm []byte, s *Section, id byte, body []byte) []byte {
	out := make([]byte, 0, len(wasm)-(s.End-s.Hdr)+len(body)+6)
	out = append(out, wasm[:s.Hdr]...)
	out = append(out, id)
	out = binary.AppendUvarint(out, uint64(len(body)))
	out = append(out, body...)
	out = append(out, wasm[s.End:]...)
	return out
}

// tableWrite returns the first instruction of wasm's code that changes a
// table or drops an element segment, or "" when none does.
func tableWrite(wasm []byte, m *Module) (string, error) {
	at, err := indexSections(m)
	if err != nil {
		return "", err
	}
	payload := func(id byte) []byte { return at.payload(wasm, m, id) }
	imp, err := scanImports(payload(SecImport))
	if err != nil {
		return "", fmt.Errorf("import section: %w", err)
	}
	types, _, _, err := scanTypes(payload(secType), growSig)
	if err != nil {
		return "", fmt.Errorf("type section: %w", err)
	}
	funcs, err := checkFunctions(payload(secFunction), types)
	if err != nil {
		return "", fmt.Errorf("function section: %w", err)
	}
	globals, err := sectionCount(payload(secGlobal))
	if err != nil {
		return "", fmt.Errorf("global section: %w", err)
	}
	sc := &codeScanner{types: uint64(types), funcs: uint64(imp.funcs) + uint64(funcs), globals: uint64(imp.globals) + uint64(globals)}
	if _, err := sc.scanCode(payload(secCode), funcs); err != nil {
		return "", err
	}
	return sc.tableWrite, nil
}

// SplitImage returns a module (a snapshot, what ApplySnapshot returns, or
// any module whose data segments are all plain) with no data segments,
// and the memory image they wrote: MemMin pages, the segments applied to
// zeros in order. An engine that maps the image as a task's memory (copy
// on write) compiles the stripped module, so instantiation neither copies
// the image nor allocates and zeroes a memory for it. It refuses data
// whose effect is not that image alone: a DataCount section (passive
// segments), a segment not active on memory 0 at an "i32.const c"
// offset, or one past MemMin (whose instantiation fails); the caller then
// compiles the module as it is.
func SplitImage(snap []byte) (stripped, image []byte, err error) {
	m, err := Parse(snap)
	if err != nil {
		return nil, nil, err
	}
	if section(m, SecDataCount) != nil {
		return nil, nil, noSnapshot("a DataCount section")
	}
	if m.MemMin<<16 > 1<<32 {
		return nil, nil, noSnapshot("memory of %d pages", m.MemMin)
	}
	image = make([]byte, m.MemMin<<16)
	s := section(m, SecData)
	if s == nil {
		return snap, image, nil
	}
	segs, ok := parseActiveData(snap[s.Start:s.End])
	if !ok {
		return nil, nil, noSnapshot("data segments that are not a snapshot's")
	}
	for _, seg := range segs {
		if uint64(seg.off)+uint64(len(seg.init)) > uint64(len(image)) {
			return nil, nil, noSnapshot("a data segment past the memory's %d pages", m.MemMin)
		}
		copy(image[seg.off:], seg.init)
	}
	return replaceSection(snap, s, SecData, []byte{0}), image, nil
}
