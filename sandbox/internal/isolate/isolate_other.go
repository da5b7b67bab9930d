//go:build !linux

package isolate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mandatevm/mandate/sandbox"
)

// Supported reports whether Run starts a child process (Linux) rather than
// running the job in the calling process.
const Supported = false

// Register records job under name.
func Register(name string, job Job) {
	jobsMu.Lock()
	defer jobsMu.Unlock()
	if _, dup := jobs[name]; dup {
		panic("isolate: job " + name + " registered twice")
	}
	jobs[name] = job
}

// Run runs the job registered as job in the calling process: on this
// system nothing bounds it but ctx, checked before it starts.
func Run(ctx context.Context, job string, req []byte, lim Limits) (Result, error) {
	j := lookup(job)
	if j == nil {
		return Result{}, fmt.Errorf("isolate: no job %q registered", job)
	}
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return Result{}, fmt.Errorf("%w: %s: %w", sandbox.ErrTimeout, job, err)
		}
		return Result{}, fmt.Errorf("%w: %s: %w", sandbox.ErrCanceled, job, err)
	}
	start := time.Now()
	var out bytes.Buffer
	if err := j(req, &out); err != nil {
		return Result{}, errorf(job, "%v", err)
	}
	return Result{Output: out.Bytes(), Wall: time.Since(start)}, nil
}
