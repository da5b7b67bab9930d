//go:build linux

package isolate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mandatevm/mandate/sandbox"
)

// Supported reports whether Run starts a child process (Linux) rather than
// running the job in the calling process.
const Supported = true

// Exit codes of a child.
const (
	exitFailed = 1  // the job returned an error (on stderr)
	exitCPU    = 75 // SIGXCPU: the CPU-time limit
	exitSetup  = 76 // the child could not read its request or bound itself
)

// Register records job under name. When this process is a child started
// for name, it runs the job and exits instead of returning: call Register
// from an init function.
func Register(name string, job Job) {
	jobsMu.Lock()
	if _, dup := jobs[name]; dup {
		jobsMu.Unlock()
		panic("isolate: job " + name + " registered twice")
	}
	jobs[name] = job
	jobsMu.Unlock()
	if os.Getenv(EnvVar) == name {
		os.Exit(child(job))
	}
}

// child is the whole life of a child process: bound itself, read the
// request, run the job, write its output. It returns the exit code.
func child(job Job) int {
	in := bufio.NewReader(os.Stdin)
	var hdr [16]byte
	if _, err := io.ReadFull(in, hdr[:]); err != nil {
		fmt.Fprintf(os.Stderr, "isolate: reading the request: %v\n", err)
		return exitSetup
	}
	start, err := vmSize()
	if err != nil {
		fmt.Fprintf(os.Stderr, "isolate: %v\n", err)
		return exitSetup
	}
	mem := binary.LittleEndian.Uint64(hdr[:8])
	timeout := time.Duration(binary.LittleEndian.Uint64(hdr[8:]))
	if err := bound(start, mem, timeout); err != nil {
		fmt.Fprintf(os.Stderr, "isolate: bounding the child: %v\n", err)
		return exitSetup
	}
	req, err := io.ReadAll(in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "isolate: reading the request: %v\n", err)
		return exitSetup
	}
	var out bytes.Buffer
	err = job(req, &out)
	if os.Getenv(MeasureVar) != "" {
		peak, _ := procStatus("VmPeak")
		hwm, _ := procStatus("VmHWM")
		fmt.Fprintf(os.Stderr, "isolate: VmSize at start %d, VmPeak %d, VmHWM %d\n", start, peak, hwm)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitFailed
	}
	if _, err := os.Stdout.Write(out.Bytes()); err != nil {
		return exitFailed
	}
	return 0
}

// bound applies the limits to the calling process (see the package
// documentation).
func bound(vm, mem uint64, timeout time.Duration) error {
	if mem > 0 {
		// A backstop: the parent bounds the resident size (watchRSS).
		// Address space is not memory: glibc's arenas and the runtimes'
		// reservations map far more than they touch (a wasmtime compile
		// of 252 MiB resident mapped past start + Headroom + 1 GiB), so
		// the bound on it is twice the resident one.
		as := vm + 2*(Headroom+mem)
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as}); err != nil {
			return fmt.Errorf("RLIMIT_AS: %w", err)
		}
		debug.SetMemoryLimit(int64(min(mem+Headroom/2, 1<<62)))
	}
	if timeout > 0 {
		secs := cpuSeconds(timeout)
		xcpu := make(chan os.Signal, 1)
		signal.Notify(xcpu, syscall.SIGXCPU)
		go func() {
			<-xcpu
			fmt.Fprintf(os.Stderr, "isolate: CPU time limit (%d s)\n", secs)
			os.Exit(exitCPU)
		}()
		if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: secs, Max: secs + 1}); err != nil {
			return fmt.Errorf("RLIMIT_CPU: %w", err)
		}
	}
	return nil
}

// cpuSeconds is the CPU-time limit for a timeout: whole seconds, at least 1.
func cpuSeconds(d time.Duration) uint64 {
	return uint64(max((d+time.Second-1)/time.Second, 1))
}

// vmSize is the process's current virtual size (VmSize), in bytes.
func vmSize() (uint64, error) {
	return procStatus("VmSize")
}

// procStatus reads a field of /proc/self/status given in kB, in bytes.
func procStatus(field string) (uint64, error) { return procStatusOf("self", field) }

// procStatusOf is procStatus of process pid ("self" for this one).
func procStatusOf(pid, field string) (uint64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		v, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%s/status %s: %w", pid, field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/%s/status: no %s", pid, field)
}

// rssPoll is how often the parent reads a child's resident size.
const rssPoll = 10 * time.Millisecond

// watchRSS reports on over (once) when the resident size of process pid
// passes limit, until stop is closed.
func watchRSS(pid int, limit uint64, over chan<- uint64, stop <-chan struct{}) {
	t := time.NewTicker(rssPoll)
	defer t.Stop()
	p := strconv.Itoa(pid)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		rss, err := procStatusOf(p, "VmRSS")
		if err != nil {
			return // the child has ended
		}
		if rss > limit {
			over <- rss
			return
		}
	}
}

