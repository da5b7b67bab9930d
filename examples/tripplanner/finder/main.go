// Command finder is the ticket-finder child: it holds only the search
// site (GET /search) and the trip's dates and cities, never the passport.
// It returns the offers it found as JSON.
package main

import (
	"net/url"

	"encoding/json"
	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

func main() {
	in, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	var trip struct {
		Fields struct{ From, To, Date string } `json:"fields"`
	}
	if err := json.Unmarshal(in, &trip); err != nil {
		panic(err)
	}
	search, err := mandate.Lookup("search")
	if err != nil {
		panic(err)
	}
	q := url.Values{"from": {trip.Fields.From}, "to": {trip.Fields.To}, "date": {trip.Fields.Date}}
	resp, err := mnet.Fetch(search, abi.HTTPRequest{Method: "GET", URL: "/search?" + q.Encode()})
	if err != nil {
		panic(err)
	}
	// The page may carry injected instructions; the finder has nothing to
	// leak and nowhere else to send it.
	if _, err := mandate.Lookup("airline"); err == nil {
		panic("the finder was given the airline")
	}
	mandate.SetResult(resp.Body)
}
