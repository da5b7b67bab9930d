package agent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/agent"
)

// script is a scripted model: it answers with its replies in order and
// keeps a copy of every request, so a test can assert what the model saw.
type script struct {
	t       *testing.T
	replies []reply
	reqs    []abi.ChatRequest
}

type reply struct {
	resp abi.ChatResponse
	err  error
}

func (s *script) Chat(req abi.ChatRequest) (abi.ChatResponse, error) {
	cp := req
	cp.Messages = append([]abi.ChatMessage(nil), req.Messages...)
	s.reqs = append(s.reqs, cp)
	if len(s.replies) == 0 {
		s.t.Fatalf("the model was asked %d times; the script has no more answers", len(s.reqs))
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	return r.resp, r.err
}

// seen is everything the model was shown, as JSON.
func (s *script) seen() string {
	b, _ := json.Marshal(s.reqs)
	return string(b)
}

func calls(cs ...abi.ToolCall) reply {
	return reply{resp: abi.ChatResponse{Message: abi.ChatMessage{Role: "assistant", ToolCalls: cs},
		FinishReason: "tool_calls", Usage: abi.ChatUsage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}}}
}

func call(id, name, args string) abi.ToolCall {
	return abi.ToolCall{ID: id, Type: "function", Function: abi.FunctionCall{Name: name, Arguments: args}}
}

func text(s string) reply {
	return reply{resp: abi.ChatResponse{Message: abi.ChatMessage{Role: "assistant", Content: s},
		FinishReason: "stop", Usage: abi.ChatUsage{PromptTokens: 200, CompletionTokens: 5, TotalTokens: 205}}}
}

func quiet(agent.Step) {}

// toolMessages are the tool messages of the last request, by call id.
func toolMessages(req abi.ChatRequest) map[string]string {
	m := map[string]string{}
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			m[msg.ToolCallID] = msg.Content
		}
	}
	return m
}

type cityArgs struct {
	City string `json:"city"`
}

