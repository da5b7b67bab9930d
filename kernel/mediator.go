package kernel

import (
	"time"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// The mediator: every operation a guest asks for, after its arguments were
// copied out of guest memory (hostcall.go). Each method follows the call
// path of ARCHITECTURE.md, resolving handles in the task's own table only,
// and returns an *Error whose errno the guest sees. Every denial is audited
// and recorded as the task's last error.

// deny records a refused operation: audit first, then the task's last
// error and the log line. It returns the error to hand back (an audit
// failure replaces it).
func (t *Task) deny(ctx context.Context, c *Cap, op string, err error) error {
	if aerr := t.k.audit(ctx, t, c, op, Deny, err); aerr != nil {
		err = aerr
	}
	t.mu.Lock()
	t.lastErr = op + ": " + err.Error()
	t.denials++
	t.mu.Unlock()
	args := []any{"op", op, "errno", ErrnoOf(err).String(), "error", err}
	if c != nil {
		args = append(args, "cap", c.id, "kind", c.kind.Name())
	}
	t.logger.Warn("denied", args...)
	return err
}

// fail records a failed effect (not a denial) as the task's last error.
func (t *Task) fail(op string, err error) error {
	t.mu.Lock()
	t.lastErr = op + ": " + err.Error()
	t.mu.Unlock()
	t.logger.Debug("call failed", "op", op, "errno", ErrnoOf(err).String(), "error", err)
	return err
}

// usable checks the state of a capability before any use.
func usable(c *Cap) error {
	if c.Revoked() {
		return Errorf(abi.EREVOKED, "capability %s was revoked", c.id)
	}
	return nil
}

// Lookup returns the handle of the root grant with the given name.
func (t *Task) Lookup(ctx context.Context, name string) (abi.Handle, error) {
	const op = "lookup"
	t.mu.Lock()
	c, ok := t.names[name]
	t.mu.Unlock()
	if !ok || c.dropped.Load() {
		return 0, t.fail(op, Errorf(abi.ENOTFOUND, "no capability named %q", name))
	}
	// The name's handle is found by scanning: root grants are few.
	t.table.mu.Lock()
	defer t.table.mu.Unlock()
	for i := range t.table.slots {
		if s := &t.table.slots[i]; s.used && s.entry.cap == c {
			return abi.MakeHandle(uint32(i), s.gen), nil
		}
	}
	return 0, t.fail(op, Errorf(abi.ENOTFOUND, "no capability named %q", name))
}

// Invoke performs op on the capability h names with the guest's argument
// document, returning the handle of the result blob (0 when the operation
// returns nothing).
func (t *Task) Invoke(ctx context.Context, h abi.Handle, op string, args []byte) (abi.Handle, error) {
	return t.invoke(ctx, h, []byte(op), args)
}

// invoke is Invoke with the operation name as the guest's bytes: it is
// matched against the kind's operations without allocating.
func (t *Task) invoke(ctx context.Context, h abi.Handle, op []byte, args []byte) (abi.Handle, error) {
	c, err := t.table.GetCap(h)
	if err != nil {
		return 0, t.deny(ctx, nil, "call:"+string(op), err)
	}
	if err := usable(c); err != nil {
		return 0, t.deny(ctx, c, "call:"+string(op), err)
	}
	kop, ok := findOp(c.kind.Ops(), op)
	if !ok {
		return 0, t.deny(ctx, c, "call:"+string(op), Errorf(abi.ENOTSUP, "kind %s has no operation %q", c.kind.Name(), op))
	}
	if len(args) > abi.MaxArgLen {
		return 0, t.deny(ctx, c, "call:"+kop, Errorf(abi.ELIMIT, "arguments of %d bytes exceed %d", len(args), abi.MaxArgLen))
	}
	if err := takeRate(c, time.Now); err != nil {
		return 0, t.deny(ctx, c, "call:"+kop, err)
	}
	// Constraints, flow checks and approvals hook in here (later kinds).
	_, declassify := c.kind.(Declassifier)
	audited := c.audit || declassify
	var digest string
	if audited {
		sum := sha256.Sum256(args)
		digest = hex.EncodeToString(sum[:])
		if err := t.k.auditCall(ctx, t, c, "call:"+kop, Allow, nil, digest); err != nil {
			return 0, t.fail("call:"+kop, err)
		}
	}
	call := callPool.Get().(*Call)
	*call = Call{
		Op:     kop,
		Args:   args,
		Scope:  c.scope,
		Task:   t.info,
		Logger: t.logger,
		blob:   t.resolveBlob,
		task:   t,
		cap:    c,
	}
	var res *Result
	err = t.checkSink(c)
	if err == nil {
		err = precheckGuarded(c.kind, call)
	}
	if err == nil {
		err = t.constrain(ctx, c, call)
	}
	if err == nil {
		res, err = invokeGuarded(ctx, c.kind, call)
	}
	// What the kind read through Call.Blob may be in its result (a copy,
	// a server's echo): the result carries those blobs' labels too, so
	// handing a blob to a kind never launders it.
	var read Label
	for _, b := range call.spliced {
		read = read.Join(b.label)
	}
	*call = Call{}
	callPool.Put(call)
	if audited {
		if aerr := t.k.auditCall(ctx, t, c, "call:"+kop, Outcome, err, digest); aerr != nil && err == nil {
			err = aerr
		}
	}
	if err != nil {
		if isDenial(err) {
			return 0, t.deny(ctx, c, "call:"+kop, err)
		}
		return 0, t.fail("call:"+kop, err)
	}
	if res == nil {
		return 0, nil
	}
	if len(res.Data) > abi.MaxBlobLen {
		return 0, t.fail("call:"+kop, Errorf(abi.ELIMIT, "result of %d bytes exceeds %d", len(res.Data), abi.MaxBlobLen))
	}
	label := res.Label.Join(t.Label()).Join(read)
	if declassify {
		label = res.Label
	}
	b := newBlobOwned(res.Data, label)
	bh, err := t.hold(b)
	if err != nil {
		return 0, t.deny(ctx, c, "call:"+kop, err)
	}
	return bh, nil
}

// constrain checks the constraints of c and its ancestors against the
// call and asks for approval when an approve_when matched. It runs before
// the kind acts, so a refused call has no effect.
func (t *Task) constrain(ctx context.Context, c *Cap, call *Call) error {
	if !hasConstraints(c) {
		return nil
	}
	need, err := checkConstraints(ctx, c, call)
	if err != nil {
		return err
	}
	if len(need) > 0 {
		return t.approve(ctx, c, call.Op, fmt.Sprintf("%s on %s %q matches approve_when %q", call.Op, c.kind.Name(), c.displayName(), need[0]), nil)
	}
	return nil
}

// callPool recycles Calls: kinds must not keep a Call after Invoke
// returns (see Kind.Invoke).
var callPool = sync.Pool{New: func() any { return new(Call) }}

func findOp(ops []string, op []byte) (string, bool) {
	for _, o := range ops {
		if o == string(op) {
			return o, true
		}
	}
	return "", false
}

// invokeGuarded calls the kind, turning a panic into EINTERNAL: a kind bug
// triggered by guest input denies the call and the kernel stays up.
// precheckGuarded asks a Prechecker kind whether its scope allows call,
// turning a panic into EINTERNAL.
func precheckGuarded(kind Kind, call *Call) (err error) {
	pc, ok := kind.(Prechecker)
	if !ok {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Errno: abi.EINTERNAL, Msg: fmt.Sprintf("kind %s panicked: %v", kind.Name(), r)}
		}
	}()
	return pc.Precheck(call)
}

