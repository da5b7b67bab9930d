package kernel

import "github.com/mandatevm/mandate/kernel/kindapi"

// NewRootCapForTest mints a root capability held by no task.
func NewRootCapForTest(k *Kernel, kind string, s kindapi.Scope) (*Cap, error) {
	return k.newCap(k.kinds[kind], s, "", nil, nil, false, Constraints{})
}
