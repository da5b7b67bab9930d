// Command planner is the trip planner. It holds the itinerary (whose
// passport field it never reads), the flights search site, the airline's
// booking API, a payment token carrying Alice's intent, and the right to
// spawn the finder. It reports each step as a line of its result.
package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

type offer struct {
	ID            string  `json:"id"`
	Airline       string  `json:"airline"`
	Price         string  `json:"price"`
	DurationHours float64 `json:"duration_hours"`
	Stops         int     `json:"stops"`
	Note          string  `json:"note,omitempty"`
}

var report strings.Builder

func say(f string, a ...any) { fmt.Fprintf(&report, f+"\n", a...) }

func must[T any](v T, err error) T {
	if err != nil {
		say("failed: %v", err)
		mandate.SetResult([]byte(report.String()))
		panic(err)
	}
	return v
}

func main() {
	itin := must(mandate.Lookup("itinerary"))
	flights := must(mandate.Lookup("flights"))
	airline := must(mandate.Lookup("airline"))
	card := must(mandate.Lookup("card"))
	children := must(mandate.Lookup("children"))

	// 1. The dates and cities: public fields, read.
	trip := must(itin.Call("read", []byte(`{"owner":"alice","fields":["from","to","date"]}`)))
	tb := must(trip.Bytes())
	say("itinerary: %s", tb)
	// 2. The passport: a blob handle, never read.
	passport := must(itin.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`)))
	say("passport: held as handle %#x, not read", uint32(passport.Handle()))

	// 3. The finder gets the search site (GET /search only) and the trip.
	// Which module it is, the spawn capability says.
	var desc struct {
		Scope struct{ Modules []string } `json:"scope"`
	}
	must(0, json.Unmarshal(must(children.Describe()), &desc))
	finder := must(mandate.Spawn(children, abi.SpawnRequest{
		Module: desc.Scope.Modules[0],
		Input:  trip.Handle(),
		Caps: []abi.SpawnCap{{Handle: flights.Handle(), Name: "search",
			Narrow: json.RawMessage(`{"methods":["GET"],"paths":["/search"]}`)}},
		Timeout: "20s",
		// Public data only: the finder can never hold the passport, not
		// even by handle, and the graph shows its clearance.
		Clearance: &[]string{},
	}))
	res := must(finder.Wait())
	var offers []offer
	must(0, json.Unmarshal(must(res.Bytes()), &offers))
	sort.Slice(offers, func(i, j int) bool { return offers[i].Price < offers[j].Price })
	say("finder returned %d offers", len(offers))

	// 4. Pay for the cheapest offer the token allows.
	var chosen *offer
	for i := range offers {
		o := offers[i]
		args, _ := json.Marshal(map[string]any{
			"payee": o.Airline, "amount": o.Price, "currency": "USD",
			"idempotency_key": "alice-" + o.ID, "description": "flight " + o.ID,
			"offer": map[string]any{"id": o.ID, "duration_hours": o.DurationHours, "stops": o.Stops},
		})
		receipt, err := card.Call("charge", args)
		if err != nil {
			say("charge %s (%s USD, %gh, %d stops): refused: %s", o.ID, o.Price, o.DurationHours, o.Stops, mandate.ErrnoOf(err))
			continue
		}
		say("charge %s (%s USD, %gh, %d stops): paid: %s", o.ID, o.Price, o.DurationHours, o.Stops, must(receipt.Bytes()))
		chosen = &o
		break
	}
	if chosen == nil {
		say("no offer within Alice's intent")
		mandate.SetResult([]byte(report.String()))
		return
	}

	// 5. A hotel to suggest: the token pays airline.example only, so the
	// planner can look but not pay.
	hotels := must(mandate.Lookup("hotels"))
	h := must(mnet.Fetch(hotels, abi.HTTPRequest{Method: "GET", URL: "/hotels?city=LIS"}))
	say("hotel suggestion: %s", strings.TrimSpace(string(h.Body)))
	args, _ := json.Marshal(map[string]any{"payee": "hotel.example", "amount": "120.00", "currency": "USD",
		"offer": map[string]any{"duration_hours": 0, "stops": 0}})
	if _, err := card.Call("charge", args); err != nil {
		say("charge hotel.example 120.00 USD: refused: %s", mandate.ErrnoOf(err))
	}

	// 6. Book, splicing the passport into the request by handle. Last: the
	// airline was sent the passport, so its answer may carry it and is
	// labelled pii:alice; once the planner reads the confirmation it may
	// no longer talk to the search or hotel sites.
	resp := must(mnet.Fetch(airline, abi.HTTPRequest{Method: "POST", URL: "/book?offer=" + chosen.ID, BodyBlob: passport.Handle(),
		Header: map[string][]string{"Content-Type": {"application/json"}}}))
	say("booked %s: %d %s", chosen.ID, resp.Status, strings.TrimSpace(string(resp.Body)))

	mandate.SetResult([]byte(report.String()))
}
