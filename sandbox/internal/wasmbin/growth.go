package wasmbin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mandatevm/mandate/internal/wasmasm"
)

// Why track memory growth?
//
// An engine whose memory limiter does not say that it refused a growth
// (wasmtime-go's static Store.Limiter: memory.grow just returns -1) can not
// tell a guest that died because its memory limit was reached from one
// that died for another reason. Guessing from the memory's final size is
// wrong both ways: a guest refused one huge growth far below the limit is
// missed, and a guest that fills its memory close to the limit and then
// exits 2 with "out of memory" on stderr fakes it.
//
// TrackGrowth makes the refusal observable from the refused instruction
// itself. It rewrites the module so that every memory.grow goes through
// one new function, appended to the function index space (so no existing
// index shifts):
//
//	(func $grow (param $delta i32) (result i32) (local $r i32) (local $want i64)
//	  (local.tee $r (memory.grow (local.get $delta)))
//	  (if (i32.eq (i32.const -1))
//	    (then
//	      (local.set $want (i64.add (i64.extend_i32_u (memory.size))
//	                                (i64.extend_i32_u (local.get $delta))))
//	      (if (i64.gt_u (local.get $want) (global.get $refused))
//	        (then (global.set $refused (local.get $want))))))
//	  (local.get $r))
//
// $refused is a new mutable i64 global, appended to the global index space
// and exported as GrowthExport: after a run it holds the largest memory
// size, in 64 KiB pages, that a refused memory.grow asked for (0 when none
// was refused). The host compares it with the run's limit: a growth refused
// for another reason (past the memory's own declared maximum, say) is not
// mistaken for the limit. The memory does not even need to be exported.
//
// No guest code can write $refused: before the rewrite its index does not
// exist, and TrackGrowth refuses a module whose code or exports name a
// global or function past the original index spaces (such a module is
// invalid as it stands, and would become valid only by the rewrite). A
// guest calling $grow (through a table, say) only grows its memory, which
// records nothing but a real refusal. The export is not importable by
// anything: the engine refuses imports of globals, and the name is
// reserved (ReservedExport).
//
// Decoding where each instruction starts needs the length of every
// instruction, so the code section is decoded in full, for the proposals
// the wasmtime engine enables by default: MVP, sign extension, saturating
// truncation, bulk memory, reference types (funcref and externref only),
// multi-value, SIMD and relaxed SIMD, threads (atomics), tail calls,
// extended constant expressions, and the memarg/memory-index encodings of
// memory64 and multi-memory. Anything else (GC, typed function
// references, exceptions, wide arithmetic, an unknown opcode) is an error
// and the module is refused; the engine would refuse most of it anyway.
//
// The module is left as it is when it has no memory, when its memory is
// 64-bit, when it has more than one memory, or when no code grows memory:
// then no refused growth can be observed, and Run never reports the limit.
//
// Code offsets change, so the DWARF custom sections (".debug_*"), which
// refer to them, are dropped rather than left stale. The name section is
// kept as it is: the new function has no name.

// GrowthExport is the export under which TrackGrowth's module exposes the
// largest memory size, in pages, that a refused memory.grow asked for.
const GrowthExport = "mandate$grow_refused"

// ErrUnsupported is what TrackGrowth returns, wrapped, for code it cannot
// decode: an opcode of a proposal the engine does not enable, or none.
var ErrUnsupported = errors.New("unsupported instruction")

// ReservedExport refuses a module that exports GrowthExport itself.
func ReservedExport(m *Module) error {
	if _, ok := m.Exports[GrowthExport]; ok {
		return fmt.Errorf("module exports %q, a name reserved for the engine", GrowthExport)
	}
	return nil
}

// Section ids TrackGrowth edits, besides those above.
const (
	secType     = 1
	secFunction = 3
	secGlobal   = 6
	secStart    = 8
	secElement  = 9
	secCode     = 10
	secTag      = 13
)

// sectionRank orders the known sections as the binary format requires.
func sectionRank(id byte) int {
	switch id {
	case secType, SecImport, secFunction, SecTable, SecMemory:
		return int(id)
	case secTag:
		return 6
	case secGlobal, SecExport, secStart, secElement:
		return int(id) + 1 // 7 .. 10
	case SecDataCount:
		return 11
	case secCode:
		return 12
	case SecData:
		return 13
	}
	return 0
}

// growSite is one memory.grow instruction in a function body: body[start:end].
type growSite struct{ start, end int }

