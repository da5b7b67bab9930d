// Command pay-fetch charges 12.00 to shop.example on its "card", with no
// idempotency key of its own (the kernel's: auto-1 under the run's seed),
// then reads the order's status from "shop", and reports both. It is the
// retried run of the fleet's tests: every effect repeatable.
package main

import (
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/net"
)

func main() {
	card, err := mandate.Lookup("card")
	if err != nil {
		panic(err)
	}
	receipt, err := card.Call("charge", []byte(`{"payee":"shop.example","amount":"12.00","currency":"USD"}`))
	if err != nil {
		mandate.SetResult([]byte("charge: " + mandate.ErrnoOf(err).String()))
		return
	}
	r, _ := receipt.Bytes()
	shop, err := mandate.Lookup("shop")
	if err != nil {
		panic(err)
	}
	resp, err := net.Fetch(shop, abi.HTTPRequest{Method: "GET", URL: "/status"})
	if err != nil {
		mandate.SetResult([]byte(fmt.Sprintf("paid %s; status: %s", r, mandate.ErrnoOf(err))))
		return
	}
	mandate.SetResult([]byte(fmt.Sprintf("paid %s; status %d %s", r, resp.Status, resp.Body)))
}
