// Package sandbox defines how the kernel runs WebAssembly: the Engine
// interface that each engine implements (sandbox/wazero, the default, and
// sandbox/wasmtime behind the build tag "wasmtime"), and the host-call
// interface the kernel hands an engine.
//
// This package holds only interfaces and small value types; it imports the
// standard library alone, so the kernel can depend on it without depending on
// any engine, the way database/sql depends on no driver.
//
//	eng, _ := wazero.New(ctx, sandbox.Config{CacheDir: dir})
//	_ = eng.Host(abi.ModuleName, hostFuncs) // once, before any Run
//	mod, _ := eng.Compile(ctx, wasm)
//	res, err := mod.Run(ctx, sandbox.RunConfig{MemoryLimit: 64 << 20, Timeout: time.Second})
package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"
)

// Memory is a guest's linear memory as a host function sees it. Every
// accessor bounds-checks and reports false when the range lies outside the
// memory; it never panics. wazero's api.Memory satisfies it as is.
type Memory interface {
	// Read returns a view of byteCount bytes at offset. The view aliases
	// guest memory: copy it before the guest runs again.
	Read(offset, byteCount uint32) ([]byte, bool)
	Write(offset uint32, v []byte) bool
	ReadUint32Le(offset uint32) (uint32, bool)
	WriteUint32Le(offset, v uint32) bool
	// Size is the memory's current size in bytes.
	Size() uint32
}

// HostFunc is one host function of an import module. Every parameter is an
// i32 and the function returns one i32.
type HostFunc struct {
	Name string
	// Params describes each parameter, in order: their number is the
	// function's arity, and what each is tells a caller that carries the
	// call elsewhere (package sandbox/forward) which guest memory the
	// function reads and fills. A generic module may leave them zero
	// (unnamed Values).
	Params []Param
	// Fn reads its parameters from stack[:len(Params)] and writes its
	// result to stack[0]. ctx is the context the kernel passed to
	// Module.Run, so the kernel finds the calling task in it. Fn must not
	// panic; an engine still recovers and reports a panic as a trap of the
	// calling task.
	Fn func(ctx context.Context, mem Memory, stack []uint64)
}

// Param is one parameter of a host function: its name and what the
// function does with it.
type Param struct {
	Name string
	Kind ParamKind
	// Limit is, for In, the most bytes the function reads (a longer
	// length is refused without reading), and for Buf the most it fills.
	Limit int
	// Size is, for Out, how many bytes the function writes there.
	Size int
}

// ParamKind says what a host function does with a parameter.
type ParamKind uint8

const (
	// Value is a plain number: an offset, a count.
	Value ParamKind = iota
	// Handle names an entry of the calling task's table.
	Handle
	// In points at bytes the function reads; the next parameter (a Len)
	// is their length.
	In
	// Buf points at a buffer the function fills and never reads; the next
	// parameter (a Len) is its length. It takes a view of the buffer with
	// Memory.Read only once it knows what it puts there, and fills it all.
	Buf
	// Len is the length of the In or Buf just before it.
	Len
	// Out points at Size bytes the function writes (a handle, a count).
	Out
)

func (k ParamKind) String() string {
	switch k {
	case Value:
		return "value"
	case Handle:
		return "handle"
	case In:
		return "in"
	case Buf:
		return "buf"
	case Len:
		return "len"
	case Out:
		return "out"
	}
	return fmt.Sprintf("ParamKind(%d)", k)
}

// Values returns n unnamed Value parameters, for a generic host module.
func Values(n int) []Param { return make([]Param, n) }

// MaxHostParams bounds the parameters of one host function.
const MaxHostParams = 16

// CheckHost validates a host module's functions as every engine's Host
// must before defining any of them: names present and unique, Fn set, at
// most MaxHostParams parameters, each In and Buf followed by its Len (and
// a Len by nothing else) with a positive Limit, each Out with a positive
// Size. Errors name the module and function.
func CheckHost(module string, funcs []HostFunc) error {
	if module == "" {
		return errors.New("empty host module name")
	}
	seen := make(map[string]bool, len(funcs))
	for _, f := range funcs {
		switch {
		case f.Name == "":
			return fmt.Errorf("host module %q: function with empty name", module)
		case f.Fn == nil:
			return fmt.Errorf("host function %s.%s: nil Fn", module, f.Name)
		case len(f.Params) > MaxHostParams:
			return fmt.Errorf("host function %s.%s: %d params, want 0..%d", module, f.Name, len(f.Params), MaxHostParams)
		case seen[f.Name]:
			return fmt.Errorf("host function %s.%s registered twice", module, f.Name)
		}
		if err := checkParams(f.Params); err != nil {
			return fmt.Errorf("host function %s.%s: %w", module, f.Name, err)
		}
		seen[f.Name] = true
	}
	return nil
}