// TrackGrowth returns wasm rewritten so that every memory.grow records a
// refused growth in the global exported as GrowthExport (see above), and
// the number of memory.grow instructions it replaced. It returns wasm
// itself and 0 when the module is left alone: no memory, a 64-bit memory,
// several memories, or no memory.grow. It returns an error, and the caller
// refuses the module, when the module can not be decoded, uses an
// instruction the decoder does not know, names an index past the original
// function or global index spaces, or already exports GrowthExport.
func TrackGrowth(wasm []byte) ([]byte, int, error) {
	m, err := Parse(wasm)
	if err != nil {
		return nil, 0, err
	}
	if err := ReservedExport(m); err != nil {
		return nil, 0, err
	}
	at, err := indexSections(m)
	if err != nil {
		return nil, 0, err
	}
	payload := func(id byte) []byte { return at.payload(wasm, m, id) }

	imp, err := scanImports(payload(SecImport))
	if err != nil {
		return nil, 0, fmt.Errorf("import section: %w", err)
	}
	mems := imp.memFlags
	if p := payload(SecMemory); p != nil {
		r := &reader{b: p}
		n, err := r.u32()
		if err != nil {
			return nil, 0, err
		}
		for i := uint32(0); i < n; i++ {
			if r.off >= len(p) {
				return nil, 0, fmt.Errorf("%w: memory section", ErrMalformed)
			}
			flags := p[r.off]
			if _, err := r.limits(); err != nil {
				return nil, 0, err
			}
			mems = append(mems, flags)
		}
	}
	if len(mems) != 1 || mems[0]&0x04 != 0 {
		// No memory, several memories, or a 64-bit one: left alone.
		return wasm, 0, nil
	}

	types, growTypeIdx, _, err := scanTypes(payload(secType), growSig)
	if err != nil {
		return nil, 0, fmt.Errorf("type section: %w", err)
	}
	funcs, err := checkFunctions(payload(secFunction), types)
	if err != nil {
		return nil, 0, fmt.Errorf("function section: %w", err)
	}
	globals, err := sectionCount(payload(secGlobal))
	if err != nil {
		return nil, 0, fmt.Errorf("global section: %w", err)
	}
	nFuncs := uint64(imp.funcs) + uint64(funcs)
	nGlobals := uint64(imp.globals) + uint64(globals)
	if nFuncs >= 1<<32-1 || nGlobals >= 1<<32-1 {
		return nil, 0, fmt.Errorf("%w: index space full", ErrMalformed)
	}
	// Every section the rewrite appends to is decoded in full, so that
	// what it appends can not complete a truncated entry of the guest's.
	gs := &codeScanner{b: payload(secGlobal), types: uint64(types), funcs: nFuncs, globals: nGlobals}
	if err := gs.globalSection(); err != nil {
		return nil, 0, fmt.Errorf("global section: %w", err)
	}
	if _, err := exportFuncRefs(payload(SecExport), nFuncs, nGlobals); err != nil {
		return nil, 0, fmt.Errorf("export section: %w", err)
	}

	code := payload(secCode)
	sc := &codeScanner{types: uint64(types), funcs: nFuncs, globals: nGlobals}
	bodies, err := sc.scanCode(code, funcs)
	if err != nil {
		return nil, 0, err
	}
	sites := 0
	for _, b := range bodies {
		sites += len(b.sites)
	}
	if sites == 0 {
		return wasm, 0, nil
	}

	if types == 0 {
		return nil, 0, fmt.Errorf("%w: functions without types", ErrMalformed)
	}
	typePayload := payload(secType)
	typeIdx := uint32(growTypeIdx)
	if growTypeIdx < 0 {
		if types == 1<<32-1 {
			return nil, 0, fmt.Errorf("%w: too many types", ErrMalformed)
		}
		typeIdx = types
		typePayload = appendEntry(typePayload, types, growSig)
	}
	growFunc := uint32(nFuncs)
	refused := uint32(nGlobals)

	replaced := map[byte][]byte{
		secType:     typePayload,
		secFunction: appendEntry(payload(secFunction), funcs, wasmasm.Uleb(uint64(typeIdx))),
		secGlobal:   appendEntry(payload(secGlobal), globals, []byte{0x7e, 0x01, 0x42, 0x00, 0x0b}), // mut i64 = i64.const 0
		secCode:     rewriteCode(code, funcs, bodies, growFunc, growBody(refused)),
	}
	exports, err := sectionCount(payload(SecExport))
	if err != nil {
		return nil, 0, fmt.Errorf("export section: %w", err)
	}
	replaced[SecExport] = appendEntry(payload(SecExport), exports,
		wasmasm.Cat(wasmasm.Name(GrowthExport), []byte{ExternGlobal}, wasmasm.Uleb(uint64(refused))))
	for _, p := range replaced {
		if uint64(len(p)) > 1<<32-1 {
			return nil, 0, fmt.Errorf("%w: section too large", ErrMalformed)
		}
	}

	return rebuild(wasm, m, at, replaced, nil), sites, nil
}

// sections maps each known section id to its index in Module.Sections,
// -1 for a section the module does not have.
type sections [14]int