func TestDispatchOrderAndTranscript(t *testing.T) {
	var order []string
	weather := agent.Tool("weather", "The weather in a city.", func(ctx *agent.Ctx, a cityArgs) (string, error) {
		order = append(order, fmt.Sprintf("weather(%s)@%d/%s", a.City, ctx.Step, ctx.CallID))
		return "sunny in " + a.City, nil
	})
	type timeResult struct {
		City string `json:"city"`
		Hour int    `json:"hour"`
	}
	clock := agent.Tool("clock", "The local hour.", func(ctx *agent.Ctx, a cityArgs) (timeResult, error) {
		order = append(order, "clock("+a.City+")")
		return timeResult{a.City, 14}, nil
	})
	m := &script{t: t, replies: []reply{
		calls(call("c1", "weather", `{"city":"Lisbon"}`), call("c2", "clock", `{"city":"Lisbon"}`), call("c3", "weather", `{"city":"Porto"}`)),
		text("Sunny, 2pm."),
	}}
	temp := 0.2
	var steps []agent.Step
	out, err := agent.RunWith(m, agent.Config{
		Model: "qwen", System: "Be brief.", User: "Weather and time in Lisbon?", MaxTokens: 256, Temperature: &temp,
		Tools: []agent.ToolDef{weather, clock}, OnStep: func(s agent.Step) { steps = append(steps, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "weather(Lisbon)@1/c1 clock(Lisbon) weather(Porto)@1/c3"; strings.Join(order, " ") != want {
		t.Errorf("order %q, want %q", strings.Join(order, " "), want)
	}
	if out.Final != "Sunny, 2pm." || out.FinishReason != "stop" {
		t.Errorf("final %q (%s)", out.Final, out.FinishReason)
	}
	if len(m.reqs) != 2 {
		t.Fatalf("%d model calls", len(m.reqs))
	}
	first := m.reqs[0]
	if first.Model != "qwen" || first.MaxTokens != 256 || first.Temperature == nil || *first.Temperature != 0.2 {
		t.Errorf("request settings: %+v", first)
	}
	if len(first.Tools) != 2 || first.Tools[0].Function.Name != "weather" || first.Tools[0].Type != "function" ||
		first.Tools[0].Function.Description != "The weather in a city." ||
		string(first.Tools[0].Function.Parameters) != `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}` {
		t.Errorf("tools offered: %+v", first.Tools)
	}
	if len(first.Messages) != 2 || first.Messages[0].Role != "system" || first.Messages[1].Role != "user" {
		t.Errorf("first transcript: %+v", first.Messages)
	}
	second := m.reqs[1].Messages
	var roles []string
	for _, msg := range second {
		roles = append(roles, msg.Role+":"+msg.ToolCallID)
	}
	if want := "system: user: assistant: tool:c1 tool:c2 tool:c3"; strings.Join(roles, " ") != want {
		t.Errorf("second transcript %q, want %q", strings.Join(roles, " "), want)
	}
	if got := second[2].ToolCalls; len(got) != 3 || got[1].ID != "c2" || got[1].Function.Name != "clock" {
		t.Errorf("the assistant's calls repeated: %+v", got)
	}
	for i, want := range []string{"sunny in Lisbon", `{"city":"Lisbon","hour":14}`, "sunny in Porto"} {
		if second[3+i].Content != want {
			t.Errorf("tool message %d: %q, want %q", i, second[3+i].Content, want)
		}
	}
	if len(steps) != 2 || len(out.Steps) != 2 || len(steps[0].Calls) != 3 || !steps[1].Final || steps[0].Final {
		t.Fatalf("steps: %+v", steps)
	}
	if c := steps[0].Calls[1]; c.Tool != "clock" || c.Args != `{"city":"Lisbon"}` || c.Result != `{"city":"Lisbon","hour":14}` || c.Failed {
		t.Errorf("call record: %+v", c)
	}
	if steps[0].Usage.PromptTokens != 100 || out.Usage.TotalTokens != 315 || out.Usage.CompletionTokens != 15 {
		t.Errorf("usage: step %+v, total %+v", steps[0].Usage, out.Usage)
	}
	if n := len(out.Transcript); n != 7 || out.Transcript[6].Content != "Sunny, 2pm." {
		t.Errorf("outcome transcript: %d messages", n)
	}
}

// kernelErr is what the SDK returns for a refused host call.
func kernelErr(e abi.Errno, reason string) error {
	return &mandate.Error{Errno: e, Call: abi.CapCallName, Reason: reason}
}

func TestToolErrorsFedBack(t *testing.T) {
	type noArgs struct{}
	errs := map[string]error{
		"denied":   kernelErr(abi.EDENIED, "net: fetch: path /admin is not in the capability's paths (/search)"),
		"wrapped":  fmt.Errorf("mandate net: GET /x: %w", kernelErr(abi.EFLOW, "net: fetch: data labelled pii:alice may not flow to https://listings.example")),
		"budget":   kernelErr(abi.ELIMIT, "budget: 3 of 3 uses spent"),
		"noreason": kernelErr(abi.EREVOKED, ""),
		"plain":    errors.New("the API answered 503"),
	}
	var tools []agent.ToolDef
	for name, err := range errs {
		err := err
		tools = append(tools, agent.Tool(name, "fails", func(*agent.Ctx, noArgs) (string, error) { return "", err }))
	}
	tools = append(tools, agent.Tool("panics", "panics", func(*agent.Ctx, noArgs) (string, error) { panic("index out of range") }))
	m := &script{t: t, replies: []reply{
		calls(call("1", "denied", "{}"), call("2", "wrapped", "{}"), call("3", "budget", ""), call("4", "noreason", "{}"),
			call("5", "plain", "{}"), call("6", "panics", "{}")),
		text("I could not do it."),
	}}
	out, err := agent.RunWith(m, agent.Config{User: "go", Tools: tools, OnStep: quiet})
	if err != nil {
		t.Fatal(err)
	}
	got := toolMessages(m.reqs[1])
	for id, want := range map[string]string{
		"1": "error: EDENIED: net: fetch: path /admin is not in the capability's paths (/search)",
		"2": "error: EFLOW: net: fetch: data labelled pii:alice may not flow to https://listings.example",
		"3": "error: ELIMIT: budget: 3 of 3 uses spent",
		"4": "error: EREVOKED: cap_call: EREVOKED",
		"5": "error: the API answered 503",
		"6": "error: the tool failed: panic: index out of range",
	} {
		if got[id] != want {
			t.Errorf("call %s: the model was shown %q, want %q", id, got[id], want)
		}
	}
	cs := out.Steps[0].Calls
	for i, want := range []abi.Errno{abi.EDENIED, abi.EFLOW, abi.ELIMIT, abi.EREVOKED, abi.ESUCCESS, abi.ESUCCESS} {
		if !cs[i].Failed || cs[i].Errno != want {
			t.Errorf("call %d record: %+v, want failed with %s", i, cs[i], want)
		}
	}
	if out.Final != "I could not do it." {
		t.Errorf("final %q", out.Final)
	}
}

type bookArgs struct {
	Flight     string    `json:"flight"`
	Passengers []person  `json:"passengers"`
	Seats      [2]string `json:"seats"`
	Bags       int8      `json:"bags"`
	Note       *string   `json:"note"`
	Priority   bool      `json:"priority,omitempty"`
}

type person struct {
	Name string `json:"name"`
	Age  uint   `json:"age,omitempty"`
}

func TestBadArgumentsAreToolErrors(t *testing.T) {
	ran := 0
	book := agent.Tool("book", "Book.", func(_ *agent.Ctx, a bookArgs) (string, error) {
		ran++
		return "booked " + a.Flight, nil
	})
	good := `{"flight":"TP1","passengers":[{"name":"Ann"}],"seats":["1A","1B"],"bags":1,"note":null}`
	cases := []struct{ args, want string }{
		{`{"flight":`, `invalid JSON at offset 10: unexpected end of document`},
		{`not json`, `invalid JSON at offset 0`},
		{`[]`, `$: want an object, got an array`},
		{`null`, `$: want an object, got null`},
		{`"{}"`, `$: want an object, got a string`},
		{strings.Replace(good, `"bags":1`, `"bags":1,"admin":true`, 1), `$: unknown property "admin" (properties: flight, passengers, seats, bags, note, priority)`},
		{strings.Replace(good, `"flight":"TP1"`, `"FLIGHT":"TP1"`, 1), `$: missing required property "flight"`},
		{strings.Replace(good, `"TP1"`, `7`, 1), `$.flight: want a string, got an integer`},
		{strings.Replace(good, `"TP1"`, `null`, 1), `$.flight: want a string, got null`},
		{strings.Replace(good, `{"name":"Ann"}`, `{"name":"Ann","role":"pilot"}`, 1), `$.passengers[0]: unknown property "role" (properties: name, age)`},
		{strings.Replace(good, `{"name":"Ann"}`, `{}`, 1), `$.passengers[0]: missing required property "name"`},
		{strings.Replace(good, `{"name":"Ann"}`, `{"name":"Ann","age":-1}`, 1), `$.passengers[0].age: -1 is out of range [0, 18446744073709551615]`},
		{strings.Replace(good, `"bags":1`, `"bags":300`, 1), `$.bags: 300 is out of range [-128, 127]`},
		{strings.Replace(good, `"bags":1`, `"bags":1.5`, 1), `$.bags: want an integer, got a number`},
		{strings.Replace(good, `["1A","1B"]`, `["1A"]`, 1), `$.seats: want an array of exactly 2 items, got 1`},
		{strings.Replace(good, `"bags":1`, `"bags":1,"bags":2`, 1), `duplicate key "bags" in object at $`},
		{good + ` {}`, `trailing data`},
		{`{"flight":"TP1","passengers":[],"seats":["a","b"],"bags":1,"note":"` + strings.Repeat("x", 70<<10) + `"}`, `the arguments are 71749 bytes (at most 65536)`},
		{"{\"flight\":\"\xff\"}", `invalid UTF-8 byte 0xff in string at $.flight`},
	}
	var cs []abi.ToolCall
	for i, c := range cases {
		cs = append(cs, call(fmt.Sprint(i), "book", c.args))
	}
	cs = append(cs, call("ok", "book", good))
	m := &script{t: t, replies: []reply{calls(cs...), text("done")}}
	if _, err := agent.RunWith(m, agent.Config{User: "book", Tools: []agent.ToolDef{book}, OnStep: quiet}); err != nil {
		t.Fatal(err)
	}
	got := toolMessages(m.reqs[1])
	for i, c := range cases {
		msg := got[fmt.Sprint(i)]
		if !strings.HasPrefix(msg, "error: invalid arguments for book: ") || !strings.Contains(msg, c.want) {
			t.Errorf("args %.80q: the model was shown %q, want it to say %q", c.args, msg, c.want)
		}
	}
	if got["ok"] != "booked TP1" || ran != 1 {
		t.Errorf("the good call: %q; the tool ran %d times, want once", got["ok"], ran)
	}
}
