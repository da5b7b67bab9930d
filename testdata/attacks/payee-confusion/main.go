// Command payee-confusion charges look-alikes of the one allowed payee,
// airline.example: a suffix and a prefix domain, a trailing dot, a path,
// userinfo, a Cyrillic homoglyph, punycode, whitespace and NUL, and the
// same name in upper case (the one that is the same payee). Payees are
// canonicalised and matched exactly (caps/pay): EDENIED or EINVAL; the
// provider sees only airline.example.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	readInput()
	card := must(mandate.Lookup("card"))
	try := func(k, payee string) {
		a, _ := json.Marshal(map[string]string{"payee": payee, "amount": "1.00", "currency": "USD", "idempotency_key": "payee-" + k})
		_, err := card.Call("charge", a)
		rec(k, err)
	}
	try("suffix", "airline.example.evil.example")
	try("prefix", "evil-airline.example")
	try("trailing_dot", "airline.example.")
	try("path", "evil.example/airline.example")
	try("userinfo", "airline.example@evil.example")
	try("homoglyph", "аirline.example") // Cyrillic a
	try("punycode", "xn--irline-3ve.example")
	try("space", " airline.example")
	try("nul", "airline.example\x00evil")
	try("newline", "airline.example\nevil.example")
	try("empty", "")
	try("wildcard", "*")
	try("upper", "AIRLINE.EXAMPLE") // the same payee
	// Currency confusion.
	a, _ := json.Marshal(map[string]string{"payee": "airline.example", "amount": "1.00", "currency": "usd "})
	_, err := card.Call("charge", a)
	rec("currency_space", err)
	a, _ = json.Marshal(map[string]string{"payee": "airline.example", "amount": "1.00", "currency": "EUR"})
	_, err = card.Call("charge", a)
	rec("currency_other", err)
	finish()
}

// res collects each attempt's errno (keys) and details ("#" keys).
var res = map[string]string{}

func rec(k string, err error) { res[k] = mandate.ErrnoOf(err).String() }

func note(k, v string) { res["#"+k] = v }

func finish() {
	b, _ := json.Marshal(res)
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}

type input struct {
	Granted     string            `json:"granted"`
	GrantedHost string            `json:"granted_host"`
	GrantedPort string            `json:"granted_port"`
	Evil        string            `json:"evil"`
	EvilPort    string            `json:"evil_port"`
	Self        string            `json:"self"`
	Digests     map[string]string `json:"digests"`
	Mode        string            `json:"mode"`
}

func readInput() input {
	var in input
	b, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		panic(err)
	}
	return in
}

func must(c mandate.Cap, err error) mandate.Cap {
	if err != nil {
		panic(err)
	}
	return c
}