// indexSections indexes m's sections, refusing an unknown section id and a
// known section that appears twice.
func indexSections(m *Module) (sections, error) {
	var at sections
	for i := range at {
		at[i] = -1
	}
	for i, s := range m.Sections {
		if s.ID == SecCustom {
			continue
		}
		if int(s.ID) >= len(at) || sectionRank(s.ID) == 0 {
			return at, fmt.Errorf("%w: unknown section %d", ErrMalformed, s.ID)
		}
		if at[s.ID] >= 0 {
			return at, fmt.Errorf("%w: two sections with id %d", ErrMalformed, s.ID)
		}
		at[s.ID] = i
	}
	return at, nil
}

// payload is the payload of section id in wasm, nil when m has none.
func (at *sections) payload(wasm []byte, m *Module, id byte) []byte {
	if at[id] < 0 {
		return nil
	}
	s := m.Sections[at[id]]
	return wasm[s.Start:s.End]
}

// rebuild writes wasm with the payload of each section in replaced
// substituted, or inserted in rank order when the module lacks that
// section. DWARF custom sections (".debug_*") are dropped: their code
// offsets would be stale. custom, when not nil, is given every other custom
// section and returns the payload to write in its place.
func rebuild(wasm []byte, m *Module, at sections, replaced map[byte][]byte, custom func(s Section) []byte) []byte {
	size := len(wasm) + 256
	for id, p := range replaced {
		size += len(p)
		if at[id] >= 0 {
			size -= m.Sections[at[id]].End - m.Sections[at[id]].Start
		}
	}
	out := make([]byte, 0, size)
	out = append(out, wasm[:8]...)
	emit := func(id byte, p []byte) []byte {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(p)))
		return append(out, p...)
	}
	// pending are the replaced sections the module does not have yet, in
	// rank order: each is written before the first section ranked after it.
	var pending []byte
	for id := range replaced {
		if at[id] < 0 {
			pending = append(pending, id)
		}
	}
	slices.SortFunc(pending, func(a, b byte) int { return sectionRank(a) - sectionRank(b) })
	for _, s := range m.Sections {
		if s.ID == SecCustom {
			p := wasm[s.Start:s.End]
			if name, err := (&reader{b: p}).name(); err == nil && strings.HasPrefix(name, ".debug_") {
				continue // DWARF: its code offsets would be stale
			}
			if custom == nil {
				out = append(out, wasm[s.Hdr:s.End]...)
			} else {
				out = emit(SecCustom, custom(s))
			}
			continue
		}
		for len(pending) > 0 && sectionRank(pending[0]) < sectionRank(s.ID) {
			out = emit(pending[0], replaced[pending[0]])
			pending = pending[1:]
		}
		if p, ok := replaced[s.ID]; ok {
			out = emit(s.ID, p)
		} else {
			out = append(out, wasm[s.Hdr:s.End]...)
		}
	}
	for _, id := range pending {
		out = emit(id, replaced[id])
	}
	return out
}

// growBody is the body of $grow (see above), with global refused.
func growBody(refused uint32) []byte {
	g := wasmasm.Uleb(uint64(refused))
	b := []byte{
		0x02, 0x01, 0x7f, 0x01, 0x7e, // locals: 1 i32 ($r), 1 i64 ($want)
		0x20, 0x00, // local.get $delta
		0x40, 0x00, // memory.grow 0
		0x22, 0x01, // local.tee $r
		0x41, 0x7f, // i32.const -1
		0x46,       // i32.eq
		0x04, 0x40, // if
		0x3f, 0x00, //   memory.size 0
		0xad,       //   i64.extend_i32_u
		0x20, 0x00, //   local.get $delta
		0xad,       //   i64.extend_i32_u
		0x7c,       //   i64.add
		0x22, 0x02, //   local.tee $want
	}
	b = append(append(b, 0x23), g...) //   global.get $refused
	b = append(b,
		0x56,       //   i64.gt_u
		0x04, 0x40, //   if
		0x20, 0x02, //     local.get $want
	)
	b = append(append(b, 0x24), g...) //     global.set $refused
	return append(b,
		0x0b,       //   end
		0x0b,       // end
		0x20, 0x01, // local.get $r
		0x0b, // end
	)
}

// sectionCount is the item count a vector section starts with (0 when the
// section is absent).
func sectionCount(p []byte) (uint32, error) {
	if p == nil {
		return 0, nil
	}
	return (&reader{b: p}).u32()
}

// appendEntry returns a vector section's payload p (nil: absent) of n
// items with entry appended.
func appendEntry(p []byte, n uint32, entry []byte) []byte {
	rest := p
	if p != nil {
		r := &reader{b: p}
		r.u32() // the caller read it before
		rest = p[r.off:]
	}
	out := binary.AppendUvarint(make([]byte, 0, len(p)+len(entry)+5), uint64(n)+1)
	out = append(out, rest...)
	return append(out, entry...)
}

