// Command fetch-pay reads the order's status from "shop", then charges
// 12.00 to shop.example on its "card", and reports both. It is the run of
// the fleet's lease test: its GET is held while its node's lease expires,
// and the charge after it must not happen.
package main

import (
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/net"
)

func main() {
	shop, err := mandate.Lookup("shop")
	if err != nil {
		panic(err)
	}
	resp, err := net.Fetch(shop, abi.HTTPRequest{Method: "GET", URL: "/status"})
	if err != nil {
		mandate.SetResult([]byte("status: " + mandate.ErrnoOf(err).String()))
		return
	}
	card, err := mandate.Lookup("card")
	if err != nil {
		panic(err)
	}
	receipt, err := card.Call("charge", []byte(`{"payee":"shop.example","amount":"12.00","currency":"USD"}`))
	if err != nil {
		mandate.SetResult([]byte(fmt.Sprintf("status %d; charge: %s", resp.Status, mandate.ErrnoOf(err))))
		return
	}
	r, _ := receipt.Bytes()
	mandate.SetResult([]byte(fmt.Sprintf("status %d; paid %s", resp.Status, r)))
}
