package kernel

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/sandbox"
)

// fakeMemory is a bounds-checked linear memory for host-call tests. It
// follows wazero's api.Memory semantics.
type fakeMemory struct{ b []byte }

func (m *fakeMemory) Size() uint32 { return uint32(len(m.b)) }
func (m *fakeMemory) Read(off, n uint32) ([]byte, bool) {
	if uint64(off)+uint64(n) > uint64(len(m.b)) {
		return nil, false
	}
	return m.b[off : off+n : off+n], true
}
func (m *fakeMemory) Write(off uint32, v []byte) bool {
	if uint64(off)+uint64(len(v)) > uint64(len(m.b)) {
		return false
	}
	copy(m.b[off:], v)
	return true
}
func (m *fakeMemory) ReadUint32Le(off uint32) (uint32, bool) {
	b, ok := m.Read(off, 4)
	if !ok {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b), true
}
func (m *fakeMemory) WriteUint32Le(off, v uint32) bool {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return m.Write(off, b[:])
}

type nopKind struct{}

func (nopKind) Name() string { return "nop" }
func (nopKind) Info() Info   { return Info{Ops: []string{"noop", "echo"}} }
func (nopKind) Grant(GrantContext, []byte) (Scope, error) {
	return nopScope{}, nil
}
func (nopKind) Narrow(Scope, []byte) (Scope, error) { return nopScope{}, nil }
func (nopKind) Describe(Scope) Description          { return Description{} }
func (nopKind) Prepare(c *Call) (Op, error) {
	if c.Op == "echo" {
		args := c.Args
		return Op{Effect: func(context.Context) (*Result, error) { return &Result{Data: args}, nil }}, nil
	}
	return Op{NoResult: true}, nil
}

type nopScope struct{}

func (nopScope) MarshalJSON() ([]byte, error) { return []byte(`{}`), nil }
func (nopScope) Contains(Scope) bool          { return true }

type nullEngine struct{}

func (nullEngine) Name() string                                            { return "null" }
func (nullEngine) Host(string, []sandbox.HostFunc) error                   { return nil }
func (nullEngine) Compile(context.Context, []byte) (sandbox.Module, error) { return nil, nil }
func (nullEngine) Close(context.Context) error                             { return nil }

// newBareTask makes a task that is never run, with one nop capability
// named "c", a blob and an input, for driving host calls directly.
func newBareTask(t testing.TB) (*Kernel, *Task) {
	t.Helper()
	k, err := New(Config{Engine: nullEngine{}, Kinds: []Kind{nopKind{}}})
	if err != nil {
		t.Fatal(err)
	}
	task := &Task{
		k: k, id: "t1", principal: "p", module: "m",
		table: NewCapTable(16), names: map[string]*Cap{},
		logger: hclog.NewNullLogger(), input: NewBlob([]byte("input"), Label{}),
		state: TaskRunning, done: make(chan struct{}),
	}
	task.resolveBlob = task.table.GetBlob
	c, _ := k.newCap(k.kinds["nop"], nopScope{}, "c", nil, task, false, Constraints{})
	task.table.InsertCap(c)
	task.names["c"] = c
	task.table.InsertBlob(NewBlob([]byte("blob"), NewLabel([]string{"pii:x"}, nil)))
	return k, task
}

