package kernel

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
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

func (nopKind) Name() string       { return "nop" }
func (nopKind) Info() kindapi.Info { return kindapi.Info{Ops: []string{"noop", "echo"}} }
func (nopKind) Grant(kindapi.GrantContext, []byte) (kindapi.Scope, error) {
	return nopScope{}, nil
}
func (nopKind) Narrow(kindapi.Scope, []byte) (kindapi.Scope, error) { return nopScope{}, nil }
func (nopKind) Describe(kindapi.Scope) kindapi.Description          { return kindapi.Description{} }
func (nopKind) Prepare(c *kindapi.Call) (kindapi.Op, error) {
	if c.Op == "echo" {
		args := c.Args
		return kindapi.Op{Effect: func(context.Context) (*kindapi.Result, error) { return &kindapi.Result{Data: args}, nil }}, nil
	}
	return kindapi.Op{NoResult: true}, nil
}

type nopScope struct{}

func (nopScope) MarshalJSON() ([]byte, error) { return []byte(`{}`), nil }
func (nopScope) Contains(kindapi.Scope) bool  { return true }

type nullEngine struct{}

func (nullEngine) Name() string                                            { return "null" }
func (nullEngine) Host(string, []sandbox.HostFunc) error                   { return nil }
func (nullEngine) Compile(context.Context, []byte) (sandbox.Module, error) { return nil, nil }
func (nullEngine) CompileWith(context.Context, []byte, sandbox.CompileConfig) (sandbox.Module, error) {
	return nil, nil
}
func (nullEngine) Close(context.Context) error { return nil }

// newBareTask makes a task that is never run, with one nop capability
// named "c", a blob and an input, for driving host calls directly.
func newBareTask(t testing.TB) (*Kernel, *Task) {
	t.Helper()
	k, err := New(Config{Engine: nullEngine{}, Kinds: []kindapi.Kind{nopKind{}}})
	if err != nil {
		t.Fatal(err)
	}
	task := &Task{
		k: k, id: "t1", principal: "p", module: "m",
		table: NewCapTable(16), names: map[string]*Cap{},
		logger: hclog.NewNullLogger(), input: kindapi.NewBlob([]byte("input"), kindapi.Label{}),
		state: TaskRunning, done: make(chan struct{}),
	}
	task.resolveBlob = task.table.GetBlob
	c, _ := k.newCap(k.kinds["nop"], nopScope{}, "c", nil, task, false, Constraints{})
	task.table.InsertCap(c)
	task.names["c"] = c
	task.table.InsertBlob(kindapi.NewBlob([]byte("blob"), kindapi.NewLabel([]string{"pii:x"}, nil)))
	return k, task
}

