//go:build wasmtime

package wasmtime

// runStack is the goroutine stack a run grows to before it instantiates
// anything (growStack).
//
// A host call runs on the goroutine that called into wasmtime (a cgo
// callback), below the frames of Run, wasmtime-go and the cgo crossing:
// the kernel's capability call and its JSON take a fresh goroutine's 8 KiB
// stack past its end, and each growth copies the whole stack, then as deep
// as it gets, frame by frame. A kernel task is a new goroutine, so every
// task paid that again: 12% of a Go reactor task's CPU time went to
// runtime.newstack. Grown once at the top of Run, where the stack is
// shallow, the copy is a few frames and the host calls then fit: 3.5%
// (perf, 3,000 tasks of BenchmarkLifecycle's go-reactor). 16 KiB of frame
// takes the stack to 32 KiB; 32 or 64 KiB bought nothing more.
const runStack = 16 << 10

// growStack makes the calling goroutine's stack hold runStack more bytes
// than it uses now.
//
//go:noinline
func growStack() {
	var pad [runStack]byte
	touch(pad[:])
}

// touch writes b's last byte, so that the compiler keeps the array.
//
//go:noinline
func touch(b []byte) { b[len(b)-1] = 0 }
