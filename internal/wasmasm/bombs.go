package wasmasm

import "bytes"

// Command is a command module: one type () -> (), funcs functions of that
// type each with body (its locals declarations, code and final end), a
// memory of one page, and function 0 exported as _start.
func Command(funcs int, body []byte) []byte {
	size := Uleb(uint64(len(body)))
	code := make([]byte, 0, 5+funcs*(len(size)+len(body)))
	code = append(code, Uleb(uint64(funcs))...)
	for range funcs {
		code = append(append(code, size...), body...)
	}
	return Module(
		Section(1, Vec([]byte{0x60, 0, 0})),
		Section(3, Uleb(uint64(funcs)), bytes.Repeat([]byte{0}, funcs)),
		Section(5, Vec([]byte{0, 1})),
		Section(7, Vec(Cat(Name("_start"), []byte{0}, Uleb(0)))),
		Section(10, code),
	)
}

// The shapes of module that make compilers slow or large (issue 24), each
// as a valid command module of its own size: what a static check must
// refuse before any compiler sees it.

// NestedLoops is a function of n loops, each nested in the one before.
func NestedLoops(n int) []byte { return nested(0x03, n) }

// NestedBlocks is a function of n blocks, each nested in the one before.
func NestedBlocks(n int) []byte { return nested(0x02, n) }

func nested(op byte, n int) []byte {
	return Command(1, Cat([]byte{0}, bytes.Repeat([]byte{op, 0x40}, n), bytes.Repeat([]byte{0x0b}, n+1)))
}

// BrTable is a function with one br_table of n labels and its default.
func BrTable(n int) []byte {
	return Command(1, Cat(
		[]byte{0, 0x02, 0x40, 0x41, 0x00, 0x0e},                // block; i32.const 0; br_table
		Uleb(uint64(n)), bytes.Repeat([]byte{0}, n), []byte{0}, // n labels, the default
		[]byte{0x0b, 0x0b}))
}

// Functions is a module of n empty functions.
func Functions(n int) []byte { return Command(n, []byte{0, 0x0b}) }

// Locals is a module of funcs functions, each declaring n i32 locals.
func Locals(funcs, n int) []byte {
	return Command(funcs, Cat([]byte{1}, Uleb(uint64(n)), []byte{0x7f, 0x0b}))
}

// StraightLine is a function whose body is about size bytes of
// "i32.const 0; drop", with no block, loop or branch.
func StraightLine(size int) []byte {
	return Command(1, Cat([]byte{0}, bytes.Repeat([]byte{0x41, 0x00, 0x1a}, size/3), []byte{0x0b}))
}

// Bomb is one of the compile bombs of issue 24, as a test builds it.
type Bomb struct {
	Name string
	// Limit is the static limit that refuses it, as limits {} names it.
	Limit string
	Wasm  func() []byte
}

// Bombs are the compile bombs of issue 24, at the sizes it reports.
var Bombs = []Bomb{
	{"50,000 nested loops", "nesting", func() []byte { return NestedLoops(50_000) }},
	{"a br_table of 10^6 targets", "br_table_targets", func() []byte { return BrTable(1_000_000) }},
	{"500,000 nested blocks", "nesting", func() []byte { return NestedBlocks(500_000) }},
	{"10^6 empty functions", "functions", func() []byte { return Functions(1_000_000) }},
	{"2,000 functions of 50,000 locals", "locals", func() []byte { return Locals(2_000, 50_000) }},
	{"a straight-line body of 8 MiB", "function_size", func() []byte { return StraightLine(8 << 20) }},
}