// Run runs the job registered as job in a child process bounded by lim, with
// req as its request, and returns its output (see the package
// documentation for the errors). The child is gone when Run returns.
func Run(ctx context.Context, job string, req []byte, lim Limits) (Result, error) {
	if lookup(job) == nil {
		return Result{}, fmt.Errorf("isolate: no job %q registered", job)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, ctxError(job, ctx)
	}
	exe, err := os.Executable()
	if err != nil {
		return Result{}, errorf(job, "finding the executable: %v", err)
	}
	env := make([]string, 0, len(os.Environ())+2)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvVar+"=") && !strings.HasPrefix(kv, "MALLOC_ARENA_MAX=") {
			env = append(env, kv)
		}
	}
	// glibc's malloc reserves an arena of 64 MiB of address space per
	// thread that allocates (wasmtime's compiler threads): under RLIMIT_AS
	// those reservations, not memory in use, ended a compile of 252 MiB
	// RSS at a 1 GiB limit. Two arenas are enough for a compile.
	env = append(env, "MALLOC_ARENA_MAX=2")
	var hdr [16]byte
	binary.LittleEndian.PutUint64(hdr[:8], lim.Memory)
	binary.LittleEndian.PutUint64(hdr[8:], uint64(max(lim.Timeout, 0)))
	var stdout bytes.Buffer
	stderr := &headBuffer{max: MaxStderr}
	cmd := &exec.Cmd{
		Path:   exe,
		Args:   []string{exe},
		Env:    append(env, EnvVar+"="+job),
		Stdin:  io.MultiReader(bytes.NewReader(hdr[:]), bytes.NewReader(req)),
		Stdout: &stdout,
		Stderr: stderr,
		// A group of its own, killed whole; and SIGKILL if the thread
		// that started it dies (it is locked below for the child's life).
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, errorf(job, "starting the child: %v", err)
	}
	pid := cmd.Process.Pid
	notifyStart(job, pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var timer <-chan time.Time
	if lim.Timeout > 0 {
		t := time.NewTimer(lim.Timeout)
		defer t.Stop()
		timer = t.C
	}
	// Memory is resident memory: the parent watches it, and the child's
	// address-space limit is only a backstop (see bound).
	over := make(chan uint64, 1)
	if lim.Memory > 0 {
		stop := make(chan struct{})
		defer close(stop)
		go watchRSS(pid, Headroom+lim.Memory, over, stop)
	}
	var killed error // why the parent killed the child
	select {
	case err = <-done:
	case <-ctx.Done():
		killed = ctxError(job, ctx)
	case <-timer:
		killed = fmt.Errorf("%w: %s ran past its timeout of %v", sandbox.ErrTimeout, job, lim.Timeout)
	case rss := <-over:
		killed = fmt.Errorf("%w: %s reached a resident size of %d MiB, past its limit of %d MiB (and %d MiB of headroom)",
			sandbox.ErrMemoryLimit, job, rss>>20, lim.Memory>>20, Headroom>>20)
	}
	if killed != nil {
		select {
		case err = <-done: // it ended on its own meanwhile
		default:
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			err = <-done
		}
	}
	res := Result{Output: stdout.Bytes(), Stderr: stderr.String(), Wall: time.Since(start)}
	ps := cmd.ProcessState
	var cpu time.Duration
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		res.MaxRSS = uint64(ru.Maxrss) << 10
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if err == nil {
		return res, nil
	}
	if killed != nil {
		return res, killed
	}
	return res, classify(job, lim, ps, cpu, res.MaxRSS, stderr.String(), err)
}

// classify turns a failed child into the error Run returns.
func classify(job string, lim Limits, ps *os.ProcessState, cpu time.Duration, maxRSS uint64, stderr string, err error) error {
	ws, _ := ps.Sys().(syscall.WaitStatus)
	msg := strings.TrimSpace(stderr)
	switch {
	case ws.Exited() && ws.ExitStatus() == exitCPU,
		ws.Signaled() && ws.Signal() == syscall.SIGXCPU,
		ws.Signaled() && ws.Signal() == syscall.SIGKILL && lim.Timeout > 0 && cpu >= time.Duration(cpuSeconds(lim.Timeout))*time.Second:
		return fmt.Errorf("%w: %s ran past its CPU time of %v (%v used)", sandbox.ErrTimeout, job, lim.Timeout, cpu.Round(time.Millisecond))
	case outOfMemory(msg):
		return fmt.Errorf("%w: %s ran out of memory under a limit of %d MiB (peak RSS %d MiB): %s", sandbox.ErrMemoryLimit, job, lim.Memory>>20, maxRSS>>20, firstLine(msg))
	case lim.Memory > 0 && maxRSS > lim.Memory:
		return fmt.Errorf("%w: %s failed with a peak RSS of %d MiB, past its limit of %d MiB (%v): %s", sandbox.ErrMemoryLimit, job, maxRSS>>20, lim.Memory>>20, err, firstLine(msg))
	}
	if msg == "" {
		return errorf(job, "%v", err)
	}
	return errorf(job, "%v: %s", err, msg)
}

// oomMarks are what a child out of address space says: the Go runtime
// ("runtime: out of memory", "fatal error: out of memory", a thread it
// could not create), a failed mmap in wazero ("cannot allocate memory"),
// a failed allocation in Rust ("memory allocation of N bytes failed").
var oomMarks = []string{
	"out of memory",
	"cannot allocate memory",
	"memory allocation of",
	"failed to create new os thread",
}

func outOfMemory(stderr string) bool {
	s := strings.ToLower(stderr)
	for _, m := range oomMarks {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func ctxError(job string, ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s stopped at the deadline: %w", sandbox.ErrTimeout, job, ctx.Err())
	}
	return fmt.Errorf("%w: %s: %w", sandbox.ErrCanceled, job, ctx.Err())
}

// headBuffer keeps the first max bytes written to it and drops the rest.
type headBuffer struct {
	max int
	buf bytes.Buffer
}

func (h *headBuffer) Write(p []byte) (int, error) {
	if room := h.max - h.buf.Len(); room > 0 {
		h.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (h *headBuffer) String() string { return h.buf.String() }