// imports is what TrackGrowth needs of the import section.
type imports struct {
	funcs, globals uint32
	memFlags       []byte   // the limits flags of each imported memory
	funcTypes      []uint32 // the type of each imported function
}

func scanImports(p []byte) (imports, error) {
	var imp imports
	if p == nil {
		return imp, nil
	}
	r := &reader{b: p}
	n, err := r.u32()
	if err != nil {
		return imp, err
	}
	for i := uint32(0); i < n; i++ {
		if _, err := r.name(); err != nil {
			return imp, err
		}
		if _, err := r.name(); err != nil {
			return imp, err
		}
		kind, err := r.byte()
		if err != nil {
			return imp, err
		}
		switch kind {
		case ExternFunc:
			imp.funcs++
			var t uint32
			t, err = r.u32()
			imp.funcTypes = append(imp.funcTypes, t)
		case ExternTable:
			if _, err = r.byte(); err == nil {
				_, err = r.limits()
			}
		case ExternMemory:
			if r.off < len(p) {
				imp.memFlags = append(imp.memFlags, p[r.off])
			}
			_, err = r.limits()
		case ExternGlobal:
			imp.globals++
			if _, err = r.byte(); err == nil {
				_, err = r.byte()
			}
		case ExternTag:
			if _, err = r.byte(); err == nil {
				_, err = r.u32()
			}
		default:
			return imp, fmt.Errorf("%w: import kind %d", ErrMalformed, kind)
		}
		if err != nil {
			return imp, err
		}
	}
	if r.off != len(p) {
		return imp, fmt.Errorf("%w: trailing bytes", ErrMalformed)
	}
	return imp, nil
}

// exportFuncRefs refuses an export of a function or global past the
// original index spaces (it would name a function or global a rewrite
// appends), and returns where the index of each exported function is in p.
func exportFuncRefs(p []byte, funcs, globals uint64) ([]growSite, error) {
	if p == nil {
		return nil, nil
	}
	r := &reader{b: p}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	var refs []growSite
	for i := uint32(0); i < n; i++ {
		if _, err := r.name(); err != nil {
			return nil, err
		}
		kind, err := r.byte()
		if err != nil {
			return nil, err
		}
		start := r.off
		idx, err := r.u32()
		if err != nil {
			return nil, err
		}
		if kind == ExternFunc && uint64(idx) >= funcs || kind == ExternGlobal && uint64(idx) >= globals {
			return nil, fmt.Errorf("%w: export of %s %d, past the index space", ErrMalformed, ExternName(kind), idx)
		}
		if kind == ExternFunc {
			refs = append(refs, growSite{start, r.off})
		}
	}
	if r.off != len(p) {
		return nil, fmt.Errorf("%w: trailing bytes", ErrMalformed)
	}
	return refs, nil
}

// growSig is the type of $grow: (i32) -> (i32).
var growSig = []byte{0x60, 0x01, 0x7f, 0x01, 0x7f}

// scanTypes decodes the type section payload p (nil: absent) and returns
// the number of types, the index of the first type encoded as sig (or -1)
// and each type's number of parameters.
func scanTypes(p []byte, sig []byte) (uint32, int, []uint32, error) {
	types, err := funcTypes(p)
	if err != nil {
		return 0, -1, nil, err
	}
	found := -1
	var params []uint32
	if types != nil {
		params = make([]uint32, len(types))
	}
	for i, t := range types {
		params[i] = uint32(len(t.params))
		if found < 0 && string(t.enc) == string(sig) {
			found = i
		}
	}
	return uint32(len(types)), found, params, nil
}

// checkFunctions decodes the function section payload p (nil: absent) and
// returns its number of functions; each must name one of the types.
func checkFunctions(p []byte, types uint32) (uint32, error) {
	fns, err := functionTypes(p, types)
	return uint32(len(fns)), err
}

// rewriteCode is the code section payload p of n bodies with each site
// replaced by "call growFunc", and the body of growFunc appended.
func rewriteCode(p []byte, n uint32, bodies []body, growFunc uint32, grow []byte) []byte {
	call := wasmasm.Cat([]byte{0x10}, wasmasm.Uleb(uint64(growFunc)))
	out := binary.AppendUvarint(make([]byte, 0, len(p)+len(p)/64+len(grow)+16), uint64(n)+1)
	var buf []byte
	for _, b := range bodies {
		if len(b.sites) == 0 {
			out = append(out, p[b.hdr:b.end]...)
			continue
		}
		buf = buf[:0]
		last := b.start
		for _, s := range b.sites {
			buf = append(buf, p[last:s.start]...)
			buf = append(buf, call...)
			last = s.end
		}
		buf = append(buf, p[last:b.end]...)
		out = binary.AppendUvarint(out, uint64(len(buf)))
		out = append(out, buf...)
	}
	out = binary.AppendUvarint(out, uint64(len(grow)))
	return append(out, grow...)
}

