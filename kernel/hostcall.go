package kernel

import (
	"context"
	"fmt"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/sandbox"
)

// Host functions of the "mandate" import module (guest-sdk/ABI.md). This
// file is the boundary where guest pointers become Go values: every range
// is checked against the guest's memory before it is read or written (a
// bad one is EFAULT), every length against its limit first (ELIMIT), and
// host errors become errnos in one place, ErrnoOf.

// hostFuncs reads nothing of its receiver (RegisterHost calls it on nil):
// each function finds its task in the call's ctx.
func (*Kernel) hostFuncs() []sandbox.HostFunc {
	type fn = func(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno
	impl := map[string]fn{
		abi.CapLookupName:   hostCapLookup,
		abi.CapCallName:     hostCapCall,
		abi.CapDeriveName:   hostCapDerive,
		abi.CapRevokeName:   hostCapRevoke,
		abi.CapDescribeName: hostCapDescribe,
		abi.HandleDropName:  hostHandleDrop,
		abi.BlobCreateName:  hostBlobCreate,
		abi.BlobLenName:     hostBlobLen,
		abi.BlobReadName:    hostBlobRead,
		abi.TaskInputName:   hostTaskInput,
		abi.TaskResultName:  hostTaskResult,
		abi.LastErrorName:   hostLastError,
		abi.TaskSpawnName:   hostTaskSpawn,
		abi.TaskWaitName:    hostTaskWait,
		abi.TaskKillName:    hostTaskKill,
	}
	calls := abi.HostCalls()
	funcs := make([]sandbox.HostFunc, 0, len(calls))
	for _, hc := range calls {
		f, ok := impl[hc.Name]
		if !ok {
			panic("kernel: no implementation of host call " + hc.Name)
		}
		funcs = append(funcs, sandbox.HostFunc{
			Name:   hc.Name,
			Params: hc.Params,
			Fn:     guard(hc.Name, f),
		})
	}
	return funcs
}

// guard finds the calling task, runs f and writes its errno. A host call
// from outside any task (impossible unless an engine misroutes contexts)
// and a panic both deny with EINTERNAL.
func guard(name string, f func(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno) func(context.Context, sandbox.Memory, []uint64) {
	return func(ctx context.Context, mem sandbox.Memory, stack []uint64) {
		t := taskFrom(ctx)
		if t == nil {
			stack[0] = uint64(abi.EINTERNAL)
			return
		}
		defer func() {
			if r := recover(); r != nil {
				t.logger.Error("host call panicked; denied", "call", name, "error", fmt.Sprint(r))
				stack[0] = uint64(abi.EINTERNAL)
			}
		}()
		stack[0] = uint64(f(ctx, t, mem, stack))
	}
}

func u32(v uint64) uint32 { return uint32(v) }

// readGuest copies n bytes at ptr out of guest memory.
func readGuest(mem sandbox.Memory, ptr, n uint32, limit int) ([]byte, abi.Errno) {
	b, e := viewGuest(mem, ptr, n, limit)
	if e != abi.ESUCCESS || b == nil {
		return nil, e
	}
	return append([]byte(nil), b...), abi.ESUCCESS
}

// viewGuest is readGuest without the copy: the bytes alias guest memory
// and are valid only during this host call (no guest code runs meanwhile,
// and memory cannot grow without guest code). Used for short values that
// are consumed before the call returns, such as operation names.
func viewGuest(mem sandbox.Memory, ptr, n uint32, limit int) ([]byte, abi.Errno) {
	if int64(n) > int64(limit) {
		return nil, abi.ELIMIT
	}
	if uint64(ptr)+uint64(n) > uint64(mem.Size()) {
		return nil, abi.EFAULT
	}
	if n == 0 {
		return nil, abi.ESUCCESS
	}
	b, ok := mem.Read(ptr, n)
	if !ok {
		return nil, abi.EFAULT
	}
	return b, abi.ESUCCESS
}

// outOK reports whether a 4-byte result fits at ptr. Checked before any
// effect, so a bad out pointer never leaves an effect without its handle.
func outOK(mem sandbox.Memory, ptr uint32) bool {
	return uint64(ptr)+4 <= uint64(mem.Size())
}

// putHandle writes h at ptr; if the write fails the handle is dropped so
// nothing leaks.
func putHandle(ctx context.Context, t *Task, mem sandbox.Memory, ptr uint32, h abi.Handle) abi.Errno {
	if !mem.WriteUint32Le(ptr, uint32(h)) {
		if h != 0 {
			_ = t.table.Remove(h)
		}
		return abi.EFAULT
	}
	return abi.ESUCCESS
}

// faulted records an EFAULT/ELIMIT/EINVAL from argument checking as the
// task's last error and returns it.
func faulted(t *Task, call string, e abi.Errno) abi.Errno {
	t.fail(call, &Error{Errno: e, Msg: "bad guest argument"})
	return e
}

// cap_lookup(name_ptr, name_len, out_handle_ptr) errno
func hostCapLookup(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	name, e := readGuest(mem, u32(p[0]), u32(p[1]), abi.MaxNameLen)
	if e != abi.ESUCCESS {
		return faulted(t, abi.CapLookupName, e)
	}
	if !outOK(mem, u32(p[2])) {
		return faulted(t, abi.CapLookupName, abi.EFAULT)
	}
	h, err := t.Lookup(ctx, string(name))
	if err != nil {
		return ErrnoOf(err)
	}
	if !mem.WriteUint32Le(u32(p[2]), uint32(h)) {
		return abi.EFAULT
	}
	return abi.ESUCCESS
}

// cap_call(h, op_ptr, op_len, arg_ptr, arg_len, out_handle_ptr) errno
func hostCapCall(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	op, e := viewGuest(mem, u32(p[1]), u32(p[2]), abi.MaxOpLen)
	if e != abi.ESUCCESS {
		if e == abi.ELIMIT {
			e = abi.EINVAL
		}
		return faulted(t, abi.CapCallName, e)
	}
	args, e := readGuest(mem, u32(p[3]), u32(p[4]), abi.MaxArgLen)
	if e != abi.ESUCCESS {
		return faulted(t, abi.CapCallName, e)
	}
	if !outOK(mem, u32(p[5])) {
		return faulted(t, abi.CapCallName, abi.EFAULT)
	}
	h, err := t.invoke(ctx, abi.Handle(u32(p[0])), op, args)
	if err != nil {
		return ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[5]), h)
}

// cap_derive(h, req_ptr, req_len, out_handle_ptr) errno
func hostCapDerive(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	req, e := readGuest(mem, u32(p[1]), u32(p[2]), abi.MaxArgLen)
	if e != abi.ESUCCESS {
		return faulted(t, abi.CapDeriveName, e)
	}
	if !outOK(mem, u32(p[3])) {
		return faulted(t, abi.CapDeriveName, abi.EFAULT)
	}
	h, err := t.DeriveHandle(ctx, abi.Handle(u32(p[0])), req)
	if err != nil {
		return ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[3]), h)
}

