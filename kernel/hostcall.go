package kernel

import (
	"context"
	"fmt"
	"slices"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// Host functions of the "mandate" import module (guest-sdk/ABI.md). This
// file is the boundary where guest pointers become Go values: every range
// is checked against the guest's memory before it is read or written (a
// bad one is EFAULT), every length against its limit first (ELIMIT), and
// host errors become errnos in one place, kindapi.ErrnoOf.

// HostCall declares one host function: its name, its parameters (which
// are handles, which (pointer, length) pairs it reads or fills and their
// limit, which out pointers it writes and their size, which plain
// values) and the errnos it returns besides ESUCCESS, each with when.
// Every host call may also return EINTERNAL (the kernel failed and denied
// the call), which no declaration lists.
//
// Each declaration sits beside the function that implements it, and it
// is the one from which the kernel registers the function (its arity),
// forwarding ships the guest memory a call reads (sandbox/forward, from
// the Params of the HostFunc), and against which guest-sdk/ABI.md (its
// headings and errno lists), the guest SDKs' imports and the
// implementation's errnos are tested.
type HostCall struct {
	Name   string
	Params []sandbox.Param
	Errnos []ErrnoCase
	fn     hostFn
}

// ErrnoCase is one errno a host call returns, and when.
type ErrnoCase struct {
	Errno abi.Errno
	When  string
}

type hostFn = func(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno

// hostCalls is the "mandate" import module, in the ABI's order.
var hostCalls = [...]*HostCall{
	&capLookupCall, &capCallCall, &capDeriveCall, &capRevokeCall, &capDescribeCall,
	&handleDropCall, &blobCreateCall, &blobLenCall, &blobReadCall, &taskInputCall,
	&taskResultCall, &lastErrorCall, &taskSpawnCall, &taskWaitCall, &taskKillCall,
	&planSubmitCall, &blobPartCall,
}

// HostCalls returns the declarations of every host function, in the ABI's
// order. They are copies: nothing that imports the kernel can change what
// it registers.
func HostCalls() []HostCall {
	out := make([]HostCall, len(hostCalls))
	for i, hc := range hostCalls {
		out[i] = HostCall{Name: hc.Name, Params: slices.Clone(hc.Params), Errnos: slices.Clone(hc.Errnos)}
	}
	return out
}

// HostCallFuncs returns the host functions the declarations make, as
// every kernel registers them (RegisterHost): what the node of a guest
// whose kernel is elsewhere makes its forwarding stubs of
// (forward.Stubs).
func HostCallFuncs() []sandbox.HostFunc { return (*Kernel)(nil).hostFuncs() }

// hostFuncs reads nothing of its receiver (RegisterHost calls it on nil):
// each function finds its task in the call's ctx.
func (*Kernel) hostFuncs() []sandbox.HostFunc {
	funcs := make([]sandbox.HostFunc, len(hostCalls))
	for i, hc := range hostCalls {
		funcs[i] = sandbox.HostFunc{Name: hc.Name, Params: slices.Clone(hc.Params), Fn: guard(hc.Name, hc.fn)}
	}
	return funcs
}

// Parameters, as the declarations below write them.
func handle(name string) sandbox.Param { return sandbox.Param{Name: name, Kind: sandbox.Handle} }
func value(name string) sandbox.Param  { return sandbox.Param{Name: name, Kind: sandbox.Value} }
func length(name string) sandbox.Param { return sandbox.Param{Name: name, Kind: sandbox.Len} }

// in is a pointer the function reads up to limit bytes at.
func in(name string, limit int) sandbox.Param {
	return sandbox.Param{Name: name, Kind: sandbox.In, Limit: limit}
}

// buf is a buffer the function fills, up to limit bytes.
func buf(name string, limit int) sandbox.Param {
	return sandbox.Param{Name: name, Kind: sandbox.Buf, Limit: limit}
}

// out is a pointer the function writes a u32 at (a handle, a count).
func out(name string) sandbox.Param { return sandbox.Param{Name: name, Kind: sandbox.Out, Size: 4} }

// Errnos shared by declarations.
var (
	badHandle = ErrnoCase{abi.EBADHANDLE, "`h` is not in the caller's table."}
	notACap   = ErrnoCase{abi.EWRONGTYPE, "`h` is not a capability."}
	notABlob  = ErrnoCase{abi.EWRONGTYPE, "`h` is not a blob."}
	tableFull = ErrnoCase{abi.ELIMIT, "the table is full."}
	outFault  = ErrnoCase{abi.EFAULT, "the out pointer is out of bounds."}
)

// guard finds the calling task, runs f and writes its errno. A host call
// from outside any task (impossible unless an engine misroutes contexts)
// and a panic both deny with EINTERNAL.
func guard(name string, f hostFn) func(context.Context, sandbox.Memory, []uint64) {
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
	t.fail(call, &kindapi.Error{Errno: e, Msg: "bad guest argument"})
	return e
}

// capLookupCall: cap_lookup finds the capability granted under a name.
var capLookupCall = HostCall{
	Name:   abi.CapLookupName,
	Params: []sandbox.Param{in("name_ptr", abi.MaxNameLen), length("name_len"), out("out_handle_ptr")},
	Errnos: []ErrnoCase{
		{abi.ENOTFOUND, "no grant of that name, or its handle was dropped."},
		{abi.ELIMIT, "`name_len` > 256."},
		{abi.EFAULT, "the name or the out pointer is out of bounds."},
	},
	fn: hostCapLookup,
}

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
		return kindapi.ErrnoOf(err)
	}
	if !mem.WriteUint32Le(u32(p[2]), uint32(h)) {
		return abi.EFAULT
	}
	return abi.ESUCCESS
}

