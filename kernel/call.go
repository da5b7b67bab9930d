package kernel

import (
	"context"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// cap_lookup and cap_call: a guest's call on a capability, up to the
// kind's Prepare; decide and conclude (mediator.go) do the rest.

// Lookup returns the handle of the root grant with the given name.
func (t *Task) Lookup(ctx context.Context, name string) (abi.Handle, error) {
	const op = "lookup"
	t.mu.Lock()
	c, ok := t.names[name]
	t.mu.Unlock()
	if !ok || c.dropped.Load() {
		return 0, t.fail(op, kindapi.Errorf(abi.ENOTFOUND, "no capability named %q", name))
	}
	// The name's handle is found by scanning: root grants are few.
	if h, ok := t.table.handleOf(c); ok {
		return h, nil
	}
	return 0, t.fail(op, kindapi.Errorf(abi.ENOTFOUND, "no capability named %q", name))
}

// Invoke performs op on the capability h names with the guest's argument
// document, returning the handle of the result blob (0 when the operation
// returns nothing).
func (t *Task) Invoke(ctx context.Context, h abi.Handle, op string, args []byte) (abi.Handle, error) {
	return t.invoke(ctx, h, []byte(op), args)
}

// invoke is Invoke with the operation name as the guest's bytes: it is
// matched against the kind's operations without allocating. It is the
// pipeline's first two steps for cap_call (lookup, revocation) and the
// kind's Prepare; decide does the rest.
func (t *Task) invoke(ctx context.Context, h abi.Handle, op []byte, args []byte) (abi.Handle, error) {
	c, err := t.table.GetCap(h)
	if err != nil {
		return 0, t.deny(ctx, nil, "call:"+string(op), err)
	}
	if err := usable(c); err != nil {
		return 0, t.deny(ctx, c, "call:"+string(op), err)
	}
	kop, ok := findOp(c.reg.info.Ops, op)
	if !ok || kop == kindapi.OpSpawn {
		return 0, t.deny(ctx, c, "call:"+string(op), kindapi.Errorf(abi.ENOTSUP, "kind %s has no operation %q", c.kind.Name(), op))
	}
	if len(args) > abi.MaxArgLen {
		return 0, t.deny(ctx, c, "call:"+kop, kindapi.Errorf(abi.ELIMIT, "arguments of %d bytes exceed %d", len(args), abi.MaxArgLen))
	}
	call := t.newCall(c, kop, args)
	defer freeCall(call)
	var prep kindapi.Op
	if err := prepareGuarded(c.kind, call, &prep); err != nil {
		return 0, t.refuse(ctx, c, "call:"+kop, err)
	}
	var d decision
	if err := t.decide(ctx, c, opName{"call:", kop}, call, &prep, modeCall, &d); err != nil {
		return 0, err
	}
	res, err := runEffect(ctx, c.kind, prep.Effect)
	var e entry
	if res != nil {
		d.outcome = res.Outcome
	}
	if err == nil && res != nil {
		e, err = t.resultBlob(c, call, res, &prep)
	}
	return t.conclude(ctx, c, opName{"call:", kop}, &prep, &d, e, err)
}

// resultBlob turns what an effect returned into the blob to install. What
// the kind read through Call.Blob may be in its result (a copy, a server's
// echo): the result carries those blobs' labels too, so handing a blob to
// a kind never launders it.
func (t *Task) resultBlob(c *Cap, call *kindapi.Call, res *kindapi.Result, prep *kindapi.Op) (entry, error) {
	if res.Free {
		prep.Free = true // conclude gives the reservation back
	}
	if res.Spent != nil && *res.Spent < prep.Amount {
		prep.Amount = max(*res.Spent, 0) // conclude settles the reservation
	}
	if len(res.Data) > abi.MaxBlobLen {
		return entry{}, kindapi.Errorf(abi.ELIMIT, "result of %d bytes exceeds %d", len(res.Data), abi.MaxBlobLen)
	}
	// What the call carried in (the task's label, the blobs spliced)
	// labels every part of the result too.
	in := kindapi.Label{}
	if !c.reg.lowers {
		in = t.Label()
		for i := range call.NumSpliced() {
			in = in.Join(call.SplicedAt(i).Label())
		}
	}
	if len(res.Parts) == 0 {
		return entry{blob: kindapi.NewBlobOwned(res.Data, res.Label.Join(in))}, nil
	}
	parts := make([]kindapi.PartLabel, len(res.Parts))
	for i, p := range res.Parts {
		parts[i] = kindapi.PartLabel{Pattern: p.Pattern, Label: p.Label.Join(in)}
	}
	b, err := kindapi.NewBlobParts(res.Data, res.Label.Join(in), parts)
	if err != nil {
		return entry{}, kindapi.Errorf(abi.EINTERNAL, "kind %s labelled its result's parts wrongly: %v", c.kind.Name(), err)
	}
	return entry{blob: b}, nil
}
