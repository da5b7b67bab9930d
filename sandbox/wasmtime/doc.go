// Package wasmtime is Mandate's second sandbox engine, built on wasmtime
// (github.com/bytecodealliance/wasmtime-go, cgo) and compiled only with the
// build tag "wasmtime": go build -tags wasmtime ./cmd/mandate. It implements
// sandbox.Engine and sandbox.Module with the same observable behaviour as
// sandbox/wazero; both pass the conformance suite in sandbox/sandboxtest.
//
//	eng, err := wasmtime.New(ctx, sandbox.Config{CacheDir: dir})
//	if err != nil {
//		return err
//	}
//	defer eng.Close(ctx)
//	if err := eng.Host("mandate", hostFuncs); err != nil { // before any Compile
//		return err
//	}
//	mod, err := eng.Compile(ctx, wasm) // refuses unknown imports
//	if err != nil {
//		return err
//	}
//	defer mod.Close(ctx)
//	err = mod.Run(ctx, sandbox.RunConfig{
//		Name:        "task-1",
//		MemoryLimit: 64 << 20,
//		Timeout:     time.Second,
//		Stdout:      &out,
//	})
//
// # What a guest gets
//
// Each Run is a fresh store and instance with nothing ambient (its memory
// from a pool, reset between tasks: see Instances). The engine
// implements WASI preview1 itself (wasi.go) instead of using wasmtime's:
// stdout and stderr go to the RunConfig writers, stdin is empty, argv is just
// RunConfig.Name, the environment is empty, there are no preopened
// directories and no sockets; clocks are real, random_get is crypto/rand,
// and a sleep in poll_oneoff ends when the run is stopped. Every other WASI
// function fails with an errno. Host functions registered with Host get the
// context given to Run and a bounds-checked view of the caller's exported
// memory; a panic in one is recovered and traps that task only.
//
// # Stopping
//
// Guests are stopped with wasmtime's epoch interruption: compiled code
// checks the engine's epoch at function entries and loop headers. Each
// store's deadline is the next epoch, with a callback (interrupt.go) that
// ends the run when its stop flag is set and otherwise moves the deadline
// on. When a run's Timeout passes, or its context is done, its flag is set
// and the epoch incremented, so a guest spinning in "for {}" stops at its
// next loop header, and the other runs of the engine go on. No ticker runs:
// the epoch moves only when a run is stopped. A guest sleeping in
// poll_oneoff is woken. BenchmarkComputeDeadline compares this with no check
// and with fuel metering on a compute-bound guest: epochs cost nothing
// measurable, fuel about 20% (BENCHMARKS.md); and wasmtime-go can not stop a
// run on time with fuel, which bounds instructions, not time.
//
// # Limits
//
// Each store has wasmtime's limiter: linear memory up to
// RunConfig.MemoryLimit (4 GiB when zero); past it memory.grow returns -1,
// the Go runtime dies with "out of memory", and Run reports an *ExitError
// wrapping sandbox.ErrMemoryLimit. wasmtime's limiter does not say that it
// refused a growth, so the refused instruction says it: before compiling,
// every memory.grow of the module is replaced by a call of one function
// added to it (wasmbin.TrackGrowth), which grows the memory and, when the
// growth fails, records the size it asked for in a global the module
// exports under a reserved name (and no guest code can write). After the
// run, a recorded size past the limit is ErrMemoryLimit: a guest refused
// one huge growth far below the limit is reported, and a guest that only
// prints "out of memory" and exits, or whose growth failed for another
// reason (its own declared maximum), is not. A module the rewrite leaves
// alone (a 64-bit memory, several memories, no memory.grow) is run as it
// is and never reported as out of memory; a module whose code the rewrite
// can not decode (an instruction of a proposal the engine does not enable)
// is refused. As in sandbox/wazero, only a limit below 4 GiB is reported.
// A table may hold up to max(its initial size, MaxTableElements) elements:
// the module's tables are given that maximum before compiling, and the
// limiter enforces it again. A store holds one instance, one memory and
// the module's own tables.
//
// # Instances
//
// An engine takes its instances' memories and tables from wasmtime's
// pooling allocator (pool.go): PoolInstances slots (the kernel's default
// bound on tasks at once), each a 4 GiB memory reservation with its guard
// and table room for any module Compile accepts, reserved when the engine
// is made. A task gets a slot for its store's life; when the store is
// closed wasmtime resets the slot before any other instance can have it:
// every page the task touched is dropped (madvise), the module's initial
// image is mapped again copy-on-write, the memory is made inaccessible past
// the module's initial size and the tables are zeroed. The next task finds
// the memory as a fresh instance would (TestPoolSlotReset: a task that
// fills its memory with a secret, grown pages and data segment included,
// and the next task of the module, given the same slot, that finds it
// nowhere). What the pool saves against mapping a memory for each task is
// the mapping and unmapping of its 4 GiB reservation and of its tables,
// and of its image: about 10-20% of a Go reactor's task on wasmtime. Pages
// are not kept resident between tasks: wasmtime would reset them with
// memset, every page of them, touched or not.
//
// A Run past PoolInstances runs at once fails with ErrPoolFull (it does not
// wait: a parent task waiting for a slot its children hold would never
// get it). Where the pool's address space can not be reserved (RLIMIT_AS,
// or other engines holding it), New falls back to the on-demand allocator
// instead of letting wasmtime abort the process; AllocatorEnv=ondemand
// ("MANDATE_WASMTIME_ALLOCATOR") chooses it, a fresh mapping per instance
// and no bound but the kernel's. Pooling reports which an engine uses.
//
// The pool's one new risk is a kernel bug: a host function that kept the
// slice of guest memory a call gave it (sandbox.Memory.Read) past the call
// would, with the pool, read and write the memory of whichever task has the
// slot next, where with a fresh mapping per task it would fault once the
// task is gone. The engine clears its own view after every host call; the
// kernel must not keep one.
//
// # Modules and the cache
//
// Compile refuses a module that imports anything but functions of the
// registered host modules and of wasi_snapshot_preview1 (with the right
// signatures), or that defines no memory. A module exporting _start is a
// Command; any other is a Reactor, entered by _initialize when exported and
// then by RunConfig.Entry. The data segments of a Go module are merged
// before compiling, as in sandbox/wazero, and its memory.grow instructions
// rewritten (see Limits); a module exporting the reserved name
// wasmbin.GrowthExport ("mandate$grow_refused") is refused.
//
// With Config.CacheDir set, compiled modules are kept on disk (cache.go)
// in a directory named for the wasmtime-go version, GOOS/GOARCH and the
// engine's settings, one file per module digest, written atomically and
// checked with a CRC-32C before wasmtime loads it; a damaged or stale file
// is ignored and the module compiled again. The module's static counts are
// kept beside it, so a compile checks its limits without reading the
// module again. The cache holds native code: keep the directory as private
// as the binary.
//
// # Compiling
//
// Cranelift's time and memory are not bounded by a module's size (50,000
// nested loops or 10^6 functions hold a core for minutes; a function of
// 10^6 values live at once takes a gigabyte), so on Linux a module that is
// not in the cache is compiled in a child process
// (sandbox/internal/isolate): the current executable started again, which
// bounds its own address space, CPU time and Go heap from
// CompileConfig.MemoryLimit and Timeout, and is killed when ctx is done or
// the timeout passes. A compile past them fails with ErrTimeout or
// ErrMemoryLimit (wrapped), a canceled one with ErrCanceled, and what the
// compiler allocated never lives in this process. The child builds a
// wasmtime engine with the engine's settings (wasmtimeConfig, without the
// pool, which changes no code), compiles the prepared bytes,
// serializes the module and stores it in the disk cache as the engine
// would; the engine loads it from there. Without Config.CacheDir the child
// hands the serialized module over on its output. A cache hit starts no
// child. On other systems modules are compiled in process, bounded by
// nothing but ctx.
package wasmtime
