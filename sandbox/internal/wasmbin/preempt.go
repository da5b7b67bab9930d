package wasmbin

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/mandatevm/mandate/internal/wasmasm"
)

// Why rewrite a module so that it can be stopped?
//
// A guest spinning in "for {}" must stop at its deadline, and while it
// spins the Go runtime must still be able to stop the world (a garbage
// collection waits for every goroutine to reach a safe point, and compiled
// guest code has none: a guest that never calls into Go would hang the
// whole process). wazero's own mechanism, WithCloseOnContextDone, calls
// into Go at every loop header, which made a compute-bound guest 4.6-4.9x
// slower (BENCHMARKS.md). Preempt instead rewrites the module once, at
// compile time, so that every loop header and every function entry runs
//
//	(global.set $budget (i32.sub (global.get $budget) (i32.const W)))
//	(if (i32.lt_s (i32.or (global.get $budget) (global.get $stop)) (i32.const 0))
//	  (then
//	    (call $yield)
//	    (global.set $budget (i32.const N))))
//
// $yield is the function PreemptYield of the host module PreemptModule: it
// returns to Go, which checks the run's context and ends the run when it is
// done; otherwise it returns and the budget starts again at N (the budget
// argument of Preempt). So a guest calls into Go only every N units of work
// (a safe point for the Go runtime), or as soon as $stop is set.
//
// $stop is a new mutable i32 global, exported as StopExport so the host can
// set it: the host writes StopValue (the sign bit) when the run's context
// is done, so one comparison tests both the flag and the budget. $budget is
// a second new mutable i32 global, not exported, starting at N.
//
// W, the weight of a check, is the number of instructions it pays for: for
// a loop header, the instructions of the loop's body outside any loop
// nested in it (those are paid by the nested loop's own header, on every
// one of its iterations); for a function entry, the function's
// instructions outside any loop. Every instruction a guest runs is then
// paid at least once, by the check that last ran before it: within a
// loop's body code only runs forward, a branch back is a branch to a loop
// header, and a call enters a function. So between two calls of $yield a
// guest runs at most about N + W instructions, whatever the size or shape
// of its loops (a long body cannot stretch the gap: it costs more per
// iteration), and deep recursion without any loop pays at every entry. A
// function that runs straight from its entry to its first loop (every
// function with a loop the Go compiler emits) has no separate entry check:
// that loop's header serves, with the function's weight added to the
// loop's (count says when that holds).
//
// One instruction can take long by itself: memory.fill, memory.copy and
// memory.init of up to the whole memory, and table.fill, table.copy and
// table.init of a whole table. Each is charged its length too, before it
// runs, by a check of its own: one unit per 16 bytes of memory (about what
// a plain instruction costs) and one per table element. A loop of such
// operations then returns to Go every budget's worth of bytes, but one
// operation is never interrupted (at worst a memory.fill of the whole
// memory, bounded by the task's memory limit: tens of milliseconds per
// gigabyte). Such a check needs the length twice, so the function gets one
// more local (an i32, after its own): a function may declare at most
// MaxLocals locals.
//
// The globals and $yield are new entries of the index spaces. The globals
// are appended (no global index shifts), but an import always comes before
// every defined function, so $yield is appended to the imports and every
// defined function's index grows by one: Preempt renumbers every reference
// to a function (calls, ref.func, exports, the start function, element
// segments, global initializers and the name section's function, local
// and label names). A guest cannot reach the new entries: before the
// rewrite their indices do not exist, and Preempt refuses a module whose
// code or exports name a function or global past the original index spaces
// (such a module is invalid as it stands). It also refuses a module that
// imports PreemptModule or exports StopExport itself. A guest that calls
// $yield through a table cannot: no table or ref.func names it.
//
// The instructions decoded are those TrackGrowth decodes (growth.go): a
// module using anything else is refused. The engines' enabled proposals
// are a subset, so no module they would run is refused for it.

