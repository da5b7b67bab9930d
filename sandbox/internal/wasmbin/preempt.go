package wasmbin

import (
	"encoding/binary"
	"fmt"

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
// What this does not bound: one instruction can take long by itself
// (memory.fill or memory.copy of the whole memory, table.fill of a large
// table); their length is bounded by the memory and table limits.
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
const PreemptBudget = 50_000

// maxWeight bounds a check's weight and the budget, so that the budget
// (at most maxWeight, less at most maxWeight) never overflows an i32.
const maxWeight = 1 << 24

// voidSig is the type of $yield: () -> ().
var voidSig = []byte{0x60, 0x00, 0x00}

// Preempt returns wasm rewritten so that it calls into the host every
// budget units of work and stops when the host sets its stop flag (see
// above). A module without functions is returned as it is (it has nothing
// that could run long). It returns an error, and the caller refuses the
// module, when the module can not be decoded, uses an instruction the
// decoder does not know, names an index past the original function or
// global index spaces, has a loop body or function of more than 2^24
// instructions, imports PreemptModule or exports StopExport.
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
	types, voidIdx, err := scanTypes(payload(secType), voidSig)
	if err != nil {
		return nil, fmt.Errorf("type section: %w", err)
	}
	funcs, err := checkFunctions(payload(secFunction), types)
	if err != nil {
		return nil, fmt.Errorf("function section: %w", err)
	}
	if funcs == 0 {
		return wasm, nil
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
	// what it appends can not complete a truncated entry of the guest's.
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
		secCode: preemptCode(code, funcs, bodies, imp.funcs, newCheck(yield, stop, budgetIdx, budget)),
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
	names := func(p []byte) ([]byte, bool) {
		r := &reader{b: p}
		if name, err := r.name(); err != nil || name != "name" {
			return p, true
		}
		// The name section is read by wazero (trap stack traces); one it
		// can not read is dropped rather than left with stale indices.
		out, err := shiftNames(p[:r.off], p[r.off:], imp.funcs)
		return out, err == nil
	}
	return rebuild(wasm, m, at, replaced, names), nil
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

// preemptCode is the code section payload p of n bodies with checks at
// every function entry and loop header and the function indices
// renumbered.
func preemptCode(p []byte, n uint32, bodies []body, imports uint32, c check) []byte {
	out := binary.AppendUvarint(make([]byte, 0, len(p)+len(p)/8+16), uint64(n))
	var buf []byte
	for _, b := range bodies {
		buf = append(buf[:0], p[b.start:b.entry]...) // the locals
		last := b.entry
		loops := b.loops
		if b.merged {
			// The body runs straight to its first loop: that loop's check
			// is the entry's too.
			loops = append([]loopSite{{at: loops[0].at, weight: loops[0].weight + b.entryWeight}}, loops[1:]...)
		} else {
			buf = c.append(buf, b.entryWeight)
		}
		refs := b.funcRefs
		for len(loops) > 0 || len(refs) > 0 {
			if len(refs) == 0 || len(loops) > 0 && loops[0].at <= refs[0].start {
				buf = append(buf, p[last:loops[0].at]...)
				buf = c.append(buf, loops[0].weight)
				last = loops[0].at
				loops = loops[1:]
				continue
			}
			buf = append(buf, p[last:refs[0].start]...)
			buf = appendFuncIndex(buf, p[refs[0].start:refs[0].end], imports)
			last = refs[0].end
			refs = refs[1:]
		}
		buf = append(buf, p[last:b.end]...)
		out = binary.AppendUvarint(out, uint64(len(buf)))
		out = append(out, buf...)
	}
	return out
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