// cap_revoke(h) errno
func hostCapRevoke(ctx context.Context, t *Task, _ sandbox.Memory, p []uint64) abi.Errno {
	return ErrnoOf(t.RevokeHandle(ctx, abi.Handle(u32(p[0]))))
}

// cap_describe(h, out_handle_ptr) errno
func hostCapDescribe(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	if !outOK(mem, u32(p[1])) {
		return faulted(t, abi.CapDescribeName, abi.EFAULT)
	}
	h, err := t.Describe(ctx, abi.Handle(u32(p[0])))
	if err != nil {
		return ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[1]), h)
}

// handle_drop(h) errno
func hostHandleDrop(ctx context.Context, t *Task, _ sandbox.Memory, p []uint64) abi.Errno {
	return ErrnoOf(t.Drop(ctx, abi.Handle(u32(p[0]))))
}

// blob_create(ptr, len, out_handle_ptr) errno
func hostBlobCreate(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	data, e := readGuest(mem, u32(p[0]), u32(p[1]), abi.MaxBlobLen)
	if e != abi.ESUCCESS {
		return faulted(t, abi.BlobCreateName, e)
	}
	if !outOK(mem, u32(p[2])) {
		return faulted(t, abi.BlobCreateName, abi.EFAULT)
	}
	if data == nil {
		data = []byte{}
	}
	h, err := t.CreateBlob(ctx, data)
	if err != nil {
		return ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[2]), h)
}

// blob_len(h, out_len_ptr) errno
func hostBlobLen(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	if !outOK(mem, u32(p[1])) {
		return faulted(t, abi.BlobLenName, abi.EFAULT)
	}
	n, err := t.BlobLen(ctx, abi.Handle(u32(p[0])))
	if err != nil {
		return ErrnoOf(err)
	}
	if !mem.WriteUint32Le(u32(p[1]), uint32(n)) {
		return abi.EFAULT
	}
	return abi.ESUCCESS
}