// PreemptModule is the host module of the engine's own that Preempt's
// rewrite imports PreemptYield, of type () -> (), from. A guest can not
// import it (Preempt refuses a module that does) nor register it.
const PreemptModule = "mandate$preempt"

// PreemptYield is the function the rewrite calls when the budget is spent
// or the stop flag is set.
const PreemptYield = "yield"

// StopExport is the export under which the rewritten module exposes its
// stop flag, an i32 global the host sets to StopValue to stop the guest at
// its next loop header or function entry.
const StopExport = "mandate$stop"

// StopValue is what the host writes to the stop flag: the sign bit, so the
// flag and the budget are tested by one comparison.
const StopValue = 1 << 31

// PreemptBudget is the budget the engine gives Preempt: the units of work
// (instructions, as weighted above) between two calls into Go. See
// BENCHMARKS.md for how it was chosen.
const PreemptBudget = 1 << 17

// maxWeight bounds a check's weight and the budget, so that the budget
// (at most maxWeight, less at most maxWeight, or 2^28 for a memory
// operation's length) never overflows an i32.
const maxWeight = 1 << 24

// MaxLocals is the most locals a function may declare (wasmtime's limit
// too). wazero would allocate as many before reading a single instruction.
const MaxLocals = 50_000

// bulkShift is the charge of a memory operation: its length in bytes,
// shifted right this much (one unit per 16 bytes). A table operation is
// charged its length in elements.
const bulkShift = 4

// voidSig is the type of $yield: () -> ().
var voidSig = []byte{0x60, 0x00, 0x00}

