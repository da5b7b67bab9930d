// Command declassify projects its input (a record labelled pii by the
// host) through the "nationality" declassifier, reads only the result, and
// sends it to a public sink; it also tries to send the raw record.
package main

import (
	"encoding/json"
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	out := map[string]string{}
	rec := func(k string, err error) { out[k] = mandate.ErrnoOf(err).String() }
	in, _ := mandate.Input()
	dc, _ := mandate.Lookup("nationality")
	public, _ := mandate.Lookup("public")
	splice := func(b mandate.Blob) error {
		_, err := public.Call("splice", []byte(fmt.Sprintf(`{"blob":%d}`, b.Handle())))
		return err
	}
	rec("raw_to_public", splice(in))
	d, err := dc.Call("declassify", []byte(fmt.Sprintf(`{"blob":%d}`, in.Handle())))
	rec("declassify", err)
	b, err := d.Bytes()
	rec("read_declassified", err)
	out["declassified"] = string(b)
	rec("declassified_to_public", splice(d))
	_, err = public.Call("echo", []byte(`{}`))
	rec("public_after_reading_declassified", err)
	_, err = dc.Derive(map[string]any{"drop": []string{"pii:alice", "financial:alice"}})
	rec("widen", err)
	r, _ := json.Marshal(out)
	mandate.SetResult(r)
}
