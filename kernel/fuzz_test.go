package kernel

import (
	"encoding/json"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// FuzzSplitKernelReq: taking the kernel's attributes (when, approve_when,
// max_uses, budget) off a derive request never panics, errors are EINVAL,
// and what is left for the kind has none of them.
func FuzzSplitKernelReq(f *testing.F) {
	for _, s := range []string{
		`{"methods":["GET"],"when":"request.method == \"GET\""}`, `{"when":["a","","b"],"approve_when":"x"}`,
		`{"when":1}`, `{"approve_when":[1]}`, `{}`, `[`, `{"when":null}`, `{"paths":["/a"]}`,
		`{"max_uses":1}`, `{"max_uses":-1,"budget":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := splitKernelReq(b)
		if err != nil || m == nil {
			return
		}
		for _, key := range []string{"when", "approve_when"} {
			if _, err := takeExprs(m, key); err != nil && kindapi.ErrnoOf(err) != abi.EINVAL {
				t.Fatalf("takeExprs(%q, %s): errno %s", b, key, kindapi.ErrnoOf(err))
			}
			if _, ok := m[key]; ok {
				t.Fatalf("takeExprs(%q): %s kept", b, key)
			}
		}
		rest, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("remarshal of %q: %v", b, err)
		}
		var back map[string]json.RawMessage
		if err := json.Unmarshal(rest, &back); err != nil {
			t.Fatalf("rest %q of %q is not an object: %v", rest, b, err)
		}
	})
}