func checkParams(ps []Param) error {
	for i, p := range ps {
		pointer := p.Kind == In || p.Kind == Buf
		switch {
		case p.Kind > Out:
			return fmt.Errorf("parameter %d (%s): %v", i, p.Name, p.Kind)
		case pointer && (i+1 == len(ps) || ps[i+1].Kind != Len):
			return fmt.Errorf("parameter %d (%s): %v is not followed by its len", i, p.Name, p.Kind)
		case p.Kind == Len && (i == 0 || ps[i-1].Kind != In && ps[i-1].Kind != Buf):
			return fmt.Errorf("parameter %d (%s): a len after no in or buf", i, p.Name)
		case pointer && p.Limit <= 0:
			return fmt.Errorf("parameter %d (%s): %v with limit %d", i, p.Name, p.Kind, p.Limit)
		case p.Kind == Out && p.Size <= 0:
			return fmt.Errorf("parameter %d (%s): out of size %d", i, p.Name, p.Size)
		}
	}
	return nil
}

// Config configures an engine. The zero value is usable: no on-disk cache.
type Config struct {
	// CacheDir is where compiled modules are kept between processes. Empty
	// means compile in memory only.
	CacheDir string
	// NoSnapshots starts every task of a reactor with its _initialize,
	// rather than from the module's pre-initialised snapshot (wazero; see
	// its package documentation).
	NoSnapshots bool
}

// Snapshotter is a Module an engine may start from a pre-initialised
// snapshot (a reactor's _initialize run once for every task): Snapshot
// says whether its tasks do, and when not, why.
type Snapshotter interface {
	Snapshot() (used bool, why string)
}

// ModuleKind tells how a module is entered.
type ModuleKind int

const (
	// Command modules export _start (a Go main package built with the
	// default build mode); the task is the run of main.
	Command ModuleKind = iota
	// Reactor modules export _initialize and an entry function (a Go
	// package built with -buildmode=c-shared exporting "run" through
	// //go:wasmexport); the task is _initialize followed by the entry.
	Reactor
)

func (k ModuleKind) String() string {
	if k == Reactor {
		return "reactor"
	}
	return "command"
}

// DefaultEntry is the function a reactor task runs.
const DefaultEntry = "run"

// Engine compiles and runs WebAssembly modules. Implementations must be safe
// for concurrent use.
type Engine interface {
	// Name identifies the engine, e.g. "wazero".
	Name() string
	// Host registers an import module of host functions. It must be called
	// before the first Compile and at most once per module name.
	Host(module string, funcs []HostFunc) error
	// Compile is CompileWith with the zero CompileConfig: the default
	// static limits, no bound on time beyond ctx, the default compile
	// memory.
	Compile(ctx context.Context, wasm []byte) (Module, error)
	// CompileWith validates and compiles wasm, consulting the on-disk
	// cache. Modules that import anything other than the registered host
	// modules and wasi_snapshot_preview1 are refused, as are modules past
	// cfg.Limits (an error wrapping ErrStaticLimit that names the limit).
	// A compile that runs past cfg.Timeout or cfg.MemoryLimit is ended
	// and reported as ErrTimeout or ErrMemoryLimit (wrapped). Bytes
	// already compiled return the same module, whose static limits are
	// checked against cfg all the same.
	CompileWith(ctx context.Context, wasm []byte, cfg CompileConfig) (Module, error)
	// Close releases everything the engine holds.
	Close(ctx context.Context) error
}

// CompileConfig bounds one compilation: what a module may contain before
// anything compiles it, and what compiling it may cost. A task's module is
// compiled under that task's limits (kernel.Limits), so a compile bomb
// ends as the task's timeout or memory limit, never as the host's.
type CompileConfig struct {
	// Limits are checked on the module's bytes before it is compiled;
	// zero fields take the defaults (DefaultStaticLimits).
	Limits StaticLimits
	// Timeout bounds the compile's wall-clock and CPU time; zero means
	// none beyond ctx.
	Timeout time.Duration
	// MemoryLimit bounds the memory the compile may use; zero means
	// DefaultCompileMemory.
	MemoryLimit uint64
}

// DefaultCompileMemory is what CompileConfig.MemoryLimit zero means.
const DefaultCompileMemory = 1 << 30

// StaticLimits bound what a module may contain. Each is checked on the
// module's bytes, in time linear in their size, before any compiler sees
// them. Zero fields take DefaultStaticLimits' values.
type StaticLimits struct {
	// Functions is the most functions a module defines.
	Functions int
	// Locals is the most locals (parameters included) of one function.
	Locals int
	// Nesting is the deepest nesting of blocks, loops and ifs in one
	// function body.
	Nesting int
	// BrTableTargets is the most targets of one br_table, its default
	// included.
	BrTableTargets int
	// BodySize is the most bytes of one function body (its locals
	// declarations and code, not its size prefix).
	BodySize int
}