// blob_read(h, offset, buf_ptr, buf_len, out_n_ptr) errno
func hostBlobRead(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	ptr, n := u32(p[2]), u32(p[3])
	if uint64(ptr)+uint64(n) > uint64(mem.Size()) || !outOK(mem, u32(p[4])) {
		return faulted(t, abi.BlobReadName, abi.EFAULT)
	}
	if n > abi.MaxBlobLen {
		n = abi.MaxBlobLen
	}
	if _, copies := mem.(sandbox.CopyingMemory); copies {
		// A guest elsewhere: its memory changes only through Write, and
		// what is written back is what the blob holds, not the buffer.
		if b, err := t.table.GetBlob(abi.Handle(u32(p[0]))); err != nil {
			n = 0 // ReadBlob refuses the handle; nothing to hold
		} else if int64(b.Len())-int64(u32(p[1])) < int64(n) {
			n = uint32(max(0, int64(b.Len())-int64(u32(p[1]))))
		}
		buf := make([]byte, n)
		got, err := t.ReadBlob(ctx, abi.Handle(u32(p[0])), u32(p[1]), buf)
		if err != nil {
			return ErrnoOf(err)
		}
		if got > 0 && !mem.Write(ptr, buf[:got]) {
			return faulted(t, abi.BlobReadName, abi.EFAULT)
		}
		if !mem.WriteUint32Le(u32(p[4]), uint32(got)) {
			return abi.EFAULT
		}
		return abi.ESUCCESS
	}
	buf, ok := mem.Read(ptr, n)
	if !ok {
		return faulted(t, abi.BlobReadName, abi.EFAULT)
	}
	// Read directly into guest memory: the view is valid until the guest
	// runs again, which it does not do during a host call.
	got, err := t.ReadBlob(ctx, abi.Handle(u32(p[0])), u32(p[1]), buf)
	if err != nil {
		return ErrnoOf(err)
	}
	if !mem.WriteUint32Le(u32(p[4]), uint32(got)) {
		return abi.EFAULT
	}
	return abi.ESUCCESS
}

// task_input(out_handle_ptr) errno
func hostTaskInput(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	if !outOK(mem, u32(p[0])) {
		return faulted(t, abi.TaskInputName, abi.EFAULT)
	}
	h, err := t.InputHandle(ctx)
	if err != nil {
		return ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[0]), h)
}

// task_result(h) errno
func hostTaskResult(ctx context.Context, t *Task, _ sandbox.Memory, p []uint64) abi.Errno {
	return ErrnoOf(t.SetResult(ctx, abi.Handle(u32(p[0]))))
}

// last_error(buf_ptr, buf_len, out_n_ptr) errno
func hostLastError(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	ptr, n := u32(p[0]), u32(p[1])
	if uint64(ptr)+uint64(n) > uint64(mem.Size()) || !outOK(mem, u32(p[2])) {
		return abi.EFAULT
	}
	msg := t.LastError()
	if len(msg) > abi.MaxErrorLen {
		msg = msg[:abi.MaxErrorLen]
	}
	if int(n) < len(msg) {
		msg = msg[:n]
	}
	if len(msg) > 0 && !mem.Write(ptr, []byte(msg)) {
		return abi.EFAULT
	}
	if !mem.WriteUint32Le(u32(p[2]), uint32(len(msg))) {
		return abi.EFAULT
	}
	return abi.ESUCCESS
}

// task_spawn(spawn_h, req_ptr, req_len, out_task_ptr) errno
func hostTaskSpawn(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	req, e := readGuest(mem, u32(p[1]), u32(p[2]), abi.MaxArgLen)
	if e != abi.ESUCCESS {
		return faulted(t, abi.TaskSpawnName, e)
	}
	if !outOK(mem, u32(p[3])) {
		return faulted(t, abi.TaskSpawnName, abi.EFAULT)
	}
	h, err := t.Spawn(ctx, abi.Handle(u32(p[0])), req)
	if err != nil {
		return ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[3]), h)
}

// task_wait(task_h, out_handle_ptr) errno
func hostTaskWait(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	if !outOK(mem, u32(p[1])) {
		return faulted(t, abi.TaskWaitName, abi.EFAULT)
	}
	h, err := t.WaitChild(ctx, abi.Handle(u32(p[0])))
	if err != nil {
		return ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[1]), h)
}

// task_kill(task_h) errno
func hostTaskKill(ctx context.Context, t *Task, _ sandbox.Memory, p []uint64) abi.Errno {
	return ErrnoOf(t.KillChild(ctx, abi.Handle(u32(p[0]))))
}
