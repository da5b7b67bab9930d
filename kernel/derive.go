package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// derivation is a capability decided but not yet minted: the pure half of
// Derive, so the mediator can refuse a derivation (a full handle table, a
// failed audit) before anything joins the tree.
type derivation struct {
	parent *Cap
	scope  kindapi.Scope
	cons   Constraints
	allow  Allowance
}

// Derive mints a capability within parent, as the kind's Narrow computes it
// from req, held by holder. Anything that is not strictly within parent is
// an error matching kindapi.ErrDenied (law 3: only narrower; never a silent
// clamp). The kernel checks the kind's answer with parent.Scope().Contains,
// so a kind bug in Narrow cannot widen authority.
func (k *Kernel) Derive(parent *Cap, holder *Task, req []byte) (*Cap, error) {
	d, err := k.narrow(parent, req)
	if err != nil {
		return nil, err
	}
	return k.mint(d, holder, "", false)
}

// narrow decides a derivation: the kernel's own attributes of the request
// (when, approve_when, max_uses, budget) are taken out, the rest is the
// kind's. It has no effect.
func (k *Kernel) narrow(parent *Cap, req []byte) (derivation, error) {
	if len(req) > abi.MaxArgLen {
		return derivation{}, kindapi.Errorf(abi.ELIMIT, "derive request of %d bytes exceeds %d", len(req), abi.MaxArgLen)
	}
	if parent.Revoked() {
		return derivation{}, kindapi.Errorf(abi.EREVOKED, "capability %s was revoked", parent.id)
	}
	m, err := splitKernelReq(req)
	if err != nil {
		return derivation{}, err
	}
	when, err := takeExprs(m, "when")
	if err != nil {
		return derivation{}, err
	}
	approveWhen, err := takeExprs(m, "approve_when")
	if err != nil {
		return derivation{}, err
	}
	cons, err := k.CompileConstraints(parent.kind.Name(), when, approveWhen)
	if err != nil {
		return derivation{}, kindapi.Errorf(abi.EINVAL, "%v", err)
	}
	allow, err := k.splitAllowanceReq(parent, parent.scope, m)
	if err != nil {
		return derivation{}, err
	}
	if m != nil {
		req, _ = json.Marshal(m)
	}
	scope, err := parent.kind.Narrow(parent.scope, req)
	if err != nil {
		if kindapi.ErrnoOf(err) == abi.EINTERNAL {
			return derivation{}, &kindapi.Error{Errno: abi.EINTERNAL, Msg: "narrow failed", Err: err}
		}
		return derivation{}, err
	}
	if scope == nil || !parent.scope.Contains(scope) {
		return derivation{}, kindapi.Errorf(abi.EDENIED, "derived scope is not within %s", parent.id)
	}
	return derivation{parent: parent, scope: scope, cons: cons, allow: allow}, nil
}

// splitKernelReq decodes a derive request as an object for the kernel to
// take its attributes from; nil when it has none of them (the kind then
// gets the request as it is, and reports it if malformed).
func splitKernelReq(req []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := abi.DecodeJSON(req, &m); err != nil || m == nil {
		return nil, nil
	}
	for _, key := range []string{"when", "approve_when", "max_uses", "budget"} {
		if _, ok := m[key]; ok {
			return m, nil
		}
	}
	return nil, nil
}

// takeExprs removes key from m and returns its expressions: a string or a
// list of strings.
func takeExprs(m map[string]json.RawMessage, key string) ([]string, error) {
	raw, ok := m[key]
	if !ok {
		return nil, nil
	}
	delete(m, key)
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, kindapi.Errorf(abi.EINVAL, "%s must be a string or a list of strings", key)
	}
	return slices.DeleteFunc(many, func(s string) bool { return s == "" }), nil
}

// mint links a decided derivation into the tree, held by holder; passed
// marks one minted for a child task (task_spawn).
func (k *Kernel) mint(d derivation, holder *Task, name string, passed bool) (*Cap, error) {
	return k.link(&Cap{
		kind: d.parent.reg.kind, reg: d.parent.reg, scope: d.scope, name: name, parent: d.parent, holder: holder,
		audit: d.parent.audit || d.parent.reg.lowers, cons: d.cons, allow: newAllowance(d.allow), passed: passed,
	})
}

// newCap links a new root (or, in tests, any) node into the derivation
// tree.
func (k *Kernel) newCap(reg *registered, scope kindapi.Scope, name string, parent *Cap, holder *Task, audit bool, cons Constraints) (*Cap, error) {
	return k.link(&Cap{kind: reg.kind, reg: reg, scope: scope, name: name, parent: parent, holder: holder, audit: audit || reg.lowers, cons: cons})
}

// link gives c its id and links it into the tree. Every field of c is set
// before: once linked, other goroutines (Graph, Revoke) read it.
func (k *Kernel) link(c *Cap) (*Cap, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c.parent != nil && c.parent.Revoked() {
		// Checked again under the tree lock: a Revoke racing this Derive
		// either sees the child or the child sees the revocation.
		return nil, kindapi.Errorf(abi.EREVOKED, "capability %s was revoked", c.parent.id)
	}
	k.nextCap++
	c.id = fmt.Sprintf("c%d", k.nextCap)
	c.hist = newHistory(c.cons)
	c.chain = c.flags()
	if c.parent != nil {
		c.parent.children = append(c.parent.children, c)
	}
	k.caps = append(k.caps, c)
	return c, nil
}

// DeriveHandle narrows the capability h names as req asks and inserts the
// result into the task's table, through the same pipeline as a call: the
// narrowing is decided first, and the new capability joins the tree only
// once a slot for it is reserved and the derivation is audited.
func (t *Task) DeriveHandle(ctx context.Context, h abi.Handle, req []byte) (abi.Handle, error) {
	const op = "derive"
	c, err := t.table.GetCap(h)
	if err != nil {
		return 0, t.deny(ctx, nil, op, err)
	}
	if err := usable(c); err != nil {
		return 0, t.deny(ctx, c, op, err)
	}
	d, err := narrowGuarded(t.k, c, req)
	if err != nil {
		return 0, t.deny(ctx, c, op, err)
	}
	call := t.newCall(c, op, req)
	defer freeCall(call)
	// A derivation spends no use and no rate token: only calls do.
	prep := kindapi.Op{Free: true}
	return t.decideDerive(ctx, c, call, &prep, d)
}

// decideDerive runs a derivation through the pipeline, with minting as
// its effect.
func (t *Task) decideDerive(ctx context.Context, c *Cap, call *kindapi.Call, prep *kindapi.Op, dv derivation) (abi.Handle, error) {
	op := opName{name: "derive"}
	var d decision
	if err := t.decide(ctx, c, op, call, prep, modeDerive, &d); err != nil {
		return 0, err
	}
	m, err := t.k.mint(dv, t, "", false)
	var e entry
	if err == nil {
		e = entry{cap: m}
	}
	nh, err := t.conclude(ctx, c, op, prep, &d, e, err)
	if err != nil {
		if m != nil {
			t.k.Revoke(m)
		}
		return 0, err
	}
	t.logger.Debug("derived", "parent", c.id, "cap", m.id)
	return nh, nil
}

func narrowGuarded(k *Kernel, c *Cap, req []byte) (d derivation, err error) {
	defer func() {
		if r := recover(); r != nil {
			d, err = derivation{}, &kindapi.Error{Errno: abi.EINTERNAL, Msg: fmt.Sprintf("kind %s panicked in narrow: %v", c.kind.Name(), r)}
		}
	}()
	return k.narrow(c, req)
}
