// Package agent is an agent loop for Mandate guests: a model on an llm
// capability is offered tools, which are Go functions bound to the
// guest's capabilities; the loop runs the tools the model asks for and
// shows it the results until it answers.
//
// The model is the part of an agent that Mandate trusts least, and the
// loop treats it so: its tool arguments are decoded strictly against the
// schema it was shown (see Tool), and what it may do is what the tools'
// capabilities allow. A refusal is not a crash but an answer: the tool
// message reads "error: EDENIED: " and the kernel's reason, so the model
// can try something else.
//
// # References instead of values
//
// A tool may return a blob by reference (Ref) instead of by value: the
// model is shown {"ref":"$passport"}, never the bytes, and passes
// "$passport" to a later tool, whose BlobRef argument (or Ctx.Ref)
// resolves to the blob's handle. The tool splices the handle into a
// request (abi.HTTPRequest.Splice or BodyBlob), so the kernel moves the
// bytes and checks their label at the sink, and this task never reads
// them: its label does not rise, and its other capabilities (the model's
// among them) stay open to it. Reading a reference (Blob.Bytes) raises
// the task's label to the blob's; tools should splice.
//
// The answer to a request that spliced a blob carries that blob's label
// too (a server may echo what it was sent), so a tool that splices a
// reference hands the answer on by reference as well (net.FetchBlob, then
// Ref), as book does below. Had it read the answer, the task would carry
// the passport's label, and the next call to a model not cleared for it
// would be refused (EFLOW), ending the run.
//
// # Example
//
// A guest books a flight for the traveller whose passport is its input
// (labelled pii by the host), with two tools on two net capabilities:
//
//	flights, _ := mandate.Lookup("flights") // net: the search API
//	airline, _ := mandate.Lookup("airline") // net: booking, cleared for the pii
//	model, _ := mandate.Lookup("model")     // llm
//	passport, _ := mandate.Input()          // never read
//
//	type SearchArgs struct {
//		From string `json:"from" jsonschema:"IATA code of the departure airport"`
//		To   string `json:"to" jsonschema:"IATA code of the arrival airport"`
//		Date string `json:"date,omitempty" jsonschema:"YYYY-MM-DD; any day when left out"`
//	}
//	search := agent.Tool("search_flights", "Find one-way flights.",
//		func(ctx *agent.Ctx, a SearchArgs) (string, error) {
//			q := url.Values{"from": {a.From}, "to": {a.To}, "date": {a.Date}}
//			resp, err := net.Fetch(flights, abi.HTTPRequest{Method: "GET", URL: "/search?" + q.Encode()})
//			if err != nil {
//				return "", err // the model is shown "error: EDENIED: ..."
//			}
//			return string(resp.Body), nil
//		})
//
//	type BookArgs struct {
//		Flight   string        `json:"flight" jsonschema:"a flight id from search_flights"`
//		Passport agent.BlobRef `json:"passport" jsonschema:"the traveller's passport"`
//	}
//	book := agent.Tool("book", "Book a flight for a traveller.",
//		func(ctx *agent.Ctx, a BookArgs) (agent.Reference, error) {
//			body, _ := json.Marshal(map[string]string{"flight": a.Flight, "passport": abi.SplicePlaceholder(0)})
//			resp, err := net.FetchBlob(airline, abi.HTTPRequest{Method: "POST", URL: "/book", Body: body,
//				Splice: []abi.Handle{a.Passport.Handle()}}) // the kernel splices it in
//			if err != nil {
//				return agent.Reference{}, err
//			}
//			return agent.Ref("booking", resp), nil // unread: it carries the passport's label
//		})
//
//	out, err := agent.Run(model, agent.Config{
//		System: "You book flights. Use the tools.",
//		User:   "Book the cheapest flight from SFO to LIS for the traveller with passport $passport.",
//		Refs:   []agent.Reference{agent.Ref("passport", passport)},
//		Tools:  []agent.ToolDef{search, book},
//	})
//	if err != nil {
//		mandate.SetResult([]byte(err.Error()))
//		return
//	}
//	mandate.SetResult([]byte(out.Final)) // e.g. "Booked TP236: $booking."
//	// out.Refs["$booking"] is the airline's answer, unread.
//
// Each step is written to stderr (Config.OnStep), which `mandate run`
// shows in its log as the run goes:
//
//	agent: step 1 (412+31 tokens): 1 tool call
//	agent:   search_flights {"from":"SFO","to":"LIS"} -> [{"id":"TP236","price":412}]
//	agent: step 2 (498+27 tokens): 1 tool call
//	agent:   book {"flight":"TP236","passport":"$passport"} -> {"ref":"$booking"}
//	agent: step 3 (540+12 tokens): answer: Booked TP236: $booking.
//
// The model's answers come back labelled with everything it was shown,
// and tainted by the model; the loop reads them (llm.Chat), so this
// task's label rises to theirs: the task's own, what it spliced into the
// prompt (Config.Splice), and the model's integrity taint, never the
// references it only handed on.
//
// # Testing
//
// RunWith takes any Chatter in place of the capability, so a loop can be
// tested on the host with a scripted model (the SDK's host build fails
// every host call with ENOTSUP).
package agent
