package wasmbin

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/mandatevm/mandate/internal/wasmasm"
)

// Why turn indirect calls into direct ones?
//
// A Go guest's function table holds every Go function (a Go function
// value is its index in the table): about 1,700 elements in the smallest
// Go guest, written by one active element segment. wazero evaluates that
// segment for every instance, so every task of a Go guest allocates a
// function instance per element and builds its table one element at a
// time: about 180 µs of a 520 µs task, and a third of its allocations
// (BENCHMARKS.md, issue 31). Nothing in wazero's API builds a table once
// per module: every element points at its instance's own context.
//
// Devirtualize removes the table instead. Every call_indirect of type T
// becomes a call of a function the rewrite appends, $dispatch_T, whose
// parameters are T's and then the table index, and whose body is one
// br_table over the table as the element segments left it:
//
//	(block $none (block $f_m-1 ... (block $f_0
//	  (br_table $f_0 $none $f_1 ... $none (i32.sub (local.get $index) (i32.const lo))))
//	  (return (call $f_0 (local.get 0) ... )))
//	  ...
//	  (return (call $f_m-1 ...)))
//	unreachable
//
// An index whose element is a function of a type equal to T calls it with
// the same arguments; any other index (no element there, a function of
// another type, past the table) reaches unreachable and traps, as the
// call_indirect would have (with wazero's "unreachable" rather than its
// "invalid table access" or "indirect call type mismatch"). The table and
// the element segments are dropped: nothing else could read them.
//
// It applies only to a module for which that holds: one table, of
// funcrefs, defined (not imported) and not exported; element segments
// that are all active on it at a constant offset, listing functions by
// index (the form every compiler here emits); and no instruction other
// than call_indirect that reaches the table or a function reference:
// table.get, table.set, table.size, table.grow, table.fill, table.copy,
// table.init, elem.drop, return_call_indirect, and ref.func (in code or a
// global's initializer; its function would no longer be declared). For
// any other module it returns the module unchanged, and so for one whose
// table part is invalid (a call_indirect of a table it does not have, a
// maximum below the minimum): the engine must still refuse that module,
// and the rewrite would drop what makes it invalid.
//
// The engine applies it after Preempt, so the dispatch functions carry no
// check of their own: each runs at most four instructions before the call
// of a function that has one.

// maxDispatchTypes bounds the dispatch functions one module gets (one per
// type call_indirect names): each can be as large as the table.
const maxDispatchTypes = 64

// Devirtualize returns wasm with its function table replaced by direct
// calls (see above) and true, or wasm itself and false when the module is
// not one it applies to or can not be read.
func Devirtualize(wasm []byte) ([]byte, bool) {
	m, err := Parse(wasm)
	if err != nil || m.Tables != 1 {
		return wasm, false
	}
	for _, imp := range m.Imports {
		if imp.Kind == ExternTable {
			return wasm, false
		}
	}
	for _, kind := range m.Exports {
		if kind == ExternTable {
			return wasm, false
		}
	}
	at, err := indexSections(m)
	if err != nil {
		return wasm, false
	}
	payload := func(id byte) []byte { return at.payload(wasm, m, id) }

	size, ok := funcrefTable(payload(SecTable))
	if !ok {
		return wasm, false
	}
	types, err := funcTypes(payload(secType))
	if err != nil {
		return wasm, false
	}
	imp, err := scanImports(payload(SecImport))
	if err != nil {
		return wasm, false
	}
	defined, err := functionTypes(payload(secFunction), uint32(len(types)))
	if err != nil {
		return wasm, false
	}
	// The type of every function, imported ones first.
	fnType := append(slices.Clone(imp.funcTypes), defined...)
	nFuncs := uint64(len(fnType))
	if nFuncs+maxDispatchTypes >= 1<<32-1 || uint64(len(types))+maxDispatchTypes >= 1<<32-1 {
		return wasm, false
	}
	globals, err := sectionCount(payload(secGlobal))
	if err != nil {
		return wasm, false
	}
	scanner := func(p []byte) *codeScanner {
		return &codeScanner{b: p, types: uint64(len(types)), funcs: nFuncs, globals: uint64(imp.globals) + uint64(globals), devirt: true}
	}
	gs := scanner(payload(secGlobal))
	if gs.globalSection() != nil || gs.tableUse != "" {
		return wasm, false
	}
	slots, ok := elementSlots(payload(secElement), size, nFuncs)
	if !ok {
		return wasm, false
	}

	code := payload(secCode)
	cs := scanner(nil)
	var sites [][]indirectSite // by body
	err = cs.eachBody(code, uint32(len(defined)), func(hdr, start, entry int) {
		sites = append(sites, cs.indirect)
		cs.indirect = nil
	})
	if err != nil || cs.tableUse != "" || cs.tableWrite != "" {
		return wasm, false
	}

	// One dispatch function per type named, numbered in order of type.
	var named []uint32
	for _, b := range sites {
		for _, s := range b {
			named = append(named, s.typ)
		}
	}
	slices.Sort(named)
	named = slices.Compact(named)
	if len(named) > maxDispatchTypes {
		return wasm, false
	}
	dispatch := make(map[uint32]uint32, len(named)) // type -> function
	typePayload, funcPayload := payload(secType), payload(secFunction)
	nTypes, nDefined := uint32(len(types)), uint32(len(defined))
	var bodies [][]byte
	for i, t := range named {
		dispatch[t] = uint32(nFuncs) + uint32(i)
		sig := types[t]
		typePayload = appendEntry(typePayload, nTypes, sig.withIndex())
		funcPayload = appendEntry(funcPayload, nDefined, binary.AppendUvarint(nil, uint64(nTypes)))
		nTypes++
		nDefined++
		bodies = append(bodies, dispatchBody(sig, slots, func(f uint32) bool {
			return types[fnType[f]].equal(sig)
		}))
	}

	replaced := map[byte][]byte{SecTable: {0x00}} // no table
	if payload(secElement) != nil {
		replaced[secElement] = []byte{0x00} // no segment
	}
	if len(named) > 0 {
		replaced[secType] = typePayload
		replaced[secFunction] = funcPayload
		replaced[secCode] = devirtCode(code, sites, dispatch, bodies)
	}
	for _, p := range replaced {
		if uint64(len(p)) > 1<<32-1 {
			return wasm, false
		}
	}
	return rebuild(wasm, m, at, replaced, nil), true
}

