package sandbox

import (
	"context"
	"strings"
)

// IdleModule is a module that runs no code: Run waits until its context
// is canceled. A host gives it to a task that exists only to hold
// capabilities and carry a label (an MCP session), and tests run kernel
// tasks on it to make their calls from Go.
type IdleModule struct{}

// Digest names no real module: sha256 of nothing anyone compiled.
func (IdleModule) Digest() string { return "sha256:" + strings.Repeat("0", 64) }

// Kind is Command.
func (IdleModule) Kind() ModuleKind { return Command }

// Close does nothing.
func (IdleModule) Close(context.Context) error { return nil }

// Run waits for ctx and reports ErrCanceled.
func (IdleModule) Run(ctx context.Context, _ RunConfig) error {
	<-ctx.Done()
	return ErrCanceled
}
