package wasmbin

import (
	"fmt"
	"sync"

	"github.com/mandatevm/mandate/sandbox"
)

// Why check a module before compiling it?
//
// A compiler's time and memory grow with what a module contains, some of
// it faster than with the module's size: a 150 KB module of 50,000 nested
// loops, a br_table of 10^6 targets, 10^6 empty functions or 2,000
// functions of 50,000 locals each hold a core for minutes or take
// gigabytes to compile, on both engines (issue 24). Static counts what
// compilers pay for, in one pass over the module's bytes that allocates
// little (nothing per function or per instruction beyond the type
// section's parameter counts), and Check refuses a module past a task's
// sandbox.StaticLimits before any compiler sees it.
//
// The pass decodes every instruction with the decoder TrackGrowth and
// Preempt use (growth.go): a module it can not decode is refused, as those
// rewrites would refuse it. Locals are counted from their declarations'
// run lengths, never expanded.

// Stat is one of a module's per-function counts: the largest value among
// its functions and the first function (in the module's function index
// space, imports included) that has it; Func is -1 when the module defines
// no function.
type Stat struct {
	Value int
	Func  int
}

// Stats are the counts of a module that sandbox.StaticLimits bound.
type Stats struct {
	// Functions is the number of functions the module defines.
	Functions int
	// Locals is the most locals of one function, parameters included.
	Locals Stat
	// Nesting is the deepest nesting of blocks, loops and ifs in one body
	// (a body without any is 0).
	Nesting Stat
	// BrTableTargets is the most targets of one br_table, its default
	// included.
	BrTableTargets Stat
	// BodySize is the largest function body, in bytes (its locals
	// included, its size prefix not).
	BodySize Stat
}

// Static scans wasm, parsed as m, and returns its Stats. It returns an
// error, and the caller refuses the module, when the module can not be
// decoded (ErrMalformed) or uses an instruction the decoder does not know
// (ErrUnsupported). Its time is linear in len(wasm).
func Static(wasm []byte, m *Module) (Stats, error) {
	st := Stats{Locals: Stat{Func: -1}, Nesting: Stat{Func: -1}, BrTableTargets: Stat{Func: -1}, BodySize: Stat{Func: -1}}
	at, err := indexSections(m)
	if err != nil {
		return st, err
	}
	payload := func(id byte) []byte { return at.payload(wasm, m, id) }
	imp, err := scanImports(payload(SecImport))
	if err != nil {
		return st, fmt.Errorf("import section: %w", err)
	}
	types, _, params, err := scanTypes(payload(secType), nil)
	if err != nil {
		return st, fmt.Errorf("type section: %w", err)
	}
	fp := payload(secFunction)
	funcs, err := checkFunctions(fp, types)
	if err != nil {
		return st, fmt.Errorf("function section: %w", err)
	}
	st.Functions = int(funcs)
	globals, err := sectionCount(payload(secGlobal))
	if err != nil {
		return st, fmt.Errorf("global section: %w", err)
	}
	nFuncs := uint64(imp.funcs) + uint64(funcs)

	fr := &reader{b: fp}
	fr.u32() // decoded by checkFunctions
	fn := int(imp.funcs)
	s := &codeScanner{types: uint64(types), funcs: nFuncs, globals: uint64(imp.globals) + uint64(globals)}
	err = s.eachBody(payload(secCode), funcs, func(hdr, start, entry int) {
		t, _ := fr.u32() // decoded by checkFunctions, below types
		st.Locals.grow(int(s.locals)+int(params[t]), fn)
		st.Nesting.grow(s.maxDepth, fn)
		st.BrTableTargets.grow(s.maxTargets, fn)
		st.BodySize.grow(len(s.b)-start, fn)
		fn++
	})
	if err != nil {
		return st, err
	}
	return st, nil
}

// grow records v of function fn when it is the largest so far.
func (s *Stat) grow(v, fn int) {
	if v > s.Value || s.Func < 0 {
		s.Value, s.Func = v, fn
	}
}

// Check returns an error wrapping sandbox.ErrStaticLimit, naming the limit
// (as limits {} spells it), the module's value and the function that has
// it, when st is past one of l; l's zero fields are the defaults.
func (st Stats) Check(l sandbox.StaticLimits) error {
	l = l.WithDefaults()
	if st.Functions > l.Functions {
		return fmt.Errorf("%w: the module defines %d functions; the limit (limits { functions }) is %d",
			sandbox.ErrStaticLimit, st.Functions, l.Functions)
	}
	for _, c := range []struct {
		stat  Stat
		limit int
		what  string // a format of the function index and the value
		name  string
		unit  string
	}{
		{st.Locals, l.Locals, "function %d has %d locals", "locals", ""},
		{st.Nesting, l.Nesting, "function %d nests blocks %d deep", "nesting", ""},
		{st.BrTableTargets, l.BrTableTargets, "function %d has a br_table of %d targets", "br_table_targets", ""},
		{st.BodySize, l.BodySize, "function %d has a body of %d bytes", "function_size", " bytes"},
	} {
		if c.stat.Value > c.limit {
			return fmt.Errorf("%w: "+c.what+"; the limit (limits { %s }) is %d%s",
				sandbox.ErrStaticLimit, c.stat.Func, c.stat.Value, c.name, c.limit, c.unit)
		}
	}
	return nil
}

// StaticCache remembers the Stats of modules by digest (a module's Stats
// depend on its bytes alone), so that an engine compiling bytes it has
// compiled before checks the new task's limits without reading the module
// again. The zero value is ready to use; it is safe for concurrent use and
// holds at most maxCachedStats modules' Stats (then starts afresh: a
// module forgotten is read again).
type StaticCache struct {
	mu    sync.Mutex
	stats map[string]Stats // by digest
}

const maxCachedStats = 4096

// Check checks wasm, whose digest (sandbox.Digest) is digest, against l.
// The error wraps sandbox.ErrStaticLimit for a module past a limit, and
// ErrMalformed or ErrUnsupported for one Static can not read.
func (c *StaticCache) Check(digest string, wasm []byte, l sandbox.StaticLimits) error {
	c.mu.Lock()
	st, ok := c.stats[digest]
	c.mu.Unlock()
	if !ok {
		m, err := Parse(wasm)
		if err != nil {
			return err
		}
		if st, err = Static(wasm, m); err != nil {
			return err
		}
		c.mu.Lock()
		if c.stats == nil || len(c.stats) >= maxCachedStats {
			c.stats = map[string]Stats{}
		}
		c.stats[digest] = st
		c.mu.Unlock()
	}
	return st.Check(l)
}