func TestHostCallsBounds(t *testing.T) {
	k, task := newBareTask(t)
	fns := map[string]sandbox.HostFunc{}
	for _, f := range k.hostFuncs() {
		fns[f.Name] = f
	}
	mem := &fakeMemory{b: make([]byte, 1<<16)}
	copy(mem.b[100:], "c")
	copy(mem.b[200:], "noop")
	call := func(name string, args ...uint64) abi.Errno {
		return callDeclared(t, task, fns[name], mem, args...)
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
// small memory: whatever the guest passes, the result is ESUCCESS or an
// errno the call declares, the kernel does not panic (guard would turn a
// panic into EINTERNAL, which the fuzzer reports as a failure), and it
// touches only the guest memory the call's parameters declare.
func FuzzHostCalls(f *testing.F) {
	f.Add(uint8(1), uint32(1<<12), uint32(200), uint32(4), uint32(0), uint32(0), uint32(0))
	f.Add(uint8(8), uint32(1<<12|1), uint32(0), uint32(0), uint32(64), uint32(100), uint32(0))
	f.Add(uint8(6), uint32(0), uint32(0xffffffff), uint32(0xffffffff), uint32(0), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, which uint8, a, b, c, d, e, g uint32) {
		k, task := newBareTask(t)
		fns := k.hostFuncs()
		fn := fns[int(which)%len(fns)]
		mem := &fakeMemory{b: make([]byte, 4096)}
		copy(mem.b[200:], "noop")
		copy(mem.b[300:], `{"method":"GET"}`)
		callDeclared(t, task, fn, mem, uint64(a), uint64(b), uint64(c), uint64(d), uint64(e), uint64(g))
	})
}

// declaredOf returns the declaration of the host call name.
func declaredOf(t testing.TB, name string) HostCall {
	t.Helper()
	for _, hc := range HostCalls() {
		if hc.Name == name {
			return hc
		}
	}
	t.Fatalf("no declaration of %s", name)
	return HostCall{}
}

// callDeclared calls fn with params (as many as it takes) through a
// memory that fails the test on any access outside what fn's declaration
// lets it touch, and fails it on an errno the declaration does not list.
func callDeclared(t testing.TB, task *Task, fn sandbox.HostFunc, mem *fakeMemory, params ...uint64) abi.Errno {
	t.Helper()
	hc := declaredOf(t, fn.Name)
	stack := make([]uint64, max(1, len(hc.Params)))
	copy(stack, params)
	m := &declaredMemory{t: t, mem: mem, hc: hc, p: append([]uint64(nil), stack...)}
	fn.Fn(withTask(context.Background(), task), m, stack)
	errno := abi.Errno(stack[0])
	if errno != abi.ESUCCESS && !slices.ContainsFunc(hc.Errnos, func(c ErrnoCase) bool { return c.Errno == errno }) {
		t.Errorf("%s%v = %v, which its declaration does not list", fn.Name, params[:len(hc.Params)], errno)
	}
	return errno
}

// declaredMemory is a guest memory that checks each access of a host
// call against its declaration: reads only within its In and Buf
// parameters (a Buf's view is what the call fills), writes only within
// its Buf and Out parameters, each within its limit or size. What the
// kernel reads outside them would not reach it from a guest elsewhere
// (sandbox/forward ships only what the declaration says).
type declaredMemory struct {
	t   testing.TB
	mem *fakeMemory
	hc  HostCall
	p   []uint64
}

func (m *declaredMemory) within(op string, off, n uint32, kinds ...sandbox.ParamKind) {
	for i, prm := range m.hc.Params {
		if !slices.Contains(kinds, prm.Kind) {
			continue
		}
		start, size := uint64(uint32(m.p[i])), uint64(prm.Size) // i32s: the upper bits are not the guest's
		if prm.Kind == sandbox.In || prm.Kind == sandbox.Buf {
			size = min(uint64(uint32(m.p[i+1])), uint64(prm.Limit))
		}
		if uint64(off) >= start && uint64(off)+uint64(n) <= start+size {
			return
		}
	}
	m.t.Errorf("%s%v: %s of %d bytes at %d, outside what it declares %v", m.hc.Name, m.p, op, n, off, m.hc.Params)
}

func (m *declaredMemory) Size() uint32 { return m.mem.Size() }
func (m *declaredMemory) Read(off, n uint32) ([]byte, bool) {
	m.within("read", off, n, sandbox.In, sandbox.Buf)
	return m.mem.Read(off, n)
}
func (m *declaredMemory) Write(off uint32, v []byte) bool {
	m.within("write", off, uint32(len(v)), sandbox.Buf, sandbox.Out)
	return m.mem.Write(off, v)
}
func (m *declaredMemory) ReadUint32Le(off uint32) (uint32, bool) {
	m.within("read", off, 4, sandbox.In)
	return m.mem.ReadUint32Le(off)
}
func (m *declaredMemory) WriteUint32Le(off, v uint32) bool {
	m.within("write", off, 4, sandbox.Out, sandbox.Buf)
	return m.mem.WriteUint32Le(off, v)
}

// TestHostCallsDeclared calls every host call with parameters made from
// its declaration (each handle one of the task's capability, its blob,
// its input blob or an invented one; each in pointer at a name, an op or
// a JSON document; each buffer and out pointer in memory), checking each
// touches only the memory it declares and returns only errnos it lists.
func TestHostCallsDeclared(t *testing.T) {
	handles := []uint64{uint64(abi.MakeHandle(0, 1)), uint64(abi.MakeHandle(1, 1)), 0xdead}
	ins := [][2]uint64{{100, 1}, {200, 4}, {300, 16}, {0, 0}, {4000, 200}, {0, abi.MaxBlobLen + 1}}
	for _, hc := range HostCalls() {
		t.Run(hc.Name, func(t *testing.T) {
			calls := [][]uint64{{}}
			for _, prm := range hc.Params {
				var choices [][]uint64 // values of this parameter (and, for a pointer, its length)
				switch prm.Kind {
				case sandbox.Handle:
					for _, h := range handles {
						choices = append(choices, []uint64{h})
					}
				case sandbox.In:
					for _, in := range ins {
						choices = append(choices, in[:])
					}
				case sandbox.Buf:
					choices = [][]uint64{{1000, 64}, {1000, 0}, {1000, 2}, {4090, 64}}
				case sandbox.Out:
					choices = [][]uint64{{2000}, {4094}}
				case sandbox.Value:
					choices = [][]uint64{{0}, {2}, {99}}
				case sandbox.Len:
					continue // chosen with its pointer
				}
				var next [][]uint64
				for _, c := range calls {
					for _, v := range choices {
						next = append(next, append(slices.Clone(c), v...))
					}
				}
				calls = next
			}
			for _, p := range calls {
				k, task := newBareTask(t)
				mem := &fakeMemory{b: make([]byte, 4096)}
				copy(mem.b[100:], "c")
				copy(mem.b[200:], "noop")
				copy(mem.b[300:], `{"method":"GET"}`)
				var fn sandbox.HostFunc
				for _, f := range k.hostFuncs() {
					if f.Name == hc.Name {
						fn = f
					}
				}
				callDeclared(t, task, fn, mem, p...)
			}
		})
	}
}