// indirectSite is a call_indirect in a body: p[start:end] of the code
// section, of type typ.
type indirectSite struct {
	start, end int
	typ        uint32
}

// funcType is one entry of the type section: its encoding (0x60, then the
// parameters and the results, each a vector of value types).
type funcType struct {
	enc            []byte
	params, result []byte // the value types
}

func (t funcType) equal(u funcType) bool { return string(t.enc) == string(u.enc) }

// withIndex is the encoding of the type of t's dispatch function: t's
// parameters and then an i32, t's results.
func (t funcType) withIndex() []byte {
	out := []byte{0x60}
	out = binary.AppendUvarint(out, uint64(len(t.params))+1)
	out = append(append(out, t.params...), 0x7f)
	out = binary.AppendUvarint(out, uint64(len(t.result)))
	return append(out, t.result...)
}

// funcTypes decodes the type section payload p (nil: absent): function
// types of the enabled value types only.
func funcTypes(p []byte) ([]funcType, error) {
	if p == nil {
		return nil, nil
	}
	r := &reader{b: p}
	n, err := r.vecLen("types")
	if err != nil {
		return nil, err
	}
	types := make([]funcType, n)
	for i := range types {
		start := r.off
		form, err := r.byte()
		if err != nil {
			return nil, err
		}
		if form != 0x60 { // a GC type (rec, sub, struct, array)
			return nil, fmt.Errorf("%w: type form %#x", ErrUnsupported, form)
		}
		var vecs [2][]byte // params, results
		for k := range vecs {
			c, err := r.u32()
			if err != nil {
				return nil, err
			}
			if vecs[k], err = r.bytes(c); err != nil {
				return nil, err
			}
			for _, t := range vecs[k] {
				if !isValType(t) {
					return nil, fmt.Errorf("%w: value type %#x", ErrUnsupported, t)
				}
			}
		}
		types[i] = funcType{enc: p[start:r.off], params: vecs[0], result: vecs[1]}
	}
	if r.off != len(p) {
		return nil, fmt.Errorf("%w: trailing bytes", ErrMalformed)
	}
	return types, nil
}

// vecLen reads the length of a vector of items that take a byte or more
// each, refusing one longer than the bytes left (what would otherwise be
// allocated for it is the caller's to bound).
func (r *reader) vecLen(items string) (uint32, error) {
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if uint64(n) > uint64(len(r.b)-r.off) {
		return 0, fmt.Errorf("%w: %d %s in %d bytes", ErrMalformed, n, items, len(r.b)-r.off)
	}
	return n, nil
}

// functionTypes decodes the function section payload p (nil: absent):
// the type of each defined function, each one of the types.
func functionTypes(p []byte, types uint32) ([]uint32, error) {
	if p == nil {
		return nil, nil
	}
	r := &reader{b: p}
	n, err := r.vecLen("functions")
	if err != nil {
		return nil, err
	}
	out := make([]uint32, n)
	for i := range out {
		t, err := r.u32()
		if err != nil {
			return nil, err
		}
		if t >= types {
			return nil, fmt.Errorf("%w: function %d has type %d of %d", ErrMalformed, i, t, types)
		}
		out[i] = t
	}
	if r.off != len(p) {
		return nil, fmt.Errorf("%w: trailing bytes", ErrMalformed)
	}
	return out, nil
}

