package kernel

import (
	"context"
	"fmt"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
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