// capCallCall: cap_call performs an operation of a capability, through
// the one mediation pipeline.
var capCallCall = HostCall{
	Name: abi.CapCallName,
	Params: []sandbox.Param{handle("h"), in("op_ptr", abi.MaxOpLen), length("op_len"),
		in("arg_ptr", abi.MaxArgLen), length("arg_len"), out("out_handle_ptr")},
	Errnos: []ErrnoCase{
		badHandle,
		notACap,
		{abi.EREVOKED, "`h` or an ancestor was revoked, even while the task runs."},
		{abi.EEXPIRED, "the capability has expired (a kind's own expiry, such as a pay token's `expires`)."},
		{abi.ENOTSUP, "the kind has no operation `op`."},
		{abi.EINVAL, "`op_len` > 64, or the arguments do not decode."},
		{abi.ELIMIT, "`arg_len` > 1 MiB; a kind's size limit; the table is full (checked before the effect); " +
			"the rate, `max_uses` or `budget` of `h` or an ancestor is spent."},
		{abi.EDENIED, "the kind refuses the arguments (outside the scope), or a `when` constraint does not hold " +
			"or cannot be evaluated."},
		{abi.EFLOW, "the capability is a sink (a network origin, a payment provider) and the caller's label, " +
			"or the label of a blob the request splices by handle, may not flow to its clearance; nothing was " +
			"sent. Also when the result's label is above the caller's clearance."},
		{abi.EAPPROVAL, "an approval was needed (an `approve_when` matched, or the kind asked) and the approver " +
			"said no, or nobody could be asked."},
		{abi.EIO, "the effect failed."},
		{abi.ETIMEDOUT, "the effect timed out."},
		{abi.EFAULT, "a pointer is out of bounds."},
	},
	fn: hostCapCall,
}

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
		return kindapi.ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[5]), h)
}

// capDeriveCall: cap_derive derives a narrower capability.
var capDeriveCall = HostCall{
	Name:   abi.CapDeriveName,
	Params: []sandbox.Param{handle("h"), in("req_ptr", abi.MaxArgLen), length("req_len"), out("out_handle_ptr")},
	Errnos: []ErrnoCase{
		{abi.EDENIED, "the request asks for anything `h` does not allow (a widening is refused, never clamped)."},
		{abi.EINVAL, "the request does not decode, or a constraint does not compile."},
		{abi.EREVOKED, "`h` or an ancestor was revoked."},
		badHandle,
		notACap,
		{abi.ELIMIT, "`req_len` > 1 MiB, or the table is full."},
		{abi.EFAULT, "the request or the out pointer is out of bounds."},
	},
	fn: hostCapDerive,
}

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
		return kindapi.ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[3]), h)
}

// capRevokeCall: cap_revoke revokes a capability and everything derived
// from it.
var capRevokeCall = HostCall{
	Name:   abi.CapRevokeName,
	Params: []sandbox.Param{handle("h")},
	Errnos: []ErrnoCase{badHandle, notACap},
	fn:     hostCapRevoke,
}

func hostCapRevoke(ctx context.Context, t *Task, _ sandbox.Memory, p []uint64) abi.Errno {
	return kindapi.ErrnoOf(t.RevokeHandle(ctx, abi.Handle(u32(p[0]))))
}

// capDescribeCall: cap_describe writes a blob describing a capability.
var capDescribeCall = HostCall{
	Name:   abi.CapDescribeName,
	Params: []sandbox.Param{handle("h"), out("out_handle_ptr")},
	Errnos: []ErrnoCase{badHandle, notACap, tableFull, outFault},
	fn:     hostCapDescribe,
}

