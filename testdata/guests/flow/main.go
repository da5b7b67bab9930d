// Command flow tries to move its input (labelled pii by the host) to sinks
// with and without the clearance for it, before and after reading it.
package main

import (
	"encoding/json"
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	out := map[string]string{}
	rec := func(k string, err error) { out[k] = mandate.ErrnoOf(err).String() }
	public, _ := mandate.Lookup("public")
	cleared, _ := mandate.Lookup("cleared")
	in, err := mandate.Input()
	rec("input", err)
	splice := func(c mandate.Cap, b mandate.Blob) error {
		_, err := c.Call("splice", []byte(fmt.Sprintf(`{"blob":%d}`, b.Handle())))
		return err
	}
	// Unread: the task is still public and may forward the blob by handle
	// only where the blob may go.
	rec("splice_unread_public", splice(public, in))
	rec("splice_unread_cleared", splice(cleared, in))
	_, err = public.Call("echo", []byte(`{"hello":1}`))
	rec("echo_public_before_read", err)
	// Read it: the task's label rises.
	_, err = in.Bytes()
	rec("read", err)
	_, err = public.Call("echo", []byte(`{"hello":1}`))
	rec("echo_public_after_read", err)
	_, err = cleared.Call("echo", []byte(`{"hello":1}`))
	rec("echo_cleared_after_read", err)
	// Re-wrapping does not launder: a new blob carries the task's label.
	w, _ := mandate.NewBlob([]byte("innocent"))
	rec("splice_rewrapped_public", splice(public, w))
	// Narrowing cannot widen a sink's clearance.
	_, err = public.Derive(map[string]any{"clearance": []string{"pii:alice"}})
	rec("widen_clearance", err)
	b, _ := json.Marshal(out)
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}
