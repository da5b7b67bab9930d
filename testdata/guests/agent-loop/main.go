// Command agent-loop is an agent on guest-sdk/agent: a model (an llm
// capability) books a flight for the traveller whose passport is the
// task's input, with three tools on two net capabilities. The passport is
// a reference, "$passport": the model is shown the name, the book tool
// splices the blob into the airline request and hands the answer on as a
// reference too ("$booking"), and the task never reads either. The share tool would post it to the listings site, which the kernel
// refuses (EFLOW); the model is told so and goes on. The result is the
// outcome as JSON, with the task's errors as text.
package main

import (
	"encoding/json"
	"net/url"
	"sort"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/agent"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

type searchArgs struct {
	Q string `json:"q" jsonschema:"what to search for, e.g. a destination"`
}

type shareArgs struct {
	Doc agent.BlobRef `json:"doc" jsonschema:"the document to post"`
}

type bookArgs struct {
	Flight   string        `json:"flight" jsonschema:"a flight id from search"`
	Passport agent.BlobRef `json:"passport" jsonschema:"the traveller's passport"`
}

type result struct {
	Final        string        `json:"final"`
	Err          string        `json:"err,omitempty"`
	Steps        []agent.Step  `json:"steps"`
	ToolMessages []string      `json:"tool_messages"`
	Usage        abi.ChatUsage `json:"usage"`
	Refs         []string      `json:"refs"`
}

func main() {
	model, err := mandate.Lookup("model")
	if err != nil {
		panic(err)
	}
	listings, _ := mandate.Lookup("listings")
	airline, _ := mandate.Lookup("airline")
	passport, err := mandate.Input() // labelled pii: never read
	if err != nil {
		panic(err)
	}

	search := agent.Tool("search", "Search the flight listings.", func(_ *agent.Ctx, a searchArgs) (string, error) {
		resp, err := mnet.Fetch(listings, abi.HTTPRequest{Method: "GET", URL: "/search?q=" + url.QueryEscape(a.Q)})
		if err != nil {
			return "", err
		}
		return string(resp.Body), nil
	})
	share := agent.Tool("share", "Post a document to the listings site.", func(_ *agent.Ctx, a shareArgs) (string, error) {
		resp, err := mnet.Fetch(listings, abi.HTTPRequest{Method: "POST", URL: "/search", BodyBlob: a.Doc.Handle()})
		if err != nil {
			return "", err
		}
		return string(resp.Body), nil
	})
	// The airline's answer to a request carrying the passport carries the
	// passport's label (it may echo it): it is handed on by reference too,
	// or reading it would raise the task's label and close the model to it.
	book := agent.Tool("book", "Book a flight for a traveller.", func(_ *agent.Ctx, a bookArgs) (agent.Reference, error) {
		body, _ := json.Marshal(map[string]string{"flight": a.Flight, "passport": abi.SplicePlaceholder(0)})
		resp, err := mnet.FetchBlob(airline, abi.HTTPRequest{Method: "POST", URL: "/book", Body: body,
			Header: map[string][]string{"Content-Type": {"application/json"}},
			Splice: []abi.Handle{a.Passport.Handle()}})
		if err != nil {
			return agent.Reference{}, err
		}
		return agent.Ref("booking", resp), nil
	})

	out, err := agent.Run(model, agent.Config{
		System:   "You book flights with the tools you have.",
		User:     "Book a flight to Lisbon for the traveller whose passport is $passport.",
		Refs:     []agent.Reference{agent.Ref("passport", passport)},
		Tools:    []agent.ToolDef{search, share, book},
		MaxSteps: 8,
	})
	res := result{Final: out.Final, Steps: out.Steps, Usage: out.Usage}
	if err != nil {
		res.Err = err.Error()
	}
	for _, m := range out.Transcript {
		if m.Role == "tool" {
			res.ToolMessages = append(res.ToolMessages, m.Content)
		}
	}
	for name := range out.Refs {
		res.Refs = append(res.Refs, name)
	}
	sort.Strings(res.Refs)
	b, _ := json.Marshal(res)
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}
