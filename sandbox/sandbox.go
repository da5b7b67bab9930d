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

// CopyingMemory is a Memory whose Read returns a copy rather than a view:
// a proxy of the memory of a guest running elsewhere (package
// sandbox/forward), where only Write and WriteUint32Le reach the guest. A
// host function that would fill a view returned by Read writes through
// Write instead when mem is one.
type CopyingMemory interface {
	Memory
	ReadCopies()
}

// HostFunc is one host function of an import module. Every parameter is an
// i32 and the function returns one i32.
type HostFunc struct {
	Name   string
	Params int
	// Fn reads its parameters from stack[:Params] and writes its result to
	// stack[0]. ctx is the context the kernel passed to Module.Run, so the
	// kernel finds the calling task in it. Fn must not panic; an engine
	// still recovers and reports a panic as a trap of the calling task.
	Fn func(ctx context.Context, mem Memory, stack []uint64)
}

// MaxHostParams bounds the parameters of one host function.
const MaxHostParams = 16

// CheckHost validates a host module's functions as every engine's Host
// must before defining any of them: names present and unique, Fn set,
// Params within 0..MaxHostParams. Errors name the module and function.
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
		case f.Params < 0 || f.Params > MaxHostParams:
			return fmt.Errorf("host function %s.%s: %d params, want 0..%d", module, f.Name, f.Params, MaxHostParams)
		case seen[f.Name]:
			return fmt.Errorf("host function %s.%s registered twice", module, f.Name)
		}
		seen[f.Name] = true
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
	// Compile validates and compiles wasm, consulting the on-disk cache.
	// Modules that import anything other than the registered host modules
	// and wasi_snapshot_preview1 are refused.
	Compile(ctx context.Context, wasm []byte) (Module, error)
	// Close releases everything the engine holds.
	Close(ctx context.Context) error
}

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
