// Command agent is the hotel-pick example's agent: an LLM agent
// (guest-sdk/agent) with two tools, the hotel catalogue and a hotel's
// reviews, each bound to its capability. Its answer is the model's final
// text; the kernel decides whether it may be the task's result (the
// manifest's result { refuses_taints }).
package main

import (
	"fmt"
	"os"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/agent"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

func main() {
	model, catalogue, reviews := lookup("model"), lookup("catalogue"), lookup("reviews")

	type NoArgs struct{}
	list := agent.Tool("list_hotels", "The hotel catalogue: each hotel's id, name, district and price a night.",
		func(ctx *agent.Ctx, _ NoArgs) (string, error) {
			resp, err := mnet.Fetch(catalogue, abi.HTTPRequest{Method: "GET", URL: "/hotels"})
			if err != nil {
				return "", err
			}
			return string(resp.Body), nil
		})
	type ReviewArgs struct {
		HotelID string `json:"hotel_id" jsonschema:"a hotel id from list_hotels"`
	}
	read := agent.Tool("read_reviews", "The guests' reviews of a hotel.",
		func(ctx *agent.Ctx, a ReviewArgs) (string, error) {
			resp, err := mnet.Fetch(reviews, abi.HTTPRequest{Method: "GET", URL: "/reviews/" + a.HotelID})
			if err != nil {
				return "", err
			}
			return string(resp.Body), nil
		})

	out, err := agent.Run(model, agent.Config{
		System: "You recommend hotels to Alice. Use the tools. Answer with one hotel and why.",
		User:   "Recommend a hotel in Lisbon for 3 nights, at most 150 EUR a night.",
		Tools:  []agent.ToolDef{list, read},
		OnStep: func(st agent.Step) {
			for _, c := range st.Calls {
				fmt.Fprintf(os.Stderr, "agent: step %d: %s(%s)\n", st.N, c.Tool, strings.Join(strings.Fields(c.Args), " "))
			}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	// The kernel refuses this result (EFLOW, audited) if it carries a
	// taint the manifest's result refuses; the run then fails, its error
	// naming the taint. What the task writes once its label carries one
	// is withheld from the run's output too.
	if err := mandate.SetResult([]byte(out.Final + "\n")); err != nil {
		// Withheld too: only `mandate logs RUN --stream stderr --raw`
		// shows it.
		fmt.Fprintf(os.Stderr, "agent: the answer was refused: %v\nagent: it was: %s\n", err, out.Final)
	}
}

func lookup(name string) mandate.Cap {
	c, err := mandate.Lookup(name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: capability %s: %v\n", name, err)
		os.Exit(1)
	}
	return c
}
