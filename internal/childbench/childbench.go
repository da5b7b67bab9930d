// Package childbench measures what a Go child spawned through the ABI costs
// a whole "mandate run" (issue 31), as a black box: BenchmarkChild builds
// the CLI (with the engine under test: go test -tags wasmtime for
// wasmtime), builds testdata/guests/spawn-bench twice, once with "mandate
// build" and once with a plain "GOOS=wasip1 GOARCH=wasm go build", and runs
// each as a root that spawns N children of its own module, one after
// another. The process's CPU time (user and system, from its rusage) at
// N = Children less that at N = 0, the two runs interleaved, divided by
// Children is the CPU of one child: its task, its module's instance, its
// start, its run and its end, and the kernel's work for it.
//
//	go test ./internal/childbench -run '^$' -bench Child -benchtime 3x
//	go test -tags wasmtime ./internal/childbench -run '^$' -bench Child -benchtime 3x
//
// BenchmarkRunFolder is the other cost of a Go guest named by its folder
// (issue 31: 45 ms more than its .wasm): a warm "mandate run" of a
// manifest naming testdata/guests/main-entry's folder against one naming
// its .wasm, interleaved.
//
//	go test ./internal/childbench -run '^$' -bench RunFolder -benchtime 10x
//
// The package has no code but this; the benchmark builds and runs
// processes, so it is never part of the normal test suite's time.
package childbench

// Children is how many children a measured run spawns.
const Children = 300
