package kerneltest

import (
	"slices"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// CheckNarrow narrows the last scope of chain by req with k and checks the
// law every kind's Narrow obeys, whatever the request: a refusal carries
// one of the errnos allowed (ok is false), and a child lies within every
// scope of chain (its parent and all their ancestors). Fuzz targets of the
// kinds call it, then check what is particular to their kind.
func CheckNarrow(t testing.TB, k kindapi.Kind, chain []kindapi.Scope, req []byte, allowed ...abi.Errno) (child kindapi.Scope, ok bool) {
	t.Helper()
	parent := chain[len(chain)-1]
	child, err := k.Narrow(parent, req)
	if err != nil {
		if e := kindapi.ErrnoOf(err); !slices.Contains(allowed, e) {
			t.Fatalf("Narrow(%s, %q): errno %s (%v), want one of %v", parent, req, e, err, allowed)
		}
		return nil, false
	}
	for i, a := range chain {
		if !a.Contains(child) {
			t.Fatalf("Narrow(%s, %q) = %s: not within ancestor %d %s", parent, req, child, i, a)
		}
	}
	return child, true
}
