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
)

var (
	initOnce sync.Once
	initErr  error
	ready    atomic.Bool // set once Init succeeded
	// hooks run once after the module is instantiated, in the order they
	// were registered: the work the cgraph and gvc packages did in their
	// init functions.
	hooks []func(context.Context) error
)

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

// noFile is what the module's file system answers without SetWasmFileSystem:
// the module never sees the host's files.
func noFile(name string) error {
	return &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}
