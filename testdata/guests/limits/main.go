// Command limits pushes two of a task's limits and reports what the kernel
// answered, one errno per attempt, as JSON:
//
//	rate N     calls the test capability N times, then N times more through
//	           a capability derived from it (the derived one shares the
//	           rate of its ancestor)
//	blobs N K  creates K blobs of N bytes each, keeping them all, then drops
//	           one and creates one more
package main

import (
	"encoding/json"
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	in, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	var (
		mode string
		n, k int
	)
	fmt.Sscan(string(in), &mode, &n, &k)
	out := map[string][]int{}
	switch mode {
	case "rate":
		c, err := mandate.Lookup("test")
		if err != nil {
			panic(err)
		}
		for range n {
			out["root"] = append(out["root"], int(c.CallNoResult("noop", nil)))
		}
		d, err := c.Derive(map[string]any{"level": 1})
		if err != nil {
			panic(err)
		}
		for range n {
			out["derived"] = append(out["derived"], int(d.CallNoResult("noop", nil)))
		}
	case "blobs":
		data := make([]byte, n)
		var kept []mandate.Blob
		for range k {
			b, err := mandate.NewBlob(data)
			out["create"] = append(out["create"], int(mandate.ErrnoOf(err)))
			if err == nil {
				kept = append(kept, b)
			}
		}
		if len(kept) > 0 {
			kept[0].Drop()
		}
		b, err := mandate.NewBlob(data)
		out["after_drop"] = append(out["after_drop"], int(mandate.ErrnoOf(err)))
		if err == nil {
			b.Drop() // room for the result
		}
	default:
		panic("unknown mode " + mode)
	}
	res, _ := json.Marshal(out)
	if err := mandate.SetResult(res); err != nil {
		panic(err)
	}
}