func hostCapDescribe(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	if !outOK(mem, u32(p[1])) {
		return faulted(t, abi.CapDescribeName, abi.EFAULT)
	}
	h, err := t.Describe(ctx, abi.Handle(u32(p[0])))
	if err != nil {
		return kindapi.ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[1]), h)
}

// handleDropCall: handle_drop removes a handle from the caller's table.
var handleDropCall = HostCall{
	Name:   abi.HandleDropName,
	Params: []sandbox.Param{handle("h")},
	Errnos: []ErrnoCase{{abi.EBADHANDLE, "`h` is not in the table (including a second drop)."}},
	fn:     hostHandleDrop,
}

func hostHandleDrop(ctx context.Context, t *Task, _ sandbox.Memory, p []uint64) abi.Errno {
	return kindapi.ErrnoOf(t.Drop(ctx, abi.Handle(u32(p[0]))))
}

// blobCreateCall: blob_create copies guest bytes into a new blob.
var blobCreateCall = HostCall{
	Name:   abi.BlobCreateName,
	Params: []sandbox.Param{in("ptr", abi.MaxBlobLen), length("len"), out("out_handle_ptr")},
	Errnos: []ErrnoCase{
		{abi.ELIMIT, "`len` > 64 MiB, or the table is full."},
		{abi.EFAULT, "the bytes or the out pointer are out of bounds."},
	},
	fn: hostBlobCreate,
}

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
		return kindapi.ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[2]), h)
}

// blobLenCall: blob_len writes a blob's size.
var blobLenCall = HostCall{
	Name:   abi.BlobLenName,
	Params: []sandbox.Param{handle("h"), out("out_len_ptr")},
	Errnos: []ErrnoCase{badHandle, notABlob, outFault},
	fn:     hostBlobLen,
}

func hostBlobLen(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	if !outOK(mem, u32(p[1])) {
		return faulted(t, abi.BlobLenName, abi.EFAULT)
	}
	n, err := t.BlobLen(ctx, abi.Handle(u32(p[0])))
	if err != nil {
		return kindapi.ErrnoOf(err)
	}
	if !mem.WriteUint32Le(u32(p[1]), uint32(n)) {
		return abi.EFAULT
	}
	return abi.ESUCCESS
}

// blobReadCall: blob_read copies a blob's bytes into a guest buffer.
var blobReadCall = HostCall{
	Name:   abi.BlobReadName,
	Params: []sandbox.Param{handle("h"), value("offset"), buf("buf_ptr", abi.MaxBlobLen), length("buf_len"), out("out_n_ptr")},
	Errnos: []ErrnoCase{
		{abi.EINVAL, "`offset` is past the end."},
		{abi.EFLOW, "the blob's label is above the caller's clearance."},
		badHandle,
		notABlob,
		{abi.EFAULT, "the buffer or the out pointer is out of bounds."},
	},
	fn: hostBlobRead,
}

func hostBlobRead(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	h, off, ptr, n := abi.Handle(u32(p[0])), u32(p[1]), u32(p[2]), u32(p[3])
	if uint64(ptr)+uint64(n) > uint64(mem.Size()) || !outOK(mem, u32(p[4])) {
		return faulted(t, abi.BlobReadName, abi.EFAULT)
	}
	// The view is exactly what a successful read fills (buf_ptr is a Buf:
	// a forwarded call's view is a fresh buffer, all of which reaches the
	// guest): the bytes the blob holds from offset. Its length is no
	// secret (blob_len tells it); ReadBlob decides the rest.
	if b, err := t.table.GetBlob(h); err != nil {
		n = 0
	} else {
		n = uint32(min(int64(n), max(0, int64(b.Len())-int64(off))))
	}
	view, ok := mem.Read(ptr, n)
	if !ok {
		return faulted(t, abi.BlobReadName, abi.EFAULT)
	}
	// The view is valid until the guest runs again, which it does not do
	// during a host call.
	got, err := t.ReadBlob(ctx, h, off, view)
	if err != nil {
		return kindapi.ErrnoOf(err)
	}
	if !mem.WriteUint32Le(u32(p[4]), uint32(got)) {
		return abi.EFAULT
	}
	return abi.ESUCCESS
}

// taskInputCall: task_input writes a handle to the task's input.
var taskInputCall = HostCall{
	Name:   abi.TaskInputName,
	Params: []sandbox.Param{out("out_handle_ptr")},
	Errnos: []ErrnoCase{
		{abi.ENOTFOUND, "the task has no input."},
		{abi.EFLOW, "the input's label is above the task's clearance."},
		tableFull,
		outFault,
	},
	fn: hostTaskInput,
}

func hostTaskInput(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	if !outOK(mem, u32(p[0])) {
		return faulted(t, abi.TaskInputName, abi.EFAULT)
	}
	h, err := t.InputHandle(ctx)
	if err != nil {
		return kindapi.ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[0]), h)
}