func invokeGuarded(ctx context.Context, kind Kind, call *Call) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, &Error{Errno: abi.EINTERNAL, Msg: fmt.Sprintf("kind %s panicked: %v", kind.Name(), r)}
		}
	}()
	return kind.Invoke(ctx, call)
}

// DeriveHandle narrows the capability h names as req asks and inserts the
// result into the task's table.
func (t *Task) DeriveHandle(ctx context.Context, h abi.Handle, req []byte) (abi.Handle, error) {
	const op = "derive"
	c, err := t.table.GetCap(h)
	if err != nil {
		return 0, t.deny(ctx, nil, op, err)
	}
	if err := usable(c); err != nil {
		return 0, t.deny(ctx, c, op, err)
	}
	d, err := deriveGuarded(t.k, c, t, req)
	if err != nil {
		return 0, t.deny(ctx, c, op, err)
	}
	if c.audit {
		if err := t.k.audit(ctx, t, d, op, Allow, nil); err != nil {
			t.k.Revoke(d)
			return 0, t.fail(op, err)
		}
	}
	nh, err := t.table.InsertCap(d)
	if err != nil {
		t.k.Revoke(d)
		return 0, t.deny(ctx, c, op, err)
	}
	t.logger.Debug("derived", "parent", c.id, "cap", d.id)
	return nh, nil
}

func deriveGuarded(k *Kernel, c *Cap, t *Task, req []byte) (d *Cap, err error) {
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, &Error{Errno: abi.EINTERNAL, Msg: fmt.Sprintf("kind %s panicked in narrow: %v", c.kind.Name(), r)}
		}
	}()
	return k.Derive(c, t, req)
}

