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
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	attack.ReadInput()
	card := attack.Must(mandate.Lookup("card"))
	try := func(k, payee string) {
		a, _ := json.Marshal(map[string]string{"payee": payee, "amount": "1.00", "currency": "USD", "idempotency_key": "payee-" + k})
		_, err := card.Call("charge", a)
		attack.Rec(k, err)
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
	attack.Rec("currency_space", err)
	a, _ = json.Marshal(map[string]string{"payee": "airline.example", "amount": "1.00", "currency": "EUR"})
	_, err = card.Call("charge", a)
	attack.Rec("currency_other", err)
	attack.Finish()
}
