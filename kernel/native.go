package kernel

import "context"

// TaskOf returns the task whose Module.Run was given ctx (or a context
// derived from it), nil for any other context. A module the host
// implements in Go rather than WebAssembly (an upstream MCP tool's call:
// host.UpstreamModule) makes its calls through it, as a guest makes them
// through its host functions: on its own task's table only, through the
// same pipeline, with the same audit.
func TaskOf(ctx context.Context) *Task { return taskFrom(ctx) }