// Preempt returns wasm rewritten so that it calls into the host every
// budget units of work and stops when the host sets its stop flag (see
// above). It returns an error, and the caller refuses the module, when the
// module can not be decoded, uses an instruction the decoder does not know,
// names an index past the original function or global index spaces, has a
// loop body or function of more than 2^24 instructions or a function with
// more than MaxLocals locals, imports PreemptModule or exports StopExport.
func Preempt(wasm []byte, budget uint32) ([]byte, error) {
	if budget == 0 || budget > maxWeight {
		return nil, fmt.Errorf("wasmbin: budget %d out of range", budget)
	}
	m, err := Parse(wasm)
	if err != nil {
		return nil, err
	}
	for _, imp := range m.Imports {
		if imp.Module == PreemptModule {
			return nil, fmt.Errorf("module imports %s.%s: %q is reserved for the engine", imp.Module, imp.Name, PreemptModule)
		}
	}
	if _, ok := m.Exports[StopExport]; ok {
		return nil, fmt.Errorf("module exports %q, a name reserved for the engine", StopExport)
	}
	at, err := indexSections(m)
	if err != nil {
		return nil, err
	}
	payload := func(id byte) []byte { return at.payload(wasm, m, id) }

	imp, err := scanImports(payload(SecImport))
	if err != nil {
		return nil, fmt.Errorf("import section: %w", err)
	}
	types, voidIdx, params, err := scanTypes(payload(secType), voidSig)
	if err != nil {
		return nil, fmt.Errorf("type section: %w", err)
	}
	funcs, err := checkFunctions(payload(secFunction), types)
	if err != nil {
		return nil, fmt.Errorf("function section: %w", err)
	}
	globals, err := sectionCount(payload(secGlobal))
	if err != nil {
		return nil, fmt.Errorf("global section: %w", err)
	}
	nFuncs := uint64(imp.funcs) + uint64(funcs)
	nGlobals := uint64(imp.globals) + uint64(globals)
	if nFuncs >= 1<<32-1 || nGlobals >= 1<<32-2 || types == 1<<32-1 {
		return nil, fmt.Errorf("%w: index space full", ErrMalformed)
	}
	scanner := func(p []byte) *codeScanner {
		return &codeScanner{b: p, types: uint64(types), funcs: nFuncs, globals: nGlobals, preempt: true}
	}
	// Every section the rewrite appends to is decoded in full, so that
	// what it appends can not complete a truncated entry of the guest's;
	// so are those it passes on as they are, for their counts: wazero
	// allocates what a count says before reading what it counts (a
	// 20-byte module declaring 2^32 data segments makes it ask the Go
	// runtime for hundreds of gigabytes, and the process dies), and it
	// compiles only what Preempt returns.
	ds := &codeScanner{b: payload(SecData), types: uint64(types), funcs: nFuncs, globals: nGlobals}
	if err := ds.dataSection(); err != nil {
		return nil, fmt.Errorf("data section: %w", err)
	}
	if err := tagSection(payload(secTag), types); err != nil {
		return nil, fmt.Errorf("tag section: %w", err)
	}
	gs := scanner(payload(secGlobal))
	if err := gs.globalSection(); err != nil {
		return nil, fmt.Errorf("global section: %w", err)
	}
	exportRefs, err := exportFuncRefs(payload(SecExport), nFuncs, nGlobals)
	if err != nil {
		return nil, fmt.Errorf("export section: %w", err)
	}
	es := scanner(payload(secElement))
	if err := es.elementSection(); err != nil {
		return nil, fmt.Errorf("element section: %w", err)
	}
	start := payload(secStart)
	if start != nil {
		ss := scanner(start)
		if err := ss.funcIndex(); err != nil {
			return nil, fmt.Errorf("start section: %w", err)
		}
		if ss.off != len(start) {
			return nil, fmt.Errorf("%w: start section: trailing bytes", ErrMalformed)
		}
		start = renumber(start, ss.funcRefs, imp.funcs)
	}
	code := payload(secCode)
	bodies, err := scanner(nil).scanCode(code, funcs)
	if err != nil {
		return nil, err
	}
	// The local a body's bulk checks use: the first after its own.
	scratch := make([]uint32, len(bodies))
	fr := &reader{b: payload(secFunction)}
	fr.u32() // decoded by checkFunctions
	for i := range bodies {
		t, _ := fr.u32()
		n := uint64(params[t]) + bodies[i].locals
		if n >= 1<<32-1 {
			return nil, fmt.Errorf("%w: function %d has too many locals", ErrUnsupported, i)
		}
		scratch[i] = uint32(n)
	}
	for _, b := range bodies {
		if b.entryWeight > maxWeight {
			return nil, fmt.Errorf("%w: a function of %d instructions outside loops (at most %d)", ErrUnsupported, b.entryWeight, maxWeight)
		}
		for _, l := range b.loops {
			if l.weight > maxWeight {
				return nil, fmt.Errorf("%w: a loop body of %d instructions (at most %d)", ErrUnsupported, l.weight, maxWeight)
			}
		}
	}

	typePayload := payload(secType)
	typeIdx := uint32(voidIdx)
	if voidIdx < 0 {
		typeIdx = types
		typePayload = appendEntry(typePayload, types, voidSig)
	}
	imports, err := sectionCount(payload(SecImport))
	if err != nil {
		return nil, fmt.Errorf("import section: %w", err)
	}
	exports, err := sectionCount(payload(SecExport))
	if err != nil {
		return nil, fmt.Errorf("export section: %w", err)
	}
	yield := imp.funcs // the last import: defined functions move up by one
	stop, budgetIdx := uint32(nGlobals), uint32(nGlobals+1)
	g := renumber(payload(secGlobal), gs.funcRefs, imp.funcs)
	g = appendEntry(g, globals, []byte{0x7f, 0x01, 0x41, 0x00, 0x0b}) // $stop: mut i32 = 0
	g = appendEntry(g, globals+1, wasmasm.Cat([]byte{0x7f, 0x01, 0x41}, wasmasm.Sleb(int64(budget)), []byte{0x0b}))
	replaced := map[byte][]byte{
		secType: typePayload,
		SecImport: appendEntry(payload(SecImport), imports, wasmasm.Cat(
			wasmasm.Name(PreemptModule), wasmasm.Name(PreemptYield), []byte{ExternFunc}, wasmasm.Uleb(uint64(typeIdx)))),
		secGlobal: g,
		SecExport: appendEntry(renumber(payload(SecExport), exportRefs, imp.funcs), exports,
			wasmasm.Cat(wasmasm.Name(StopExport), []byte{ExternGlobal}, wasmasm.Uleb(uint64(stop)))),
		secCode: preemptCode(code, funcs, bodies, scratch, imp.funcs, newCheck(yield, stop, budgetIdx, budget)),
	}
	if start != nil {
		replaced[secStart] = start
	}
	if p := payload(secElement); p != nil {
		replaced[secElement] = renumber(p, es.funcRefs, imp.funcs)
	}
	for _, p := range replaced {
		if uint64(len(p)) > 1<<32-1 {
			return nil, fmt.Errorf("%w: section too large", ErrMalformed)
		}
	}
	// The name section is read by wazero (trap stack traces), which
	// refuses one it can not read: so does Preempt, which must read it to
	// renumber it (and wazero would allocate what its counts say).
	names := map[int][]byte{} // by section start
	for _, sec := range m.Sections {
		if sec.ID != SecCustom {
			continue
		}
		p := wasm[sec.Start:sec.End]
		r := &reader{b: p}
		if name, err := r.name(); err != nil || name != "name" {
			continue
		}
		out, err := shiftNames(p[:r.off], p[r.off:], imp.funcs)
		if err != nil {
			return nil, fmt.Errorf("name section: %w", err)
		}
		names[sec.Start] = out
	}
	custom := func(sec Section) []byte {
		if p, ok := names[sec.Start]; ok {
			return p
		}
		return wasm[sec.Start:sec.End]
	}
	return rebuild(wasm, m, at, replaced, custom), nil
}

