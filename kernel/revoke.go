package kernel

import (
	"context"
	"slices"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Revoke revokes c and everything derived from it, in every task (law 4).
// It takes effect at the next use: a call already inside a kind finishes,
// every later call, derivation or pass of any of these capabilities fails
// with EREVOKED. Revoking twice is harmless.
func (k *Kernel) Revoke(c *Cap) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	stack := []*Cap{c}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !x.revoked.Swap(true) {
			n++
		}
		stack = append(stack, x.children...)
	}
	return n
}

// RevokeID revokes the capability with the given id and its descendants,
// reporting how many were newly revoked, or kindapi.ErrNotFound.
func (k *Kernel) RevokeID(id string) (int, error) {
	c := k.capByID(id)
	if c == nil {
		return 0, kindapi.Errorf(kindapi.ErrNotFound.Errno, "no capability %q", id)
	}
	return k.Revoke(c), nil
}

func (k *Kernel) capByID(id string) *Cap {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.caps {
		if c.id == id {
			return c
		}
	}
	return nil
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
		ID: c.id, Kind: c.kind.Name(), Name: c.name, Ops: slices.Clone(c.reg.info.Ops),
		Scope: scopeJSON(c.scope), Revoked: c.Revoked(),
	}
	bh, err := t.table.InsertBlob(kindapi.NewBlobOwned(mustJSON(d), kindapi.Label{}))
	if err != nil {
		return 0, t.fail(op, err)
	}
	return bh, nil
}