// isValType reports whether t is a value type of the enabled proposals:
// the numeric types, v128, funcref and externref.
func isValType(t byte) bool {
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return true
	}
	return false
}

// body is one function body in the code section: p[hdr:end] with its size,
// p[start:end] without; sites are offsets in p. The fields after sites are
// set only by a scanner with preempt set (preempt.go).
type body struct {
	hdr, start, end int
	sites           []growSite
	// entry is where the first instruction starts (after the locals), and
	// entryWeight the number of instructions outside any loop; merged says
	// that the first loop's check can serve as the entry's (see count).
	entry, entryWeight int
	merged             bool
	loops              []loopSite
	funcRefs           []growSite // every function index immediate
	bulk               []bulkSite
	locals             uint64 // declared locals
}

// codeScanner decodes function bodies, instruction by instruction.
type codeScanner struct {
	b   []byte
	off int
	// types, funcs and globals are the sizes of the original index
	// spaces; an instruction naming an index past them is refused.
	types, funcs, globals uint64
	sites                 []growSite

	// preempt makes the scanner also record, for Preempt, where every
	// function index immediate is (funcRefs) and, in a body, its loops
	// and how many instructions each runs (see count).
	preempt     bool
	funcRefs    []growSite
	loops       []loopSite
	bulk        []bulkSite
	locals      uint64
	entryWeight int
	// cur is the loop (an index in loops) whose body the next instruction
	// is in, -1 for none; frames are the enclosing open blocks.
	cur    int
	frames []frame
	// straight says that no instruction so far may branch, call or return
	// and no open block is an if: until the first loop, the body runs
	// straight to it.
	straight, merged bool
	// tableWrite names the first instruction seen that changes a table or
	// drops an element segment (table.set, table.grow, table.fill,
	// table.copy, table.init, elem.drop), empty for none.
	tableWrite string

	// devirt makes the scanner also record, for Devirtualize, every
	// call_indirect (indirect) and the first instruction that reaches a
	// table or a function reference otherwise (tableUse: table.get,
	// table.size, return_call_indirect, ref.func; tableWrite has the rest).
	devirt   bool
	indirect []indirectSite
	tableUse string

	// depth is the number of open blocks, loops and ifs (-1 after the
	// function's end), maxDepth the most so far in the body, and
	// maxTargets the most targets of a br_table in it (a scanner without
	// preempt sets them; Static reads them).
	depth, maxDepth, maxTargets int
}

// frame is an open block, loop or if: the cur to return to at its end.
type frame struct {
	cur int
	op  byte
}

// scanCode decodes the code section payload p, which must hold n bodies.
func (s *codeScanner) scanCode(p []byte, n uint32) ([]body, error) {
	var bodies []body
	err := s.eachBody(p, n, func(hdr, start, entry int) {
		if bodies == nil {
			bodies = make([]body, 0, n)
		}
		b := body{hdr: hdr, start: start, end: len(s.b)}
		if len(s.sites) > 0 {
			b.sites = append([]growSite(nil), s.sites...)
		}
		if s.preempt {
			b.entry, b.entryWeight, b.merged = entry, s.entryWeight, s.merged
			b.loops = append([]loopSite(nil), s.loops...)
			b.funcRefs = append([]growSite(nil), s.funcRefs...)
			b.bulk = append([]bulkSite(nil), s.bulk...)
			b.locals = s.locals
		}
		bodies = append(bodies, b)
	})
	return bodies, err
}

// eachBody decodes the code section payload p (nil: absent), which must
// hold n bodies, calling f after each body is decoded: the body is
// p[hdr:len(s.b)] with its size, p[start:len(s.b)] without, and its first
// instruction is at entry; the scanner holds what scanBody found in it.
func (s *codeScanner) eachBody(p []byte, n uint32, f func(hdr, start, entry int)) error {
	if p == nil {
		if n != 0 {
			return fmt.Errorf("%w: %d functions without a code section", ErrMalformed, n)
		}
		return nil
	}
	r := &reader{b: p}
	count, err := r.u32()
	if err != nil {
		return err
	}
	if count != n {
		return fmt.Errorf("%w: %d function bodies for %d functions", ErrMalformed, count, n)
	}
	if uint64(count) > uint64(len(p)) {
		return fmt.Errorf("%w: %d bodies in %d bytes", ErrMalformed, count, len(p))
	}
	for i := uint32(0); i < count; i++ {
		hdr := r.off
		size, err := r.u32()
		if err != nil {
			return err
		}
		start := r.off
		if _, err := r.bytes(size); err != nil {
			return fmt.Errorf("%w: function body %d overruns the code section", ErrMalformed, i)
		}
		s.b, s.off, s.sites = p[:r.off], start, s.sites[:0]
		entry, err := s.scanBody()
		if err != nil {
			return fmt.Errorf("function body %d (offset %d in the code section): %w", i, s.off, err)
		}
		f(hdr, start, entry)
	}
	if r.off != len(p) {
		return fmt.Errorf("%w: trailing bytes in the code section", ErrMalformed)
	}
	return nil
}