// loopSite is one loop in a function body: at is the offset, in the code
// section, just after its block type (where its check goes), and weight
// the number of instructions in its body outside nested loops.
type loopSite struct {
	at, weight int
}

// count accounts for one decoded instruction whose opcode is op (see the
// weights above): it adds one to the innermost loop or, outside loops, to
// the function, and follows blocks, loops and ends.
//
// It also finds whether the function's first loop can take the entry's
// check (s.merged): when no instruction before it can branch, call or
// return, and it is not inside an if, every call of the function runs
// straight from its entry to that loop's header. Then work outside loops is
// paid there: code before the loop runs at most once per call and calls
// nothing, and code after the loop (at function level, after the blocks
// around it) can only be reached by leaving the loop, so through its
// header. The Go compiler starts every function with a loop in a block
// ("global.get; local.set; block; loop").
func (s *codeScanner) count(op byte) error {
	if s.cur < 0 {
		s.entryWeight++
	} else {
		s.loops[s.cur].weight++
	}
	switch op {
	case 0x02, 0x04: // block, if
		s.frames = append(s.frames, frame{cur: s.cur, op: op})
	case 0x03: // loop: the check goes just after its block type
		if len(s.loops) == 0 && s.straight {
			s.merged = true
			for _, f := range s.frames {
				s.merged = s.merged && f.op == 0x02
			}
		}
		s.frames = append(s.frames, frame{cur: s.cur, op: op})
		s.loops = append(s.loops, loopSite{at: s.off})
		s.cur = len(s.loops) - 1
	case 0x0b: // end
		if len(s.frames) == 0 {
			if s.off != len(s.b) {
				return fmt.Errorf("%w: code after the function's end", ErrMalformed)
			}
			return nil
		}
		s.cur = s.frames[len(s.frames)-1].cur
		s.frames = s.frames[:len(s.frames)-1]
	case 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13: // br*, return, calls
		s.straight = false
	}
	return nil
}

