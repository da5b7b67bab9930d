// Command log-flood tries to flood the kernel's log and audit log: many
// refused calls with long, distinct op names and 1 MiB argument documents
// full of a marker. Every refusal is logged and audited (law 8), but no
// entry copies the guest's arguments (only a digest, never the bytes) and
// every reason is bounded, so the flood costs the host little per call.
package main

import (
	"bytes"
	"encoding/json"
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

const marker = "FLOODMARK"

func main() {
	attack.ReadInput()
	test := attack.Must(mandate.Lookup("test"))
	vault := attack.Must(mandate.Lookup("vault"))
	big := bytes.Repeat([]byte(marker), abi.MaxArgLen/len(marker))
	op := bytes.Repeat([]byte("Z"), abi.MaxOpLen)
	worst := map[string]abi.Errno{}
	for i := 0; i < 100; i++ {
		o := strconv.Itoa(i) + string(op)
		o = o[:abi.MaxOpLen]
		e := test.CallNoResult(o, big)
		if worst["unknown_op"] == 0 || e != abi.ENOTSUP {
			worst["unknown_op"] = e
		}
		_, err := test.Derive(big)
		if worst["derive_garbage"] == 0 || mandate.ErrnoOf(err) != abi.EINVAL {
			worst["derive_garbage"] = mandate.ErrnoOf(err)
		}
	}
	// An audited capability: the allow entry holds a digest, not the body.
	for i := 0; i < 20; i++ {
		req, _ := json.Marshal(abi.HTTPRequest{Method: "POST", URL: "/vault/flood?" + marker, Body: big[:512<<10]})
		_, err := vault.Call("fetch", req)
		attack.Rec("vault_big_body", err)
	}
	for k, e := range worst {
		attack.Set(k, e.String())
	}
	mandate.LastError()
	attack.Finish()
}
