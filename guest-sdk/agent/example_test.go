package agent_test

import (
	"encoding/json"
	"net/url"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/agent"
	"github.com/mandatevm/mandate/guest-sdk/net"
)

type SearchArgs struct {
	From string `json:"from" jsonschema:"IATA code of the departure airport"`
	To   string `json:"to" jsonschema:"IATA code of the arrival airport"`
	Date string `json:"date,omitempty" jsonschema:"YYYY-MM-DD; any day when left out"`
}

type BookArgs struct {
	Flight   string        `json:"flight" jsonschema:"a flight id from search_flights"`
	Passport agent.BlobRef `json:"passport" jsonschema:"the traveller's passport"`
}

// A guest books a flight for the traveller whose passport is its input,
// with two tools on two net capabilities. The passport is a reference:
// the model sees "$passport", the book tool splices the blob, and the
// airline's answer, which carries the passport's label, is handed on
// unread as "$booking".
func ExampleRun() {
	flights, _ := mandate.Lookup("flights") // net: the search API
	airline, _ := mandate.Lookup("airline") // net: booking, cleared for the pii
	model, _ := mandate.Lookup("model")     // llm
	passport, _ := mandate.Input()          // never read

	search := agent.Tool("search_flights", "Find one-way flights.",
		func(ctx *agent.Ctx, a SearchArgs) (string, error) {
			q := url.Values{"from": {a.From}, "to": {a.To}, "date": {a.Date}}
			resp, err := net.Fetch(flights, abi.HTTPRequest{Method: "GET", URL: "/search?" + q.Encode()})
			if err != nil {
				return "", err // the model is shown "error: EDENIED: ..."
			}
			return string(resp.Body), nil
		})
	book := agent.Tool("book", "Book a flight for a traveller.",
		func(ctx *agent.Ctx, a BookArgs) (agent.Reference, error) {
			body, _ := json.Marshal(map[string]string{"flight": a.Flight, "passport": abi.SplicePlaceholder(0)})
			resp, err := net.FetchBlob(airline, abi.HTTPRequest{Method: "POST", URL: "/book", Body: body,
				Splice: []abi.Handle{a.Passport.Handle()}}) // the kernel splices it in
			if err != nil {
				return agent.Reference{}, err
			}
			return agent.Ref("booking", resp), nil // unread: it carries the passport's label
		})

	out, err := agent.Run(model, agent.Config{
		System: "You book flights. Use the tools.",
		User:   "Book the cheapest flight from SFO to LIS for the traveller with passport $passport.",
		Refs:   []agent.Reference{agent.Ref("passport", passport)},
		Tools:  []agent.ToolDef{search, book},
	})
	if err != nil {
		mandate.SetResult([]byte(err.Error()))
		return
	}
	mandate.SetResult([]byte(out.Final)) // e.g. "Booked TP236: $booking."
}