// elementSection decodes s.b as the element section's payload (nil:
// absent), recording every function index in s.funcRefs.
func (s *codeScanner) elementSection() error {
	if s.b == nil {
		return nil
	}
	n, err := s.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		flags, err := s.u32()
		if err != nil {
			return err
		}
		if flags > 7 {
			return fmt.Errorf("%w: element segment flags %#x", ErrMalformed, flags)
		}
		if flags&3 == 2 { // an active segment naming its table
			if _, err := s.u32(); err != nil {
				return err
			}
		}
		if flags&1 == 0 { // active: the offset
			if err := s.constExpr(); err != nil {
				return err
			}
		}
		exprs := flags&4 != 0
		if flags&3 != 0 { // an element kind (0: funcref) or a reference type
			k, err := s.byte()
			if err != nil {
				return err
			}
			if exprs && k != 0x70 && k != 0x6f || !exprs && k != 0x00 {
				return fmt.Errorf("%w: element segment of type %#x", ErrUnsupported, k)
			}
		}
		items, err := s.u32()
		if err != nil {
			return err
		}
		if uint64(items) > uint64(len(s.b)-s.off) {
			return errTruncated
		}
		for j := uint32(0); j < items; j++ {
			if exprs {
				err = s.constExpr()
			} else {
				err = s.funcIndex()
			}
			if err != nil {
				return err
			}
		}
	}
	if s.off != len(s.b) {
		return fmt.Errorf("%w: trailing bytes", ErrMalformed)
	}
	return nil
}

// renumber returns p with each function index at refs (which are in
// order) moved up by one when it names a defined function, that is, is
// imports or more. It returns p itself when refs is empty.
func renumber(p []byte, refs []growSite, imports uint32) []byte {
	if len(refs) == 0 {
		return p
	}
	out := make([]byte, 0, len(p)+len(refs))
	last := 0
	for _, r := range refs {
		out = append(out, p[last:r.start]...)
		out = appendFuncIndex(out, p[r.start:r.end], imports)
		last = r.end
	}
	return append(out, p[last:]...)
}

// appendFuncIndex appends the function index encoded in leb, renumbered.
func appendFuncIndex(out, leb []byte, imports uint32) []byte {
	idx, _ := (&reader{b: leb}).u32() // decoded before
	if idx >= imports {
		idx++
	}
	return binary.AppendUvarint(out, uint64(idx))
}

// check is the code of a check, without its weight: prefix, then the
// weight as an i32.const immediate, then suffix.
type check struct {
	prefix, suffix []byte
}

func newCheck(yield, stop, budgetIdx, budget uint32) check {
	b := wasmasm.Uleb(uint64(budgetIdx))
	var c check
	c.prefix = wasmasm.Cat([]byte{0x23}, b, []byte{0x41}) // global.get $budget; i32.const W
	c.suffix = wasmasm.Cat(
		[]byte{0x6b},                     // i32.sub
		[]byte{0x24}, b, []byte{0x23}, b, // global.set $budget; global.get $budget
		[]byte{0x23}, wasmasm.Uleb(uint64(stop)), // global.get $stop
		[]byte{0x72, 0x41, 0x00, 0x48},            // i32.or; i32.const 0; i32.lt_s
		[]byte{0x04, 0x40},                        // if
		[]byte{0x10}, wasmasm.Uleb(uint64(yield)), //   call $yield
		[]byte{0x41}, wasmasm.Sleb(int64(budget)), //   i32.const N
		[]byte{0x24}, b, //   global.set $budget
		[]byte{0x0b}, // end
	)
	return c
}

func (c check) append(out []byte, weight int) []byte {
	out = append(out, c.prefix...)
	out = append(out, wasmasm.Sleb(int64(max(weight, 1)))...)
	return append(out, c.suffix...)
}