// RevokeHandle revokes the capability h names and everything derived from
// it. The handle stays in the table (its uses now fail with EREVOKED) until
// dropped.
func (t *Task) RevokeHandle(ctx context.Context, h abi.Handle) error {
	const op = "revoke"
	c, err := t.table.GetCap(h)
	if err != nil {
		return t.deny(ctx, nil, op, err)
	}
	if c.audit {
		if err := t.k.audit(ctx, t, c, op, Allow, nil); err != nil {
			return t.fail(op, err)
		}
	}
	n := t.k.Revoke(c)
	t.logger.Info("revoked", "cap", c.id, "count", n)
	return nil
}

// Drop removes h from the task's table. Dropping a capability does not
// revoke what was derived from it.
func (t *Task) Drop(ctx context.Context, h abi.Handle) error {
	e, err := t.table.remove(h)
	if err != nil {
		return t.deny(ctx, nil, "drop", err)
	}
	if e.cap != nil {
		e.cap.dropped.Store(true)
	}
	return nil
}

// Describe returns a blob holding the JSON description of the capability h
// names: {"id","kind","name","ops","scope","revoked"}.
func (t *Task) Describe(ctx context.Context, h abi.Handle) (abi.Handle, error) {
	const op = "describe"
	c, err := t.table.GetCap(h)
	if err != nil {
		return 0, t.deny(ctx, nil, op, err)
	}
	d := capDescription{
		ID: c.id, Kind: c.kind.Name(), Name: c.name, Ops: slices.Clone(c.kind.Ops()),
		Scope: scopeJSON(c.scope), Revoked: c.Revoked(),
	}
	bh, err := t.table.InsertBlob(newBlobOwned(mustJSON(d), Label{}))
	if err != nil {
		return 0, t.fail(op, err)
	}
	return bh, nil
}

// CreateBlob makes a blob of data (already copied from the guest), labelled
// with the task's label: whatever a task writes carries its label.
func (t *Task) CreateBlob(ctx context.Context, data []byte) (abi.Handle, error) {
	if len(data) > abi.MaxBlobLen {
		return 0, t.fail("blob_create", Errorf(abi.ELIMIT, "blob of %d bytes exceeds %d", len(data), abi.MaxBlobLen))
	}
	h, err := t.table.InsertBlob(newBlobOwned(data, t.Label()))
	if err != nil {
		return 0, t.fail("blob_create", err)
	}
	return h, nil
}

// ReadBlob copies blob bytes from offset into p. Reading raises the task's
// label to include the blob's (law 6).
func (t *Task) ReadBlob(ctx context.Context, h abi.Handle, offset uint32, p []byte) (int, error) {
	b, err := t.table.GetBlob(h)
	if err != nil {
		return 0, t.deny(ctx, nil, "blob_read", err)
	}
	if err := t.mayHold(b.label); err != nil {
		return 0, t.deny(ctx, nil, "blob_read", err)
	}
	if int64(offset) > int64(b.Len()) {
		return 0, t.fail("blob_read", Errorf(abi.EINVAL, "offset %d past the blob's %d bytes", offset, b.Len()))
	}
	t.raise(b.label)
	n, _ := b.ReadAt(p, int64(offset))
	return n, nil
}

// BlobLen returns the size of the blob h names. Its size is not its
// content: asking does not raise the label.
func (t *Task) BlobLen(ctx context.Context, h abi.Handle) (int, error) {
	b, err := t.table.GetBlob(h)
	if err != nil {
		return 0, t.deny(ctx, nil, "blob_len", err)
	}
	return b.Len(), nil
}

// raise joins l into the task's label.
func (t *Task) raise(l Label) {
	if l.IsZero() {
		return
	}
	t.mu.Lock()
	old := t.label
	t.label = t.label.Join(l)
	changed := t.label != old
	t.mu.Unlock()
	if changed {
		t.logger.Debug("label raised", "label", t.label.String())
	}
}

// InputHandle inserts the task's input blob and returns its handle.
func (t *Task) InputHandle(ctx context.Context) (abi.Handle, error) {
	if t.input == nil {
		return 0, t.fail("task_input", Errorf(abi.ENOTFOUND, "the task has no input"))
	}
	h, err := t.hold(t.input)
	if err != nil {
		return 0, t.fail("task_input", err)
	}
	return h, nil
}

// SetResult makes the blob h names the task's result.
func (t *Task) SetResult(ctx context.Context, h abi.Handle) error {
	b, err := t.table.GetBlob(h)
	if err != nil {
		return t.deny(ctx, nil, "task_result", err)
	}
	t.mu.Lock()
	t.result = b
	t.mu.Unlock()
	return nil
}
