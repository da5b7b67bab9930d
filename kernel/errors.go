package kernel

import (
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// isDenial reports whether err is a refusal (audited, counted, logged as
// "denied") rather than a failure of the effect: the guest asked for
// something its handles, scopes, limits, labels or approvers do not allow.
func isDenial(err error) bool {
	switch kindapi.ErrnoOf(err) {
	case abi.EBADHANDLE, abi.EDENIED, abi.EREVOKED, abi.EEXPIRED, abi.EFLOW,
		abi.ELIMIT, abi.EAPPROVAL, abi.EWRONGTYPE:
		return true
	}
	return false
}