var errTruncated = fmt.Errorf("%w: truncated instruction", ErrMalformed)

func (s *codeScanner) byte() (byte, error) {
	if s.off >= len(s.b) {
		return 0, errTruncated
	}
	c := s.b[s.off]
	s.off++
	return c, nil
}

func (s *codeScanner) skip(n int) error {
	if len(s.b)-s.off < n {
		return errTruncated
	}
	s.off += n
	return nil
}

// leb skips a LEB128 of at most max bytes. The engine checks the unused
// bits of the last byte; what matters here is where the number ends.
func (s *codeScanner) leb(max int) error {
	for i := 0; i < max; i++ {
		if s.off >= len(s.b) {
			return errTruncated
		}
		c := s.b[s.off]
		s.off++
		if c&0x80 == 0 {
			return nil
		}
	}
	return fmt.Errorf("%w: integer too long", ErrMalformed)
}

func (s *codeScanner) u32() (uint32, error) {
	if s.off < len(s.b) && s.b[s.off] < 0x80 { // the common case: one byte
		c := s.b[s.off]
		s.off++
		return uint32(c), nil
	}
	r := reader{b: s.b, off: s.off}
	v, err := r.u32()
	s.off = r.off
	return v, err
}

// memarg skips a memory argument: alignment flags, the memory index when
// flag bit 6 says there is one (multi-memory), and an offset of up to 64
// bits (memory64).
func (s *codeScanner) memarg() error {
	flags, err := s.u32()
	if err != nil {
		return err
	}
	if flags&0x40 != 0 {
		if _, err := s.u32(); err != nil {
			return err
		}
	}
	return s.leb(10)
}

// blockType skips a block type: empty (0x40), a value type, or a type index
// (a non-negative s33).
func (s *codeScanner) blockType() error {
	if s.off >= len(s.b) {
		return errTruncated
	}
	c := s.b[s.off]
	if c == 0x40 || isValType(c) {
		s.off++
		return nil
	}
	var v int64
	var shift uint
	for i := 0; ; i++ {
		if i == 5 {
			return fmt.Errorf("%w: block type too long", ErrMalformed)
		}
		c, err := s.byte()
		if err != nil {
			return err
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if c&0x40 != 0 {
				v |= -1 << shift
			}
			break
		}
	}
	if v < 0 {
		return fmt.Errorf("%w: block type %d", ErrUnsupported, v)
	}
	if uint64(v) >= s.types {
		return fmt.Errorf("%w: block of type %d of %d", ErrMalformed, v, s.types)
	}
	return nil
}

func (s *codeScanner) funcIndex() error {
	start := s.off
	f, err := s.u32()
	if err == nil && uint64(f) >= s.funcs {
		err = fmt.Errorf("%w: function %d of %d", ErrMalformed, f, s.funcs)
	}
	if err == nil && s.preempt {
		s.funcRefs = append(s.funcRefs, growSite{start, s.off})
	}
	return err
}

// globalSection decodes s.b as the global section's payload (nil: absent).
func (s *codeScanner) globalSection() error {
	if s.b == nil {
		return nil
	}
	n, err := s.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		t, err := s.byte()
		if err != nil {
			return err
		}
		if !isValType(t) {
			return fmt.Errorf("%w: global of type %#x", ErrUnsupported, t)
		}
		if mut, err := s.byte(); err != nil {
			return err
		} else if mut > 1 {
			return fmt.Errorf("%w: global mutability %#x", ErrUnsupported, mut)
		}
		if err := s.constExpr(); err != nil {
			return err
		}
	}
	if s.off != len(s.b) {
		return fmt.Errorf("%w: trailing bytes", ErrMalformed)
	}
	return nil
}

// constExpr decodes a constant expression: instructions up to the first
// end (it has no blocks).
func (s *codeScanner) constExpr() error {
	for {
		if s.off >= len(s.b) {
			return errTruncated
		}
		op := s.b[s.off]
		if err := s.instr(); err != nil {
			return err
		}
		if op == 0x0b {
			return nil
		}
	}
}

