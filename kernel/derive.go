package kernel

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// derivation is a capability decided but not yet minted: the pure half of
// Derive, so the mediator can refuse a derivation (a full handle table, a
// failed audit) before anything joins the tree.
type derivation struct {
	parent *Cap
	scope  Scope
	cons   Constraints
	allow  Allowance
}

// Derive mints a capability within parent, as the kind's Narrow computes it
// from req, held by holder. Anything that is not strictly within parent is
// an error matching ErrDenied (law 3: only narrower; never a silent clamp).
// The kernel checks the kind's answer with parent.Scope().Contains, so a
// kind bug in Narrow cannot widen authority.
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
		return derivation{}, Errorf(abi.ELIMIT, "derive request of %d bytes exceeds %d", len(req), abi.MaxArgLen)
	}
	if parent.Revoked() {
		return derivation{}, Errorf(abi.EREVOKED, "capability %s was revoked", parent.id)
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
		return derivation{}, Errorf(abi.EINVAL, "%v", err)
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
		if ErrnoOf(err) == abi.EINTERNAL {
			return derivation{}, &Error{Errno: abi.EINTERNAL, Msg: "narrow failed", Err: err}
		}
		return derivation{}, err
	}
	if scope == nil || !parent.scope.Contains(scope) {
		return derivation{}, Errorf(abi.EDENIED, "derived scope is not within %s", parent.id)
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
		return nil, Errorf(abi.EINVAL, "%s must be a string or a list of strings", key)
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
func (k *Kernel) newCap(reg *registered, scope Scope, name string, parent *Cap, holder *Task, audit bool, cons Constraints) (*Cap, error) {
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
		return nil, Errorf(abi.EREVOKED, "capability %s was revoked", c.parent.id)
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
