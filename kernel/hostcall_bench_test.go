package kernel

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/cputime"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// BenchmarkBlobRead measures the blob_read host function alone, against a
// local memory (a view of guest memory, as wazero's and wasmtime's are):
// bounds checks, the handle, the label, and the copy into the guest's
// buffer, for blobs of 64 B, 4 KiB and 1 MiB read whole.
func BenchmarkBlobRead(b *testing.B) {
	for _, size := range []int{64, 4 << 10, 1 << 20} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			k, task := newBareTask(b)
			h, err := task.table.InsertBlob(kindapi.NewBlob(make([]byte, size), kindapi.Label{}))
			if err != nil {
				b.Fatal(err)
			}
			var read sandbox.HostFunc
			for _, f := range k.hostFuncs() {
				if f.Name == abi.BlobReadName {
					read = f
				}
			}
			ctx := withTask(context.Background(), task)
			mem := &fakeMemory{b: make([]byte, size+64)}
			stack := make([]uint64, 5)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				stack[0], stack[1], stack[2], stack[3], stack[4] = uint64(h), 0, 64, uint64(size), 0
				read.Fn(ctx, mem, stack)
				if stack[0] != uint64(abi.ESUCCESS) {
					b.Fatalf("blob_read: %v", abi.Errno(stack[0]))
				}
			}
		})
	}
}

// BenchmarkHostCapCall measures the kernel's own share of a capability
// call: the cap_call host function alone, as an engine calls it (the task
// found in the call's context, under a deadline as a run has one), against
// a local memory, on a no-op operation of a kind whose Prepare does
// nothing: bounds checks, the handle, revocation, the operation's name,
// the Call, the pipeline, the errno. No engine, no guest.
func BenchmarkHostCapCall(b *testing.B) {
	k, task := newBareTask(b)
	var call sandbox.HostFunc
	for _, f := range k.hostFuncs() {
		if f.Name == abi.CapCallName {
			call = f
		}
	}
	h, err := task.Lookup(context.Background(), "c")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	ctx = withTask(ctx, task)
	mem := &fakeMemory{b: make([]byte, 1<<10)}
	copy(mem.b[100:], "noop")
	stack := make([]uint64, 6)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Process()
	for range b.N {
		stack[0], stack[1], stack[2], stack[3], stack[4], stack[5] = uint64(h), 100, 4, 0, 0, 200
		call.Fn(ctx, mem, stack)
		if stack[0] != uint64(abi.ESUCCESS) {
			b.Fatalf("cap_call: %v", abi.Errno(stack[0]))
		}
	}
	b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
}