// scanBody decodes s.b[s.off:] as one function body: its locals, then
// every instruction, recording each memory.grow of memory 0 in s.sites. It
// returns the offset of the first instruction.
func (s *codeScanner) scanBody() (int, error) {
	groups, err := s.u32()
	if err != nil {
		return 0, err
	}
	s.locals = 0
	for i := uint32(0); i < groups; i++ {
		n, err := s.u32()
		if err != nil {
			return 0, err
		}
		if s.locals += uint64(n); s.preempt && s.locals > MaxLocals {
			return 0, fmt.Errorf("%w: more than %d locals in a function", ErrTooLarge, MaxLocals)
		} else if s.locals > 1<<32-1 {
			return 0, fmt.Errorf("%w: more than 2^32-1 locals in a function", ErrMalformed)
		}
		t, err := s.byte()
		if err != nil {
			return 0, err
		}
		if !isValType(t) {
			return 0, fmt.Errorf("%w: local of type %#x", ErrUnsupported, t)
		}
	}
	entry := s.off
	if !s.preempt {
		// Only the depth of blocks is followed (Static reads it), and
		// that no code follows the function's end (as count does).
		s.depth, s.maxDepth, s.maxTargets = 0, 0, 0
		for s.off < len(s.b) {
			if s.depth < 0 {
				return 0, fmt.Errorf("%w: code after the function's end", ErrMalformed)
			}
			op := s.b[s.off]
			if err := s.instr(); err != nil {
				return 0, err
			}
			switch op {
			case 0x02, 0x03, 0x04: // block, loop, if
				s.depth++
				s.maxDepth = max(s.maxDepth, s.depth)
			case 0x0b: // end
				s.depth--
			}
		}
		return entry, nil
	}
	s.funcRefs, s.loops, s.bulk, s.entryWeight, s.cur, s.frames = s.funcRefs[:0], s.loops[:0], s.bulk[:0], 0, -1, s.frames[:0]
	s.straight, s.merged = true, false
	for s.off < len(s.b) {
		op := s.b[s.off]
		if err := s.instr(); err != nil {
			return 0, err
		}
		if op < 0x02 || 0x13 < op { // nothing else for count to follow
			if s.cur < 0 {
				s.entryWeight++
			} else {
				s.loops[s.cur].weight++
			}
			continue
		}
		if err := s.count(op); err != nil {
			return 0, err
		}
	}
	return entry, nil
}

// instr decodes one instruction.
func (s *codeScanner) instr() error {
	start := s.off
	op := s.b[s.off]
	s.off++
	switch {
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
		0x45 <= op && op <= 0xc4 || op == 0xd1:
		return nil // no immediate
	}
	switch op {
	case 0x02, 0x03, 0x04: // block, loop, if
		return s.blockType()
	case 0x0c, 0x0d, // br, br_if
		0x20, 0x21, 0x22, // local.get, local.set, local.tee
		0x25, 0x26: // table.get, table.set
		if op == 0x26 && s.tableWrite == "" {
			s.tableWrite = "table.set"
		}
		if op == 0x25 && s.devirt && s.tableUse == "" {
			s.tableUse = "table.get"
		}
		_, err := s.u32()
		return err
	case 0x0e: // br_table
		n, err := s.u32()
		if err != nil {
			return err
		}
		if uint64(n) > uint64(len(s.b)-s.off) {
			return errTruncated
		}
		s.maxTargets = max(s.maxTargets, int(n)+1)
		for i := uint64(0); i <= uint64(n); i++ {
			if _, err := s.u32(); err != nil {
				return err
			}
		}
		return nil
	case 0x10, 0x12, 0xd2: // call, return_call, ref.func
		if op == 0xd2 && s.devirt && s.tableUse == "" {
			s.tableUse = "ref.func"
		}
		return s.funcIndex()
	case 0x11, 0x13: // call_indirect, return_call_indirect: type, table
		t, err := s.u32()
		if err != nil {
			return err
		}
		if uint64(t) >= s.types {
			return fmt.Errorf("%w: call_indirect of type %d of %d", ErrMalformed, t, s.types)
		}
		table, err := s.u32()
		if err != nil || !s.devirt {
			return err
		}
		switch {
		case s.tableUse != "":
		case op == 0x13:
			s.tableUse = "return_call_indirect"
		case table != 0:
			// Invalid in a module of one table: kept for the engine to
			// refuse, not rewritten into a valid call.
			s.tableUse = fmt.Sprintf("call_indirect of table %d", table)
		}
		s.indirect = append(s.indirect, indirectSite{start: start, end: s.off, typ: t})
		return nil
	case 0x1c: // select t
		n, err := s.u32()
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%w: select with %d types", ErrUnsupported, n)
		}
		t, err := s.byte()
		if err == nil && !isValType(t) {
			err = fmt.Errorf("%w: select of type %#x", ErrUnsupported, t)
		}
		return err
	case 0x23, 0x24: // global.get, global.set
		g, err := s.u32()
		if err == nil && uint64(g) >= s.globals {
			err = fmt.Errorf("%w: global %d of %d", ErrMalformed, g, s.globals)
		}
		return err
	case 0x3f: // memory.size
		_, err := s.u32()
		return err
	case 0x40: // memory.grow
		mem, err := s.u32()
		if err == nil && mem == 0 {
			s.sites = append(s.sites, growSite{start, s.off})
		}
		return err
	case 0x41: // i32.const
		return s.leb(5)
	case 0x42: // i64.const
		return s.leb(10)
	case 0x43: // f32.const
		return s.skip(4)
	case 0x44: // f64.const
		return s.skip(8)
	case 0xd0: // ref.null
		t, err := s.byte()
		if err == nil && t != 0x70 && t != 0x6f {
			err = fmt.Errorf("%w: ref.null of heap type %#x", ErrUnsupported, t)
		}
		return err
	case 0xfc:
		return s.prefixFC(start)
	case 0xfd:
		return s.prefixFD()
	case 0xfe:
		return s.prefixFE()
	}
	if 0x28 <= op && op <= 0x3e { // loads and stores
		return s.memarg()
	}
	return fmt.Errorf("%w: opcode %#x", ErrUnsupported, op)
}

