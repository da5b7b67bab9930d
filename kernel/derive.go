package kernel

import (
	"fmt"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Derive mints a capability within parent, as the kind's Narrow computes it
// from req, held by holder. Anything that is not strictly within parent is
// an error matching ErrDenied (law 3: only narrower; never a silent clamp).
// The kernel checks the kind's answer with parent.Scope().Contains, so a
// kind bug in Narrow cannot widen authority.
func (k *Kernel) Derive(parent *Cap, holder *Task, req []byte) (*Cap, error) {
	if len(req) > abi.MaxArgLen {
		return nil, Errorf(abi.ELIMIT, "derive request of %d bytes exceeds %d", len(req), abi.MaxArgLen)
	}
	if parent.Revoked() {
		return nil, Errorf(abi.EREVOKED, "capability %s was revoked", parent.id)
	}
	req, when, approveWhen, err := splitConstraintReq(req)
	if err != nil {
		return nil, err
	}
	cons, err := k.CompileConstraints(parent.kind.Name(), when, approveWhen)
	if err != nil {
		return nil, Errorf(abi.EINVAL, "%v", err)
	}
	scope, err := parent.kind.Narrow(parent.scope, req)
	if err != nil {
		if ErrnoOf(err) == abi.EINTERNAL {
			return nil, &Error{Errno: abi.EINTERNAL, Msg: "narrow failed", Err: err}
		}
		return nil, err
	}
	if scope == nil || !parent.scope.Contains(scope) {
		return nil, Errorf(abi.EDENIED, "derived scope is not within %s", parent.id)
	}
	return k.newCap(parent.kind, scope, "", parent, holder, parent.audit, cons)
}

// newCap links a new node into the derivation tree.
func (k *Kernel) newCap(kind Kind, scope Scope, name string, parent *Cap, holder *Task, audit bool, cons Constraints) (*Cap, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if parent != nil && parent.Revoked() {
		// Checked again under the tree lock: a Revoke racing this Derive
		// either sees the child or the child sees the revocation.
		return nil, Errorf(abi.EREVOKED, "capability %s was revoked", parent.id)
	}
	k.nextCap++
	c := &Cap{
		id:     fmt.Sprintf("c%d", k.nextCap),
		kind:   kind,
		scope:  scope,
		name:   name,
		parent: parent,
		holder: holder,
		audit:  audit,
		cons:   cons,
	}
	if parent != nil {
		parent.children = append(parent.children, c)
	}
	k.caps = append(k.caps, c)
	return c, nil
}
