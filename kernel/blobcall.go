package kernel

import (
	"context"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// The blob calls: blob_create, blob_len, blob_read, task_input and
// task_result. Reading a blob raises the task's label (law 6); its size
// and its handle do not.

// CreateBlob makes a blob of data (already copied from the guest), labelled
// with the task's label: whatever a task writes carries its label.
func (t *Task) CreateBlob(ctx context.Context, data []byte) (abi.Handle, error) {
	if len(data) > abi.MaxBlobLen {
		return 0, t.fail("blob_create", kindapi.Errorf(abi.ELIMIT, "blob of %d bytes exceeds %d", len(data), abi.MaxBlobLen))
	}
	h, err := t.table.InsertBlob(kindapi.NewBlobWritten(data, t.Label()))
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
	if err := t.mayHold(b.Label()); err != nil {
		return 0, t.deny(ctx, nil, "blob_read", err)
	}
	if int64(offset) > int64(b.Len()) {
		return 0, t.fail("blob_read", kindapi.Errorf(abi.EINVAL, "offset %d past the blob's %d bytes", offset, b.Len()))
	}
	t.raise(b.Label())
	t.noteRead(b)
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

// BlobLabel returns the label of the blob h names, for the host (a test,
// a host API showing what a task holds): no guest call reaches it, and
// asking does not raise the task's label.
func (t *Task) BlobLabel(h abi.Handle) (kindapi.Label, error) {
	b, err := t.table.GetBlob(h)
	if err != nil {
		return kindapi.Label{}, err
	}
	return b.Label(), nil
}

// raise joins l into the task's label.
func (t *Task) raise(l kindapi.Label) {
	if l.IsZero() {
		return
	}
	t.mu.Lock()
	old := t.label
	t.label = t.label.Join(l)
	now := t.label
	t.mu.Unlock()
	if now != old {
		t.logger.Debug("label raised", "label", now.String())
	}
}

// InputHandle inserts the task's input blob and returns its handle.
func (t *Task) InputHandle(ctx context.Context) (abi.Handle, error) {
	if t.input == nil {
		return 0, t.fail("task_input", kindapi.Errorf(abi.ENOTFOUND, "the task has no input"))
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
	if err := t.resultFlow(b.Label()); err != nil {
		t.mu.Lock()
		t.refusedResult = err.Error()
		t.mu.Unlock()
		return t.deny(ctx, nil, "task_result", err)
	}
	t.mu.Lock()
	t.result = b
	t.mu.Unlock()
	return nil
}