// prefixFC decodes the saturating truncations, bulk memory and table
// instructions; start is where the instruction starts.
func (s *codeScanner) prefixFC(start int) error {
	sub, err := s.u32()
	if err != nil {
		return err
	}
	if s.preempt {
		s.bulkSite(start, sub)
	}
	if s.tableWrite == "" {
		s.tableWrite = tableWrites[sub]
	}
	if sub == 0x10 && s.devirt && s.tableUse == "" {
		s.tableUse = "table.size"
	}
	var imm int // u32 immediates
	switch {
	case sub <= 0x07: // *.trunc_sat_*
	case sub == 0x08, sub == 0x0a, sub == 0x0c, sub == 0x0e: // memory.init, memory.copy, table.init, table.copy
		imm = 2
	case sub == 0x09, sub == 0x0b, sub == 0x0d, 0x0f <= sub && sub <= 0x11: // data.drop, memory.fill, elem.drop, table.grow/size/fill
		imm = 1
	default:
		return fmt.Errorf("%w: opcode 0xfc %#x", ErrUnsupported, sub)
	}
	for range imm {
		if _, err := s.u32(); err != nil {
			return err
		}
	}
	return nil
}

// tableWrites names the 0xfc instructions that change a table or drop an
// element segment.
var tableWrites = map[uint32]string{0x0c: "table.init", 0x0d: "elem.drop", 0x0e: "table.copy", 0x0f: "table.grow", 0x11: "table.fill"}

// simdNoImm marks the 0xfd sub-opcodes below 0x100 that take no immediate.
var simdNoImm = func() (set [256]bool) {
	for op := 0x0e; op <= 0x14; op++ { // swizzle, splats
		set[op] = true
	}
	for op := 0x23; op <= 0x53; op++ { // comparisons, bitwise, any_true
		set[op] = true
	}
	for op := 0x5e; op <= 0xff; op++ { // arithmetic and conversions
		set[op] = true
	}
	for _, op := range []int{0x9a, 0xa2, 0xa5, 0xa6, 0xaf, 0xb0, 0xb2, 0xb3, 0xb4, 0xbb,
		0xc2, 0xc5, 0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4, 0xe2, 0xee} { // unassigned
		set[op] = false
	}
	return set
}()

// prefixFD decodes the SIMD and relaxed SIMD instructions.
func (s *codeScanner) prefixFD() error {
	sub, err := s.u32()
	if err != nil {
		return err
	}
	switch {
	case sub < 0x100 && simdNoImm[sub], 0x100 <= sub && sub <= 0x113: // relaxed SIMD
		return nil
	case sub <= 0x0b, sub == 0x5c, sub == 0x5d: // loads, store, load*_zero
		return s.memarg()
	case sub == 0x0c, sub == 0x0d: // v128.const, i8x16.shuffle
		return s.skip(16)
	case 0x15 <= sub && sub <= 0x22: // extract_lane, replace_lane
		return s.skip(1)
	case 0x54 <= sub && sub <= 0x5b: // load*_lane, store*_lane
		if err := s.memarg(); err != nil {
			return err
		}
		return s.skip(1)
	}
	return fmt.Errorf("%w: opcode 0xfd %#x", ErrUnsupported, sub)
}

// prefixFE decodes the atomic instructions of the threads proposal.
func (s *codeScanner) prefixFE() error {
	sub, err := s.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 0x02, 0x10 <= sub && sub <= 0x4e: // notify, wait, loads, stores, rmw
		return s.memarg()
	case sub == 0x03: // atomic.fence
		c, err := s.byte()
		if err == nil && c != 0 {
			err = fmt.Errorf("%w: atomic.fence %#x", ErrMalformed, c)
		}
		return err
	}
	return fmt.Errorf("%w: opcode 0xfe %#x", ErrUnsupported, sub)
}