// bulkSite is a bulk memory or table instruction: at is where it starts,
// in the code section.
type bulkSite struct {
	at     int
	memory bool // memory.init, memory.copy, memory.fill (else a table's)
}

// bulkSite records the instruction 0xfc sub at start when it is a bulk
// memory or table operation.
func (s *codeScanner) bulkSite(start int, sub uint32) {
	switch sub {
	case 0x08, 0x0a, 0x0b: // memory.init, memory.copy, memory.fill
		s.bulk = append(s.bulk, bulkSite{at: start, memory: true})
	case 0x0c, 0x0e, 0x11: // table.init, table.copy, table.fill
		s.bulk = append(s.bulk, bulkSite{at: start})
	}
}

// edit is one change to a function body, at offset at of the code section:
// a loop's check (loop >= 0), a bulk operation's check (bulk >= 0), or a
// function index to renumber, p[at:end].
type edit struct {
	at, end    int
	loop, bulk int
}

// preemptCode is the code section payload p of n bodies with checks at
// every function entry, loop header and bulk operation, and the function
// indices renumbered; scratch is each body's local for its bulk checks.
func preemptCode(p []byte, n uint32, bodies []body, scratch []uint32, imports uint32, c check) []byte {
	out := binary.AppendUvarint(make([]byte, 0, len(p)+len(p)/8+16), uint64(n))
	var (
		buf   []byte
		edits []edit
	)
	for i, b := range bodies {
		if len(b.bulk) == 0 {
			buf = append(buf[:0], p[b.start:b.entry]...) // the locals
		} else {
			// One more group of locals: one i32.
			r := &reader{b: p[:b.entry], off: b.start}
			groups, _ := r.u32() // decoded before
			buf = binary.AppendUvarint(buf[:0], uint64(groups)+1)
			buf = append(append(buf, p[r.off:b.entry]...), 0x01, 0x7f)
		}
		loops := b.loops
		if b.merged {
			// The body runs straight to its first loop: that loop's check
			// is the entry's too.
			loops = append([]loopSite{{at: loops[0].at, weight: loops[0].weight + b.entryWeight}}, loops[1:]...)
		} else {
			buf = c.append(buf, b.entryWeight)
		}
		edits = edits[:0]
		for j, l := range loops {
			edits = append(edits, edit{at: l.at, loop: j, bulk: -1})
		}
		for j, k := range b.bulk {
			edits = append(edits, edit{at: k.at, loop: -1, bulk: j})
		}
		for _, r := range b.funcRefs {
			edits = append(edits, edit{at: r.start, end: r.end, loop: -1, bulk: -1})
		}
		// A loop's check and a bulk operation's can be at one offset (a
		// loop whose body starts with the operation): the loop's first.
		slices.SortFunc(edits, func(x, y edit) int { return cmp.Or(x.at-y.at, y.loop-x.loop) })
		last := b.entry
		for _, e := range edits {
			buf = append(buf, p[last:e.at]...)
			last = e.at
			switch {
			case e.loop >= 0:
				buf = c.append(buf, loops[e.loop].weight)
			case e.bulk >= 0:
				buf = c.appendBulk(buf, scratch[i], b.bulk[e.bulk].memory)
			default:
				buf = appendFuncIndex(buf, p[e.at:e.end], imports)
				last = e.end
			}
		}
		buf = append(buf, p[last:b.end]...)
		out = binary.AppendUvarint(out, uint64(len(buf)))
		out = append(out, buf...)
	}
	return out
}

// appendBulk appends the check of a bulk operation whose length is on the
// top of the stack, using local t.
func (c check) appendBulk(out []byte, t uint32, memory bool) []byte {
	out = append(out, 0x22) // local.tee $t
	out = binary.AppendUvarint(out, uint64(t))
	out = append(out, c.prefix[:len(c.prefix)-1]...) // global.get $budget
	out = append(out, 0x20)                          // local.get $t
	out = binary.AppendUvarint(out, uint64(t))
	if memory {
		out = append(out, 0x41, bulkShift, 0x76) // i32.const bulkShift; i32.shr_u
	}
	return append(out, c.suffix...) // i32.sub; ...
}

