// Command planner is Alice's stay booker: an LLM agent (guest-sdk/agent)
// whose tools are bound to its capabilities. It never reads the passport:
// the model knows it as the reference $passport, and the booking tool
// splices it into the booking request by handle, so the kernel carries it
// to the one sink cleared for it. Each listing is read by a reader child
// that hands back only a closed-schema summary.
package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/agent"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

type listing struct {
	ID            string  `json:"id"`
	Title         string  `json:"title"`
	PricePerNight float64 `json:"price_per_night"`
	Description   string  `json:"description"`
}

func main() {
	var (
		model       = lookup("model")
		readerModel = lookup("reader_model")
		listings    = lookup("listings")
		profile     = lookup("profile")
		booking     = lookup("booking")
		readers     = lookup("readers")
	)
	// The passport, as a handle: never read here.
	passport, err := profile.Call("read", []byte(`{"owner":"alice","fields":["name","passport"]}`))
	if err != nil {
		fail(err)
	}
	seen := map[string]listing{} // what search_listings returned, by id

	type SearchArgs struct {
		City string `json:"city" jsonschema:"the city to search, or a reference"`
	}
	search := agent.Tool("search_listings", "Search stays in a city. Returns listings with their price per night.",
		func(ctx *agent.Ctx, a SearchArgs) (string, error) {
			req := abi.HTTPRequest{Method: "GET", URL: "/search?city=" + url.QueryEscape(a.City)}
			if b, err := ctx.Ref(a.City); err == nil && strings.HasPrefix(a.City, "$") {
				// A reference: the kernel splices it in (and checks where it may go).
				req.URL, req.Splice = "/search?city="+abi.SplicePlaceholder(0), []abi.Handle{b.Handle()}
			}
			resp, err := mnet.Fetch(listings, req)
			if err != nil {
				return "", err
			}
			var found []listing
			if err := json.Unmarshal(resp.Body, &found); err != nil {
				return "", fmt.Errorf("the listings site answered %d: not a list of listings", resp.Status)
			}
			var b strings.Builder
			for _, l := range found {
				seen[l.ID] = l
				fmt.Fprintf(&b, "%s: %s, %g EUR a night. %s\n", l.ID, l.Title, l.PricePerNight, l.Description)
			}
			return b.String(), nil
		})

	type FetchArgs struct {
		URL string `json:"url" jsonschema:"the page to fetch"`
	}
	fetch := agent.Tool("fetch_page", "Fetch a web page on the listings site.",
		func(ctx *agent.Ctx, a FetchArgs) (string, error) {
			resp, err := mnet.Fetch(listings, abi.HTTPRequest{Method: "GET", URL: a.URL})
			if err != nil {
				return "", err
			}
			return string(resp.Body), nil
		})

	type ReadArgs struct {
		ListingID string `json:"listing_id" jsonschema:"a listing id from search_listings"`
	}
	var desc struct {
		Scope struct{ Modules []string } `json:"scope"`
	}
	if b, err := readers.Describe(); err != nil || json.Unmarshal(b, &desc) != nil || len(desc.Scope.Modules) == 0 {
		fail(fmt.Errorf("the readers capability names no module"))
	}
	read := agent.Tool("read_listing", "Have a reader check a listing's reviews: returns its rating (1-5) and whether it has wifi.",
		func(ctx *agent.Ctx, a ReadArgs) (json.RawMessage, error) {
			if _, ok := seen[a.ListingID]; !ok {
				return nil, fmt.Errorf("unknown listing %q: search first", a.ListingID)
			}
			narrow, _ := json.Marshal(map[string]any{"paths": []string{"/listing/" + a.ListingID}})
			child, err := mandate.Spawn(readers, abi.SpawnRequest{
				Module: desc.Scope.Modules[0],
				Caps: []abi.SpawnCap{
					{Handle: listings.Handle(), Name: "page", Narrow: narrow},
					{Handle: readerModel.Handle(), Name: "model", Narrow: json.RawMessage(`{"max_tokens":128}`)},
				},
				Timeout:   "30s",
				Clearance: &[]string{},
			})
			if err != nil {
				return nil, err
			}
			res, err := child.Wait()
			if err != nil {
				return nil, err
			}
			return res.Bytes()
		})

	type BookArgs struct {
		ListingID string        `json:"listing_id" jsonschema:"the listing to book"`
		Passport  agent.BlobRef `json:"passport" jsonschema:"the traveller's passport reference"`
	}
	book := agent.Tool("book", "Book 3 nights at a listing for the traveller.",
		func(ctx *agent.Ctx, a BookArgs) (map[string]any, error) {
			l, ok := seen[a.ListingID]
			if !ok {
				return nil, fmt.Errorf("unknown listing %q: search first", a.ListingID)
			}
			body := fmt.Sprintf(`{"listing_id":%q,"nights":3,"price_per_night":%g,"guest":%s}`,
				l.ID, l.PricePerNight, abi.SplicePlaceholder(0))
			// The confirmation carries the passport's label (the API may
			// echo it): it goes back as a reference, unread, or this task
			// could no longer talk to a model cleared for public data.
			conf, err := mnet.FetchBlob(booking, abi.HTTPRequest{Method: "POST", URL: "/book", Body: []byte(body),
				Header: map[string][]string{"Content-Type": {"application/json"}}, Splice: []abi.Handle{a.Passport.Handle()}})
			if err != nil {
				return nil, err
			}
			return map[string]any{"booked": l.ID, "confirmation": agent.Ref("confirmation", conf)}, nil
		})

	out, err := agent.Run(model, agent.Config{
		System: "You book stays for Alice. Use the tools. Never book more than once.",
		User: "Find a stay in Lisbon for 3 nights, at most 150 EUR a night, well rated, with wifi, " +
			"and book it for the traveller whose passport is $passport.",
		Refs:  []agent.Reference{agent.Ref("passport", passport)},
		Tools: []agent.ToolDef{search, fetch, read, book},
	})
	var report strings.Builder
	for _, st := range out.Steps {
		for _, c := range st.Calls {
			status := "ok"
			if c.Failed {
				status = "refused"
				if c.Errno != 0 {
					status = "refused: " + c.Errno.String()
				}
			}
			if c.Tool == "read_listing" && !c.Failed {
				status += ": " + oneLine(c.Result) // a closed-schema summary, endorsed
			}
			fmt.Fprintf(&report, "step %d: %s(%s): %s\n", st.N, c.Tool, oneLine(c.Args), status)
		}
	}
	fmt.Fprintf(&report, "tokens: %d prompt, %d completion\n", out.Usage.PromptTokens, out.Usage.CompletionTokens)
	if err != nil {
		// No final answer (the budget, a bound, the model unreachable, out
		// of steps): the run fails, with what was done as its result and
		// the reason as the last line on stderr, which the kernel quotes.
		fmt.Fprintf(&report, "stopped: %v\n", err)
		mandate.SetResult([]byte(report.String()))
		fmt.Fprintln(os.Stderr, "planner:", err)
		os.Exit(1)
	}
	fmt.Fprintf(&report, "answer: %s\n", oneLine(out.Final))
	mandate.SetResult([]byte(report.String()))
}

func lookup(name string) mandate.Cap {
	c, err := mandate.Lookup(name)
	if err != nil {
		fail(fmt.Errorf("capability %s: %w", name, err))
	}
	return c
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "planner:", err)
	mandate.SetResult([]byte("failed: " + err.Error() + "\n"))
	os.Exit(1)
}