func TestHostCallsBounds(t *testing.T) {
	k, task := newBareTask(t)
	ctx := withTask(context.Background(), task)
	fns := map[string]sandbox.HostFunc{}
	for _, f := range k.hostFuncs() {
		fns[f.Name] = f
	}
	mem := &fakeMemory{b: make([]byte, 1<<16)}
	copy(mem.b[100:], "c")
	copy(mem.b[200:], "noop")
	call := func(name string, args ...uint64) abi.Errno {
		stack := make([]uint64, 8)
		copy(stack, args)
		fns[name].Fn(ctx, mem, stack)
		return abi.Errno(stack[0])
	}
	h := uint64(abi.MakeHandle(0, 1))
	for _, tc := range []struct {
		name string
		call string
		args []uint64
		want abi.Errno
	}{
		{"lookup ok", abi.CapLookupName, []uint64{100, 1, 0}, abi.ESUCCESS},
		{"lookup unknown", abi.CapLookupName, []uint64{200, 4, 0}, abi.ENOTFOUND},
		{"lookup name past memory", abi.CapLookupName, []uint64{1<<16 - 1, 2, 0}, abi.EFAULT},
		{"lookup name too long", abi.CapLookupName, []uint64{0, abi.MaxNameLen + 1, 0}, abi.ELIMIT},
		{"lookup out past memory", abi.CapLookupName, []uint64{100, 1, 1<<16 - 3}, abi.EFAULT},
		{"call ok", abi.CapCallName, []uint64{h, 200, 4, 0, 0, 0}, abi.ESUCCESS},
		{"call invented handle", abi.CapCallName, []uint64{0x7777, 200, 4, 0, 0, 0}, abi.EBADHANDLE},
		{"call on blob", abi.CapCallName, []uint64{uint64(abi.MakeHandle(1, 1)), 200, 4, 0, 0, 0}, abi.EWRONGTYPE},
		{"call unknown op", abi.CapCallName, []uint64{h, 100, 1, 0, 0, 0}, abi.ENOTSUP},
		{"call op overflow", abi.CapCallName, []uint64{h, 0xfffffff0, 0x20, 0, 0, 0}, abi.EFAULT},
		{"call op too long", abi.CapCallName, []uint64{h, 0, abi.MaxOpLen + 1, 0, 0, 0}, abi.EINVAL},
		{"call args wrap around", abi.CapCallName, []uint64{h, 200, 4, 0xffffffff, 0xffffffff, 0}, abi.ELIMIT},
		{"call args past memory", abi.CapCallName, []uint64{h, 200, 4, 1<<16 - 10, 100, 0}, abi.EFAULT},
		{"call out past memory", abi.CapCallName, []uint64{h, 200, 4, 0, 0, 0xfffffffe}, abi.EFAULT},
		{"blob_len ok", abi.BlobLenName, []uint64{uint64(abi.MakeHandle(1, 1)), 0}, abi.ESUCCESS},
		{"blob_read buffer overflow", abi.BlobReadName, []uint64{uint64(abi.MakeHandle(1, 1)), 0, 0xffffff00, 0x1000, 0}, abi.EFAULT},
		{"blob_read offset past end", abi.BlobReadName, []uint64{uint64(abi.MakeHandle(1, 1)), 99, 0, 4, 8}, abi.EINVAL},
		{"blob_create huge", abi.BlobCreateName, []uint64{0, abi.MaxBlobLen + 1, 0}, abi.ELIMIT},
		{"blob_create past memory", abi.BlobCreateName, []uint64{0, 1<<16 + 1, 0}, abi.EFAULT},
		{"drop invented", abi.HandleDropName, []uint64{0xdead}, abi.EBADHANDLE},
		{"result invented", abi.TaskResultName, []uint64{0xdead}, abi.EBADHANDLE},
		{"last_error past memory", abi.LastErrorName, []uint64{0xffffffff, 10, 0}, abi.EFAULT},
		{"input ok", abi.TaskInputName, []uint64{0}, abi.ESUCCESS},
	} {
		if got := call(tc.call, tc.args...); got != tc.want {
			t.Errorf("%s: %s%v = %v, want %v", tc.name, tc.call, tc.args, got, tc.want)
		}
	}
	// Reading the pii blob raised the task's label.
	if call(abi.BlobReadName, uint64(abi.MakeHandle(1, 1)), 0, 0, 4, 8) != abi.ESUCCESS {
		t.Fatal("blob_read failed")
	}
	if got := task.Label().Conf(); len(got) != 1 || got[0] != "pii:x" {
		t.Fatalf("label after read = %v, want [pii:x]", got)
	}
	// last_error reports the reason of the last failure.
	if call(abi.HandleDropName, 0xdead) != abi.EBADHANDLE {
		t.Fatal("drop")
	}
	if call(abi.LastErrorName, 1000, 200, 996) != abi.ESUCCESS {
		t.Fatal("last_error")
	}
	n, _ := mem.ReadUint32Le(996)
	if msg := string(mem.b[1000 : 1000+n]); msg == "" {
		t.Fatal("last_error returned nothing")
	}
}

// FuzzHostCalls drives every host call with arbitrary parameters against a
// small memory: whatever the guest passes, the result is an errno and the
// kernel does not panic (guard would turn a panic into EINTERNAL, which the
// fuzzer reports as a failure).
func FuzzHostCalls(f *testing.F) {
	f.Add(uint8(1), uint32(1<<12|0), uint32(200), uint32(4), uint32(0), uint32(0), uint32(0))
	f.Add(uint8(8), uint32(1<<12|1), uint32(0), uint32(0), uint32(64), uint32(100), uint32(0))
	f.Add(uint8(6), uint32(0), uint32(0xffffffff), uint32(0xffffffff), uint32(0), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, which uint8, a, b, c, d, e, g uint32) {
		k, task := newBareTask(t)
		ctx := withTask(context.Background(), task)
		fns := k.hostFuncs()
		fn := fns[int(which)%len(fns)]
		mem := &fakeMemory{b: make([]byte, 4096)}
		copy(mem.b[200:], "noop")
		copy(mem.b[300:], `{"method":"GET"}`)
		stack := []uint64{uint64(a), uint64(b), uint64(c), uint64(d), uint64(e), uint64(g)}
		fn.Fn(ctx, mem, stack)
		if errno := abi.Errno(stack[0]); errno == abi.EINTERNAL || strings.HasPrefix(errno.String(), "Errno(") { // a panic, or no documented errno
			t.Fatalf("%s%v = %v", fn.Name, stack, errno)
		}
	})
}