// dataSection decodes s.b as the data section's payload (nil: absent).
func (s *codeScanner) dataSection() error {
	if s.b == nil {
		return nil
	}
	n, err := s.u32()
	if err != nil {
		return err
	}
	if uint64(n) > uint64(len(s.b)) {
		return fmt.Errorf("%w: %d data segments in %d bytes", ErrMalformed, n, len(s.b))
	}
	for i := uint32(0); i < n; i++ {
		flags, err := s.u32()
		if err != nil {
			return err
		}
		switch flags {
		case 0: // active, memory 0
			err = s.constExpr()
		case 1: // passive
		case 2: // active, a memory index
			if _, err = s.u32(); err == nil {
				err = s.constExpr()
			}
		default:
			err = fmt.Errorf("%w: data segment flags %#x", ErrMalformed, flags)
		}
		if err != nil {
			return err
		}
		size, err := s.u32()
		if err != nil {
			return err
		}
		if err := s.skip(int(size)); err != nil {
			return err
		}
	}
	if s.off != len(s.b) {
		return fmt.Errorf("%w: trailing bytes", ErrMalformed)
	}
	return nil
}

// tagSection decodes the tag section payload p (nil: absent).
func tagSection(p []byte, types uint32) error {
	if p == nil {
		return nil
	}
	r := &reader{b: p}
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		if attr, err := r.byte(); err != nil {
			return err
		} else if attr != 0 {
			return fmt.Errorf("%w: tag attribute %#x", ErrMalformed, attr)
		}
		if t, err := r.u32(); err != nil {
			return err
		} else if t >= types {
			return fmt.Errorf("%w: tag of type %d of %d", ErrMalformed, t, types)
		}
	}
	if r.off != len(p) {
		return fmt.Errorf("%w: trailing bytes", ErrMalformed)
	}
	return nil
}

// shiftNames returns the payload of a name section, head (its name) and
// then its subsections p, with the function indices of the function (1),
// local (2) and label (3) names renumbered; the other subsections are kept
// as they are. It returns an error when p can not be read.
func shiftNames(head, p []byte, imports uint32) ([]byte, error) {
	out := append(make([]byte, 0, len(head)+len(p)+len(p)/8), head...)
	r := &reader{b: p}
	for r.off < len(p) {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		sub, err := r.bytes(size)
		if err != nil {
			return nil, err
		}
		if id < 1 || id > 3 {
			out = append(out, id)
			out = binary.AppendUvarint(out, uint64(size))
			out = append(out, sub...)
			continue
		}
		// A name map (1) or an indirect name map (2, 3) keyed by function.
		sr := &reader{b: sub}
		n, err := sr.u32()
		if err != nil {
			return nil, err
		}
		body := binary.AppendUvarint(make([]byte, 0, len(sub)+int(min(n, size))), uint64(n))
		for i := uint32(0); i < n; i++ {
			at := sr.off
			if _, err := sr.u32(); err != nil {
				return nil, err
			}
			body = appendFuncIndex(body, sub[at:sr.off], imports)
			at = sr.off
			if id == 1 {
				if _, err := sr.name(); err != nil {
					return nil, err
				}
			} else {
				k, err := sr.u32()
				if err != nil {
					return nil, err
				}
				for j := uint32(0); j < k; j++ {
					if _, err := sr.u32(); err != nil {
						return nil, err
					}
					if _, err := sr.name(); err != nil {
						return nil, err
					}
				}
			}
			body = append(body, sub[at:sr.off]...)
		}
		if sr.off != len(sub) {
			return nil, fmt.Errorf("%w: name subsection %d: trailing bytes", ErrMalformed, id)
		}
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	return out, nil
}