// taskResultCall: task_result makes a blob the task's result.
var taskResultCall = HostCall{
	Name:   abi.TaskResultName,
	Params: []sandbox.Param{handle("h")},
	Errnos: []ErrnoCase{
		badHandle,
		notABlob,
		{abi.EFLOW, "the blob carries an integrity taint the task's result refuses: any " +
			"(`result { accepts_untrusted = false }`) or one its `refuses_taints` match; the error names it."},
	},
	fn: hostTaskResult,
}

func hostTaskResult(ctx context.Context, t *Task, _ sandbox.Memory, p []uint64) abi.Errno {
	return kindapi.ErrnoOf(t.SetResult(ctx, abi.Handle(u32(p[0]))))
}

// lastErrorCall: last_error copies the reason for the last failed call.
var lastErrorCall = HostCall{
	Name:   abi.LastErrorName,
	Params: []sandbox.Param{buf("buf_ptr", abi.MaxErrorLen), length("buf_len"), out("out_n_ptr")},
	Errnos: []ErrnoCase{{abi.EFAULT, "the buffer or the out pointer is out of bounds."}},
	fn:     hostLastError,
}

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

// taskSpawnCall: task_spawn starts a child task under a spawn capability.
var taskSpawnCall = HostCall{
	Name:   abi.TaskSpawnName,
	Params: []sandbox.Param{handle("spawn_h"), in("req_ptr", abi.MaxArgLen), length("req_len"), out("out_task_ptr")},
	Errnos: []ErrnoCase{
		{abi.EDENIED, "the module is not allowed; a passed capability's narrowing widens it; more memory or " +
			"time than allowed; a `when` on the spawn capability does not hold."},
		{abi.ELIMIT, "`req_len` > 1 MiB; the depth (the spawn capability's `max_depth`, at most 8), the " +
			"parent's number of children (`max_children`), or the kernel's number of running tasks would be " +
			"exceeded; the table is full; the spawn capability's rate or `max_uses` is spent."},
		{abi.EWRONGTYPE, "`spawn_h` is not a spawn capability; a passed handle is not a capability, or " +
			"`input` not a blob."},
		{abi.EBADHANDLE, "`spawn_h`, a passed handle or `input` is not in the caller's table."},
		{abi.EREVOKED, "the spawn capability or a passed one was revoked."},
		{abi.EFLOW, "the child's clearance is not within the parent's, or not above the parent's current " +
			"label; something given to the child may not flow to its clearance."},
		{abi.EAPPROVAL, "an approval was needed and refused."},
		{abi.EINVAL, "the request is malformed."},
		{abi.ENOTSUP, "the kernel cannot resolve modules, or a `placement` asks for another node and the " +
			"kernel is on no fleet."},
		{abi.EIO, "the child could not be placed on another node."},
		{abi.EFAULT, "the request or the out pointer is out of bounds."},
	},
	fn: hostTaskSpawn,
}

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
		return kindapi.ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[3]), h)
}

// taskWaitCall: task_wait waits for a child and writes its result.
var taskWaitCall = HostCall{
	Name:   abi.TaskWaitName,
	Params: []sandbox.Param{handle("task_h"), out("out_handle_ptr")},
	Errnos: []ErrnoCase{
		{abi.ECHILD, "the child failed, was killed or ran out of a limit (the reason is in `last_error`)."},
		{abi.ETIMEDOUT, "the parent's own deadline came first."},
		{abi.EBADHANDLE, "`task_h` is not in the caller's table."},
		{abi.EWRONGTYPE, "`task_h` is not a child task."},
		{abi.EFLOW, "the result's label is above the parent's clearance."},
		tableFull,
		outFault,
	},
	fn: hostTaskWait,
}

func hostTaskWait(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	if !outOK(mem, u32(p[1])) {
		return faulted(t, abi.TaskWaitName, abi.EFAULT)
	}
	h, err := t.WaitChild(ctx, abi.Handle(u32(p[0])))
	if err != nil {
		return kindapi.ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[1]), h)
}

// taskKillCall: task_kill stops a child.
var taskKillCall = HostCall{
	Name:   abi.TaskKillName,
	Params: []sandbox.Param{handle("task_h")},
	Errnos: []ErrnoCase{
		{abi.EBADHANDLE, "`task_h` is not in the caller's table."},
		{abi.EWRONGTYPE, "`task_h` is not a child task."},
	},
	fn: hostTaskKill,
}

func hostTaskKill(ctx context.Context, t *Task, _ sandbox.Memory, p []uint64) abi.Errno {
	return kindapi.ErrnoOf(t.KillChild(ctx, abi.Handle(u32(p[0]))))
}
