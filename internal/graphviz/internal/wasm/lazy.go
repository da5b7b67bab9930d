package wasm

// This file is not upstream: it is what replaced the package's init
// function (see ../../README.md). Linking the package does no work; the
// module is compiled and instantiated by the first Init.

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
)

var (
	initOnce sync.Once
	initErr  error
	ready    atomic.Bool // set once Init succeeded
	// hooks run once after the module is instantiated, in the order they
	// were registered: the work the cgraph and gvc packages did in their
	// init functions.
	hooks []func(context.Context) error

	// wasmRuntime and compiledModule are kept by instantiate for Reset.
	wasmRuntime    wazero.Runtime
	compiledModule wazero.CompiledModule
)

// moduleConfig is the configuration of the module's instance: the file
// system fs mounted at /, no stdin, stdout or stderr.
func moduleConfig(fs *WasmFileSystem) wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		WithFSConfig(wazero.NewFSConfig().WithFSMount(fs, "/")).
		WithName("wasi")
}

// ErrNotInitialized is returned by entry points used before Init.
var ErrNotInitialized = errors.New("graphviz: not initialized")

// OnInit registers f to run after the module is instantiated. It is
// meant for package init functions, which must do no other work.
func OnInit(f func(context.Context) error) { hooks = append(hooks, f) }

// Init compiles and instantiates the module once, keeping its compiled
// code in cacheDir ("": no cache). Only the first call does anything: later
// calls wait for it and return its error, whatever their cacheDir. A
// cancellation of ctx does not reach the compilation (its result is kept
// for the life of the process).
func Init(ctx context.Context, cacheDir string) error {
	initOnce.Do(func() {
		ctx := context.WithoutCancel(ctx)
		if initErr = instantiate(ctx, cacheDir); initErr != nil {
			mod = nil
			return
		}
		for _, f := range hooks {
			if initErr = f(ctx); initErr != nil {
				return
			}
		}
		ready.Store(true)
	})
	return initErr
}

// Ready returns nil once Init has succeeded, ErrNotInitialized before.
func Ready() error {
	if !ready.Load() {
		return ErrNotInitialized
	}
	return nil
}

// Reset replaces the module's instance by a new one (the compiled code is
// kept): the generated glue never frees what it allocates in the module's
// memory, which grows by about the size of each drawing's input and output
// and never shrinks, so a long-lived process resets it now and then. Every
// object made before (contexts, graphs, plugins) is invalid after; the
// cgraph descriptors are made again. It must not run concurrently with any
// other use of the package. After an error the package is unusable.
func Reset(ctx context.Context) error {
	if !ready.Load() {
		return ErrNotInitialized
	}
	ctx = context.WithoutCancel(ctx)
	ready.Store(false)
	if err := mod.mod.Close(ctx); err != nil {
		return err
	}
	m, err := wasmRuntime.InstantiateModule(ctx, compiledModule, moduleConfig(mod.fs))
	if err != nil {
		return err
	}
	mod.mod = m
	for _, f := range hooks {
		if err := f(ctx); err != nil {
			return err
		}
	}
	ready.Store(true)
	return nil
}

// MemorySize is the size of the module's memory in bytes (0 before Init).
func MemorySize() uint64 {
	if !ready.Load() {
		return 0
	}
	return uint64(mod.mod.Memory().Size())
}

// noFile is what the module's file system answers without SetWasmFileSystem:
// the module never sees the host's files.
func noFile(name string) error {
	return &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}
