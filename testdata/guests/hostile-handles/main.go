// Command hostile-handles tries to use capabilities it was never given:
// invented handles, handles kept after drop and after revoke, a blob handle
// used as a capability, and a widening narrowing. It reports the errno of
// each attempt as its JSON result; the kernel must refuse every one.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	out := map[string]string{}
	rec := func(name string, err error) { out[name] = mandate.ErrnoOf(err).String() }

	c, err := mandate.Lookup("test")
	rec("lookup", err)
	_, err = mandate.Lookup("not-granted")
	rec("lookup_missing", err)

	// Invented handles: every slot of the index space, several generations.
	invented := "ESUCCESS"
	for _, h := range []abi.Handle{1, 2, 0x7fffffff, 0xffffffff, abi.MakeHandle(1, 1), abi.MakeHandle(4095, 1), c.Handle() + 1<<abi.HandleIndexBits} {
		if _, err := mandate.CapFromHandle(h).Call("noop", nil); err != nil {
			invented = mandate.ErrnoOf(err).String()
		} else {
			invented = "ESUCCESS"
			break
		}
	}
	out["invented"] = invented

	// Stale after drop.
	d, err := c.Derive(map[string]any{"level": 1})
	rec("derive", err)
	rec("drop", d.Drop())
	_, err = d.Call("noop", nil)
	rec("stale_after_drop", err)
	rec("double_drop", d.Drop())

	// Stale after revoke: revoking d2 revokes d3 derived from it.
	d2, _ := c.Derive(map[string]any{"level": 2})
	d3, _ := d2.Derive(map[string]any{"level": 1})
	rec("revoke", d2.Revoke())
	_, err = d3.Call("noop", nil)
	rec("child_after_revoke", err)
	_, err = d3.Derive(map[string]any{"level": 0})
	rec("derive_after_revoke", err)
	_, err = c.Call("noop", nil)
	rec("parent_after_child_revoke", err)

	// A blob is not a capability, and a capability is not a blob.
	b, _ := mandate.NewBlob([]byte("x"))
	_, err = mandate.CapFromHandle(b.Handle()).Call("noop", nil)
	rec("blob_as_cap", err)
	_, err = mandate.BlobFromHandle(c.Handle()).Bytes()
	rec("cap_as_blob", err)

	// Widening is refused, not clamped.
	_, err = c.Derive(map[string]any{"level": 99})
	rec("widen", err)
	_, err = c.Derive(map[string]any{"ops": []string{"noop", "format-disk"}})
	rec("widen_ops", err)
	_, err = c.Derive([]byte("{not json"))
	rec("derive_garbage", err)
	_, err = c.Call("format-disk", nil)
	rec("unknown_op", err)
	_, err = c.Call("panic", nil)
	rec("kind_panic", err)

	buf, _ := json.Marshal(out)
	mandate.SetResult(buf)
}