// funcrefTable decodes a table section of one valid table of funcrefs
// (its maximum, when it has one, at least its minimum: a rewrite that
// drops an invalid table would make the module valid) and returns its
// initial size.
func funcrefTable(p []byte) (uint64, bool) {
	r := &reader{b: p}
	if n, err := r.u32(); err != nil || n != 1 {
		return 0, false
	}
	if ref, err := r.byte(); err != nil || ref != 0x70 {
		return 0, false
	}
	flags, err := r.byte()
	if err != nil || flags > 1 {
		return 0, false
	}
	size, err := r.u32()
	if err != nil || size > MaxTableInitial {
		return 0, false
	}
	if flags == 1 {
		if tmax, err := r.u32(); err != nil || tmax < size {
			return 0, false
		}
	}
	return uint64(size), r.off == len(p)
}

// elementSlots decodes the element section payload p (nil: absent) when
// every segment is active on table 0 at an i32.const offset and lists
// functions by index, and returns the table of size elements the segments
// leave: a function index per element, -1 for none.
func elementSlots(p []byte, size, funcs uint64) ([]int64, bool) {
	slots := make([]int64, size)
	for i := range slots {
		slots[i] = -1
	}
	if p == nil {
		return slots, true
	}
	r := &reader{b: p}
	n, err := r.u32()
	if err != nil {
		return nil, false
	}
	for range n {
		if flags, err := r.u32(); err != nil || flags != 0 {
			return nil, false
		}
		if op, err := r.byte(); err != nil || op != 0x41 { // i32.const
			return nil, false
		}
		off, err := r.sleb32()
		if err != nil {
			return nil, false
		}
		if end, err := r.byte(); err != nil || end != 0x0b {
			return nil, false
		}
		items, err := r.u32()
		if err != nil || uint64(uint32(off))+uint64(items) > size {
			return nil, false
		}
		for j := range uint64(items) {
			f, err := r.u32()
			if err != nil || uint64(f) >= funcs {
				return nil, false
			}
			slots[uint64(uint32(off))+j] = int64(f)
		}
	}
	return slots, r.off == len(p)
}

// dispatchBody is the body of the dispatch function of type sig over the
// table slots (see above): match says which functions have a type equal
// to sig.
func dispatchBody(sig funcType, slots []int64, match func(f uint32) bool) []byte {
	// The functions it calls, each once, in the order of their first
	// element, and the block each element of [lo, hi] branches to.
	block := map[int64]uint32{}
	var fns []uint32
	lo, hi := -1, -1
	for i, f := range slots {
		if f < 0 || !match(uint32(f)) {
			continue
		}
		if _, ok := block[f]; !ok {
			block[f] = uint32(len(fns))
			fns = append(fns, uint32(f))
		}
		if lo < 0 {
			lo = i
		}
		hi = i
	}
	out := []byte{0x00} // no locals
	if lo < 0 {
		return append(out, 0x00, 0x0b) // unreachable
	}
	none := uint32(len(fns)) // the outermost block: no function
	for range len(fns) + 1 {
		out = append(out, 0x02, 0x40) // block
	}
	index := uint64(len(sig.params))
	out = binary.AppendUvarint(append(out, 0x20), index) // local.get $index
	if lo > 0 {
		out = append(append(out, 0x41), wasmasm.Sleb(int64(int32(lo)))...) // i32.const lo
		out = append(out, 0x6b)                                            // i32.sub
	}
	out = binary.AppendUvarint(append(out, 0x0e), uint64(hi-lo+1)) // br_table
	for _, f := range slots[lo : hi+1] {
		label := none
		if j, ok := block[f]; ok && f >= 0 {
			label = j
		}
		out = binary.AppendUvarint(out, uint64(label))
	}
	out = binary.AppendUvarint(out, uint64(none))
	for _, f := range fns {
		out = append(out, 0x0b) // end of the function's block
		for k := range index {
			out = binary.AppendUvarint(append(out, 0x20), k) // local.get k
		}
		out = binary.AppendUvarint(append(out, 0x10), uint64(f)) // call f
		out = append(out, 0x0f)                                  // return
	}
	return append(out, 0x0b, 0x00, 0x0b) // end $none; unreachable; end
}

// devirtCode is the code section payload p with every call_indirect at
// sites (by body) replaced by a call of its type's dispatch function, and
// the dispatch functions' bodies appended.
func devirtCode(p []byte, sites [][]indirectSite, dispatch map[uint32]uint32, extra [][]byte) []byte {
	r := &reader{b: p}
	n, _ := r.u32() // decoded before
	out := binary.AppendUvarint(make([]byte, 0, len(p)+len(p)/64), uint64(n)+uint64(len(extra)))
	var buf []byte
	for _, b := range sites {
		hdr := r.off
		size, _ := r.u32()
		start := r.off
		r.off += int(size)
		if len(b) == 0 {
			out = append(out, p[hdr:r.off]...)
			continue
		}
		buf = buf[:0]
		last := start
		for _, s := range b {
			buf = append(buf, p[last:s.start]...)
			buf = binary.AppendUvarint(append(buf, 0x10), uint64(dispatch[s.typ])) // call $dispatch_T
			last = s.end
		}
		buf = append(buf, p[last:r.off]...)
		out = binary.AppendUvarint(out, uint64(len(buf)))
		out = append(out, buf...)
	}
	for _, body := range extra {
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	return out
}
