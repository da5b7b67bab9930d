// Package isolate runs a job of the engine (compiling an untrusted module)
// in a child process that the operating system bounds, so that a job that
// takes too long or too much memory ends as the caller's timeout or memory
// limit and the calling process never holds what it allocated.
//
// The child is the current executable (os.Executable), started again with
// the environment variable EnvVar naming the job: the "reexec" pattern, so
// it works in the mandate binary and in any test binary alike. A package
// registers its jobs from an init function:
//
//	func init() { isolate.Register("wazero-compile", compileJob) }
//
// In the child, Register runs the job when EnvVar names it, and exits: the
// package's init runs before the program's own (main, TestMain), so
// nothing else of the program runs in the child. In the parent, Register
// only records the job, and Run starts a child for it:
//
//	out, err := isolate.Run(ctx, "wazero-compile", req, isolate.Limits{Memory: 256 << 20, Timeout: 5 * time.Second})
//
// # Bounds
//
// The child bounds itself before it reads its request (Linux):
//
//   - its resident size, watched by the parent (every 10 ms, from
//     /proc/PID/status), to Headroom plus Limits.Memory: past it the parent
//     kills the child and Run returns sandbox.ErrMemoryLimit. Headroom is
//     what compiling the largest Go guest of the repository takes on either
//     engine (measured: see Headroom), so every real guest compiles
//     whatever the memory limit, and a compile bomb gets at most
//     Limits.Memory more;
//   - its address space (setrlimit RLIMIT_AS), as a backstop against a
//     growth faster than the parent's polling, to what it maps when it
//     starts (the executable, the Go runtime's reservations) plus twice
//     Headroom plus Limits.Memory: address space is not memory (malloc
//     arenas and runtime reservations map far more than they touch), and a
//     bound on it alone refused a 252 MiB compile under a 1 GiB limit;
//   - the Go heap (debug.SetMemoryLimit) to Limits.Memory plus half of
//     Headroom, so the garbage collector works to stay below it before the
//     address space runs out (and does not thrash compiling a real guest
//     under a small limit);
//   - its CPU time (RLIMIT_CPU) to Limits.Timeout rounded up to a second:
//     past it the kernel sends SIGXCPU, on which the child exits, and a
//     second later SIGKILL.
//
// The parent starts the child in a process group of its own, and kills the
// group when ctx is done or Limits.Timeout of wall-clock time has passed;
// the child gets SIGKILL too when the thread that started it dies
// (Pdeathsig: Run keeps that thread for the child's life). Run returns once
// the child is reaped: no child outlives it.
//
// # Outcomes
//
// Run returns the job's output, or an error wrapping:
//
//   - sandbox.ErrTimeout: ctx's deadline, Limits.Timeout of wall clock, or
//     the CPU-time limit;
//   - sandbox.ErrMemoryLimit: the child ran out of memory (the Go runtime's
//     "out of memory", a failed mmap or allocation, "cannot allocate
//     memory" on its stderr, the kernel's OOM killer) or failed with a peak
//     RSS past Limits.Memory;
//   - sandbox.ErrCanceled: ctx was canceled;
//   - anything else: the job's error or the child's death, with the start of
//     its stderr (at most MaxStderr bytes).
//
// Result.MaxRSS, the child's peak resident memory (ProcessState.SysUsage),
// is there for the report either way.
//
// On systems other than Linux there is no child: Run runs the job in the
// calling process, bounded by nothing but ctx (Supported is false), and the
// engines compile in process.
package isolate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// EnvVar is the environment variable naming the job a child runs.
const EnvVar = "MANDATE_ISOLATE_JOB"

// Headroom is the address space a child may map beyond what it has mapped
// when it starts and beyond Limits.Memory: what compiling the largest Go
// guest of the repository (internal/cli/testdata/guests/cli-guest, 10.7 MB
// of WebAssembly) maps on top of the child's start, with a margin. Measured
// by the engines' TestMeasureHeadroom (MANDATE_MEASURE=1; BENCHMARKS.md):
// wazero 171 MiB (peak RSS 173 MiB), wasmtime 359 MiB (its compiler
// threads and their malloc arenas; peak RSS 302 MiB). What the child has
// mapped when it starts is mostly the Go runtime's reservations and the
// executable: about 1.5 GiB of address space, little of it resident.
const Headroom = 512 << 20

// MeasureVar, set in a child's environment, makes it write to its stderr,
// as it ends, its virtual size when it started, its peak virtual size and
// its peak RSS ("isolate: VmSize at start N, VmPeak N, VmHWM N", in bytes):
// how Headroom was measured.
const MeasureVar = "MANDATE_ISOLATE_MEASURE"

// MaxStderr is how much of a child's stderr an error carries.
const MaxStderr = 16 << 10

// Limits bound one child.
type Limits struct {
	// Memory is what the job may use beyond Headroom (see the package
	// documentation); zero means no bound.
	Memory uint64
	// Timeout bounds the child's wall-clock and CPU time; zero means none
	// beyond ctx.
	Timeout time.Duration
}

// Result is what a child did.
type Result struct {
	// Output is what the job wrote.
	Output []byte
	// Stderr is the start of what the child wrote to its stderr (at most
	// MaxStderr bytes).
	Stderr string
	// MaxRSS is the child's peak resident memory in bytes.
	MaxRSS uint64
	// Wall is how long the child ran.
	Wall time.Duration
}

// Job is the work a child does: it reads its request and writes its output
// to out. Its error is reported to the parent through the child's stderr.
type Job func(req []byte, out *bytes.Buffer) error

var (
	jobsMu sync.Mutex
	jobs   = map[string]Job{}
)

func lookup(name string) Job {
	jobsMu.Lock()
	defer jobsMu.Unlock()
	return jobs[name]
}

// started counts the children started, for tests.
var started atomic.Uint64

// Started returns how many children Run has started in this process.
func Started() uint64 { return started.Load() }

var (
	hookMu sync.Mutex
	hook   func(job string, pid int)
)

// OnStart makes f be called with each child's job and process id once it
// has started, until undo is called. Tests only.
func OnStart(f func(job string, pid int)) (undo func()) {
	hookMu.Lock()
	prev := hook
	hook = f
	hookMu.Unlock()
	return func() {
		hookMu.Lock()
		hook = prev
		hookMu.Unlock()
	}
}

func notifyStart(job string, pid int) {
	started.Add(1)
	hookMu.Lock()
	f := hook
	hookMu.Unlock()
	if f != nil {
		f(job, pid)
	}
}

// Pack encodes a job's request: a header (any bytes, JSON for instance)
// and a body.
func Pack(header, body []byte) []byte {
	out := binary.AppendUvarint(nil, uint64(len(header)))
	out = append(out, header...)
	return append(out, body...)
}

// Unpack splits a request Pack encoded.
func Unpack(req []byte) (header, body []byte, err error) {
	n, k := binary.Uvarint(req)
	if k <= 0 || n > uint64(len(req)-k) {
		return nil, nil, errors.New("isolate: malformed request")
	}
	return req[k : k+int(n)], req[k+int(n):], nil
}

// errorf is how a job's failure reads in the parent.
func errorf(job string, format string, args ...any) error {
	return fmt.Errorf("isolate: %s: "+format, append([]any{job}, args...)...)
}
