// Package attack is what every hostile guest of the attack suite
// (testdata/attacks) shares: the input the suite hands each guest, and the
// report of what the kernel answered to each attempt, which the guest
// returns as its result (a JSON object: attempt name -> errno name, and
// "#name" -> a detail).
//
//	in := attack.ReadInput()
//	_, err := web.Call("fetch", req)
//	attack.Rec("fetch_evil", err) // "EDENIED"
//	attack.Finish()
package attack

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

// res collects each attempt's errno (keys) and details ("#" keys).
var res = map[string]string{}

// Rec records the errno of attempt k ("ESUCCESS" when err is nil).
func Rec(k string, err error) { res[k] = mandate.ErrnoOf(err).String() }

// Note records a detail under "#"+k.
func Note(k, v string) { res["#"+k] = v }

// Set records v under k as it is.
func Set(k, v string) { res[k] = v }

// Delete removes k from the report.
func Delete(k string) { delete(res, k) }

// Finish sets the report as the task's result.
func Finish() {
	b, _ := json.Marshal(res)
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}

// Input is what the suite passes every guest.
type Input struct {
	Granted     string            `json:"granted"`
	GrantedHost string            `json:"granted_host"`
	GrantedPort string            `json:"granted_port"`
	Evil        string            `json:"evil"`
	EvilPort    string            `json:"evil_port"`
	Self        string            `json:"self"`
	Digests     map[string]string `json:"digests"`
	Mode        string            `json:"mode"`
}

// ReadInput decodes the task's input.
func ReadInput() Input {
	var in Input
	b, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		panic(err)
	}
	return in
}

// Must returns c, or panics with err.
func Must(c mandate.Cap, err error) mandate.Cap {
	if err != nil {
		panic(err)
	}
	return c
}

// Has reports whether k was recorded.
func Has(k string) bool {
	_, ok := res[k]
	return ok
}

// Merge adds a report another task returned (a child's) to this one.
func Merge(report []byte) error { return json.Unmarshal(report, &res) }

// TryInput is ReadInput for guests that also run as children, which may be
// started with no input or one they only pass on: it returns the zero
// Input rather than panicking.
func TryInput() Input {
	var in Input
	if b, err := mandate.InputBytes(); err == nil {
		json.Unmarshal(b, &in)
	}
	return in
}