// DefaultStaticLimits holds every module of the repository's guests with
// room to spare and refuses the shapes that make compilers slow or large
// (issue 24: 50,000 nested loops, 500,000 nested blocks, a br_table of
// 10^6 targets, 10^6 or 2x10^5 functions, 2,000 functions of 50,000
// locals, a straight-line body of megabytes).
//
// Measured on the repository's 102 guests (Go guests of testdata/guests,
// testdata/attacks, examples and the CLI's tests, the Rust and C guests;
// BENCHMARKS.md), the largest of each:
//
//	functions         6,206  (examples/bank/bankd, Go)
//	locals               37  (examples/quickstart/guest-rust; Go: 21)
//	nesting             549  (every Go guest: the runtime's; Rust 29, C 16)
//	br_table targets  1,145  (examples/staybooker/planner, Go)
//	function size    50,636 bytes (examples/staybooker/planner, Go)
//
// Each limit is about 4x that, rounded, but locals (LLVM's register
// allocation gives a large Rust or C function hundreds, where Go uses a
// fixed set) and the function size (generated code), which have more. At
// the limits, one function costs wazero's compiler at most about 0.3 s and
// 60 MB (BENCHMARKS.md); what many such functions cost together is
// bounded by CompileConfig's Timeout and MemoryLimit, not here.
var DefaultStaticLimits = StaticLimits{
	Functions:      25_000,
	Locals:         1_000,
	Nesting:        2_500,
	BrTableTargets: 5_000,
	BodySize:       1 << 20,
}

// WithDefaults returns l with its zero fields set from DefaultStaticLimits.
func (l StaticLimits) WithDefaults() StaticLimits {
	d := DefaultStaticLimits
	if l.Functions == 0 {
		l.Functions = d.Functions
	}
	if l.Locals == 0 {
		l.Locals = d.Locals
	}
	if l.Nesting == 0 {
		l.Nesting = d.Nesting
	}
	if l.BrTableTargets == 0 {
		l.BrTableTargets = d.BrTableTargets
	}
	if l.BodySize == 0 {
		l.BodySize = d.BodySize
	}
	return l
}

// ErrStaticLimit is wrapped by the error of a module refused for passing a
// StaticLimits bound.
var ErrStaticLimit = errors.New("sandbox: module past a static limit")

// Module is a compiled module, ready to be run any number of times.
type Module interface {
	// Digest is the SHA-256 of the module's bytes, as Digest computes it.
	Digest() string
	Kind() ModuleKind
	// Run instantiates the module with nothing ambient (no files, no
	// environment, no arguments beyond the program name, no sockets), runs
	// it to completion and closes the instance. It returns an *ExitError
	// when the guest exits non-zero or traps, ErrTimeout when cfg.Timeout
	// or ctx stopped it, and ErrMemoryLimit (wrapped) when it died after a
	// refused memory growth.
	Run(ctx context.Context, cfg RunConfig) error
	Close(ctx context.Context) error
}

// RunConfig holds the per-task settings of one Run.
type RunConfig struct {
	// Name is the program name (argv[0]) and instance name.
	Name string
	// Entry is the function a reactor runs; DefaultEntry when empty.
	Entry string
	// MemoryLimit bounds linear memory in bytes; a growth past it fails
	// (memory.grow returns -1). Zero means the engine's default, 4 GiB.
	MemoryLimit uint64
	// Timeout bounds the wall-clock time of the whole run; zero means none
	// beyond ctx.
	Timeout time.Duration
	// Stdout and Stderr receive the guest's output; nil discards it.
	Stdout, Stderr io.Writer
}

// Errors a Run reports.
var (
	ErrTimeout     = errors.New("sandbox: stopped at deadline")
	ErrMemoryLimit = errors.New("sandbox: memory limit reached")
	ErrCanceled    = errors.New("sandbox: canceled")
)

// ExitError reports a guest that exited non-zero or trapped.
type ExitError struct {
	Code uint32
	// Trap is the engine's description of a trap, empty for a plain exit.
	Trap string
	// Err is ErrMemoryLimit when the guest died after a refused growth.
	Err error
}

func (e *ExitError) Error() string {
	var s string
	if e.Trap != "" {
		s = "guest trapped: " + e.Trap
	} else {
		s = fmt.Sprintf("guest exited with code %d", e.Code)
	}
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

func (e *ExitError) Unwrap() error { return e.Err }

// Digest returns the identity of a module: "sha256:" and the hex SHA-256 of
// its bytes. It is the name used in logs, the graph and manifest pinning.
func Digest(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// IsDigest reports whether s has the form Digest returns: "sha256:" and 64
// lower-case hex digits.
func IsDigest(s string) bool {
	const prefix = "sha256:"
	if len(s) != len(prefix)+64 || s[:len(prefix)] != prefix {
		return false
	}
	for _, c := range s[len(prefix):] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
