package fakellm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestScriptOrder(t *testing.T) {
	s := start(t, WithScript(
		Calls(CallTool("search", map[string]any{"q": "LIS"}), Call{Name: "weather", Arguments: `{"city":"Lisbon"}`}),
		Text("Two flights."),
		JSON(map[string]any{"ok": true}),
	))
	req := ChatRequest{Model: "m1", Messages: []Message{user("flights to Lisbon")}}

	a := chat(t, s, req)
	c := a.Choices[0]
	if c.FinishReason != FinishToolCalls || c.Message.Content != nil || len(c.Message.ToolCalls) != 2 {
		t.Fatalf("answer 1 = %+v, want two tool calls, content null", c)
	}
	want := []ToolCall{
		{ID: "call_1_0", Type: "function", Function: FunctionCall{Name: "search", Arguments: `{"q":"LIS"}`}},
		{ID: "call_1_1", Type: "function", Function: FunctionCall{Name: "weather", Arguments: `{"city":"Lisbon"}`}},
	}
	for i, w := range want {
		if got := c.Message.ToolCalls[i]; got != w {
			t.Errorf("call %d = %+v, want %+v", i, got, w)
		}
	}
	if a.ID != "chatcmpl-fake-1" || a.Object != "chat.completion" || a.Model != "m1" || a.Created != created {
		t.Errorf("envelope = %+v", a)
	}

	if a := chat(t, s, req); a.Choices[0].Message.Text() != "Two flights." || a.Choices[0].FinishReason != FinishStop {
		t.Errorf("answer 2 = %+v, want text", a.Choices[0])
	}
	if a := chat(t, s, req); a.Choices[0].Message.Text() != `{"ok":true}` {
		t.Errorf("answer 3 = %q, want JSON", a.Choices[0].Message.Text())
	}
	status, b := chatRaw(t, s, req)
	if status != http.StatusInternalServerError {
		t.Fatalf("after the script: status %d, want 500", status)
	}
	if e := errorOf(t, b); !strings.Contains(e.Message, "script exhausted") || e.Type != "server_error" {
		t.Errorf("after the script: %+v", e)
	}
	st := s.Stats()
	if st.Requests != 4 || st.Answers != 3 || st.StepsUsed != 3 || st.StepsLeft != 0 || st.Refused != 1 || st.Active != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestResponder(t *testing.T) {
	s := start(t, WithScript(Text("scripted")), WithResponder(func(r Request) Step {
		return Text(fmt.Sprintf("#%d saw %d messages", r.Seq, len(r.Chat.Messages)))
	}))
	req := ChatRequest{Messages: []Message{user("a"), user("b")}}
	for _, want := range []string{"scripted", "#2 saw 2 messages", "#3 saw 2 messages"} {
		if got := chat(t, s, req).Choices[0].Message.Text(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestUsage(t *testing.T) {
	params := `{"type": "object", "properties": {"q": {"type": "string"}}}` // compacts to 56 bytes
	tests := []struct {
		name       string
		step       Step
		req        ChatRequest
		prompt     int64
		completion int64
		text       *string
		finish     string
		args       []string
	}{{
		name: "text",
		step: Text("12345678"), // 2 tokens
		req: ChatRequest{Messages: []Message{
			{Role: "system", Content: str("abcde")}, // 4 + 2
			user(""),                                // 4 + 0
			{Role: "assistant", ToolCalls: []ToolCall{{ // 4 + 0 + 1 + 1
				ID: "c", Type: "function", Function: FunctionCall{Name: "q", Arguments: "{}"}}}},
			toolMsg("c", "123456789"), // 4 + 3
		}},
		prompt: 6 + 4 + 6 + 7, completion: 2, text: str("12345678"), finish: FinishStop,
	}, {
		name:   "tools count",
		step:   Text(""),
		req:    ChatRequest{Messages: []Message{user("hi")}, Tools: []Tool{{Type: "function", Function: FunctionDef{Name: "search", Description: "find", Parameters: json.RawMessage(params)}}}},
		prompt: 5 + (4 + 2 + 1 + 14), completion: 0, text: str(""), finish: FinishStop,
	}, {
		name:   "max_tokens cuts text",
		step:   Text(strings.Repeat("x", 100)),
		req:    ChatRequest{Messages: []Message{user("hi")}, MaxTokens: i64(5)},
		prompt: 5, completion: 5, text: str(strings.Repeat("x", 20)), finish: FinishLength,
	}, {
		name:   "the smaller limit wins",
		step:   Text(strings.Repeat("x", 100)),
		req:    ChatRequest{Messages: []Message{user("hi")}, MaxTokens: i64(50), MaxCompletionTokens: i64(3)},
		prompt: 5, completion: 3, text: str(strings.Repeat("x", 12)), finish: FinishLength,
	}, {
		name:   "fits exactly",
		step:   Text(strings.Repeat("x", 20)),
		req:    ChatRequest{Messages: []Message{user("hi")}, MaxTokens: i64(5)},
		prompt: 5, completion: 5, text: str(strings.Repeat("x", 20)), finish: FinishStop,
	}, {
		name:   "no split runes",
		step:   Text("ééé"), // 6 bytes, 2 tokens
		req:    ChatRequest{Messages: []Message{user("hi")}, MaxTokens: i64(1)},
		prompt: 5, completion: 1, text: str("éé"), finish: FinishLength,
	}, {
		name: "max_tokens cuts tool arguments",
		step: Calls(Call{Name: "abcd", Arguments: `{"q":"1234"}`}, Call{Name: "second", Arguments: "{}"}), // 1+3, 2+1
		req:  ChatRequest{Messages: []Message{user("hi")}, MaxTokens: i64(3)},
		// content stays null; the first call keeps 2 tokens (8 bytes) of arguments.
		prompt: 5, completion: 3, finish: FinishLength, args: []string{`{"q":"12`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, WithScript(tt.step))
			a := chat(t, s, tt.req)
			c := a.Choices[0]
			if a.Usage.PromptTokens != tt.prompt || a.Usage.CompletionTokens != tt.completion ||
				a.Usage.TotalTokens != tt.prompt+tt.completion {
				t.Errorf("usage = %+v, want prompt %d completion %d", a.Usage, tt.prompt, tt.completion)
			}
			if got := PromptTokens(&tt.req); got != tt.prompt {
				t.Errorf("PromptTokens = %d, want %d", got, tt.prompt)
			}
			if c.FinishReason != tt.finish {
				t.Errorf("finish_reason = %q, want %q", c.FinishReason, tt.finish)
			}
			if (tt.text == nil) != (c.Message.Content == nil) || tt.text != nil && *tt.text != *c.Message.Content {
				t.Errorf("content = %v, want %v", c.Message.Content, tt.text)
			}
			var args []string
			for _, tc := range c.Message.ToolCalls {
				args = append(args, tc.Function.Arguments)
			}
			if fmt.Sprint(args) != fmt.Sprint(tt.args) {
				t.Errorf("arguments = %q, want %q", args, tt.args)
			}
			if l := limit(&tt.req); l > 0 && a.Usage.CompletionTokens > l {
				t.Errorf("completion_tokens %d over max_tokens %d", a.Usage.CompletionTokens, l)
			}
			if st := s.Stats(); st.PromptTokens != tt.prompt || st.CompletionTokens != tt.completion {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	s := start(t, WithAPIKey("sekret"), WithScript(Text("ok")))
	req := ChatRequest{Messages: []Message{user("hi")}}
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "sekret"}, {"Authorization", "Basic sekret"}} {
		status, b := chatRaw(t, s, req, hdr...)
		if status != http.StatusUnauthorized || errorOf(t, b).Type != "authentication_error" {
			t.Errorf("header %q: status %d %s, want 401", hdr, status, b)
		}
	}
	resp, _, err := do(t, client(t), context.Background(), http.MethodGet, s.URL()+ModelsPath, nil)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("models without a key: %v %v, want 401", resp.StatusCode, err)
	}
	if a := chat(t, s, req, "Authorization", "Bearer sekret"); a.Choices[0].Message.Text() != "ok" {
		t.Errorf("with the key: %+v", a)
	}
	if st := s.Stats(); st.Refused != 5 || st.StepsUsed != 1 {
		t.Errorf("stats = %+v, want 5 refused and the one step used by the good request", st)
	}
	if got := s.Requests()[0].Header.Get("Authorization"); got != "" {
		t.Errorf("first request recorded Authorization %q", got)
	}
	if got := s.Requests()[5].Header.Get("Authorization"); got != "Bearer sekret" {
		t.Errorf("last request recorded Authorization %q", got)
	}
}

func TestRefusals(t *testing.T) {
	c := client(t)
	s := start(t, WithScript(Text("never")), WithMaxRequestBytes(1024))
	tests := []struct {
		name, method, path, body string
		status                   int
		msg                      string
	}{
		{"stream", "POST", ChatPath, `{"messages":[{"role":"user","content":"hi"}],"stream":true}`, 400, "stream"},
		{"not JSON", "POST", ChatPath, `{"messages":`, 400, "invalid JSON"},
		{"no messages", "POST", ChatPath, `{"model":"m","messages":[]}`, 400, "messages must not be empty"},
		{"bad role", "POST", ChatPath, `{"messages":[{"role":"wizard","content":"hi"}]}`, 400, "unknown role"},
		{"tool without id", "POST", ChatPath, `{"messages":[{"role":"tool","content":"hi"}]}`, 400, "tool_call_id"},
		{"content a number", "POST", ChatPath, `{"messages":[{"role":"user","content":3}]}`, 400, "invalid JSON"},
		{"max_tokens 0", "POST", ChatPath, `{"messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, 400, "max_tokens"},
		{"bad format", "POST", ChatPath, `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"yaml"}}`, 400, "response_format"},
		{"schema without schema", "POST", ChatPath, `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema"}}`, 400, "json_schema"},
		{"bad tool", "POST", ChatPath, `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{}}]}`, 400, "tools[0]"},
		{"too big", "POST", ChatPath, `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`, 413, "over 1024 bytes"},
		{"GET chat", "GET", ChatPath, ``, 405, "POST"},
		{"POST models", "POST", ModelsPath, `{}`, 405, "GET"},
		{"other path", "POST", "/v1/completions", `{}`, 404, "no such endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b, err := do(t, c, context.Background(), tt.method, s.URL()+tt.path, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || !strings.Contains(errorOf(t, b).Message, tt.msg) {
				t.Errorf("got %d %s, want %d with %q", resp.StatusCode, b, tt.status, tt.msg)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	if st := s.Stats(); st.StepsUsed != 0 || st.Refused != len(tests) || st.Answers != 0 {
		t.Errorf("stats = %+v, want every request refused and no step used", st)
	}
	// Content parts are accepted, text joined.
	resp, b, _ := do(t, c, context.Background(), "POST", s.URL()+ChatPath,
		[]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}]}`))
	if resp.StatusCode != 200 || s.Requests()[len(tests)].Chat.Messages[0].Text() != "a\nb" {
		t.Errorf("content parts: %d %s", resp.StatusCode, b)
	}
}

func TestModels(t *testing.T) {
	s := start(t, WithModels("llama-3", "qwen"), WithScript(Text("x")))
	resp, b, err := do(t, client(t), context.Background(), http.MethodGet, s.URL()+ModelsPath, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	var l ModelList
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	if l.Object != "list" || len(l.Data) != 2 || l.Data[0].ID != "llama-3" || l.Data[1].Object != "model" {
		t.Errorf("models = %+v", l)
	}
	if a := chat(t, s, ChatRequest{Messages: []Message{user("x")}}); a.Model != "llama-3" {
		t.Errorf("model without one asked = %q, want the first listed", a.Model)
	}
}

func TestRecording(t *testing.T) {
	s := start(t, WithScript(Text("a"), Text("b")))
	if u := s.URL(); !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Errorf("URL = %q, want loopback IPv4", u)
	}
	chat(t, s, ChatRequest{Model: "m", Messages: []Message{user("plan a trip")}}, "X-Test", "1")
	chat(t, s, ChatRequest{Model: "m",
		Messages: []Message{user("plan a trip"), toolMsg("c1", `<profile passport="X1234567"/>`)},
		Tools:    []Tool{fn("fetch", `{"type":"object","properties":{"url":{"type":"string"}}}`)},
	})
	rs := s.Requests()
	if len(rs) != 2 {
		t.Fatalf("%d requests recorded, want 2", len(rs))
	}
	r := rs[0]
	if r.Seq != 1 || r.Method != "POST" || r.Path != ChatPath || r.Header.Get("X-Test") != "1" || r.Status != 200 ||
		r.Chat == nil || r.Chat.Messages[0].Text() != "plan a trip" || !strings.Contains(string(r.Body), `"plan a trip"`) {
		t.Errorf("request 1 = %+v", r)
	}
	// The raw body escapes "<"; Saw also reads what was shown, decoded.
	if strings.Contains(string(rs[1].Body), `<profile`) {
		t.Log("client did not escape HTML")
	}
	if !s.Saw(`<profile passport="X1234567"/>`) || !s.Saw("X1234567") || s.Saw("Y7654321") {
		t.Errorf("Saw: wrong")
	}
	if sh := rs[1].Shown(); !strings.Contains(sh, "tool: <profile") || !strings.Contains(sh, "tool fetch") {
		t.Errorf("Shown = %q", sh)
	}
	// Copies: changing one does not change the record.
	rs[0].Body[0] = 'X'
	rs[0].Header.Set("X-Test", "2")
	if r := s.Requests()[0]; r.Body[0] != '{' || r.Header.Get("X-Test") != "1" {
		t.Errorf("Requests shares its records")
	}
}

func TestHandlerUnderOwnServer(t *testing.T) {
	f := NewHandler(WithScript(Text("hello")))
	defer f.Close()
	if f.URL() != "" {
		t.Errorf("URL = %q, want none", f.URL())
	}
	ts := httptest.NewServer(f.Handler())
	defer ts.Close()
	resp, b, err := do(t, client(t), context.Background(), "POST", ts.URL+ChatPath, []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), `"content":"hello"`) {
		t.Fatalf("%v %s %v", resp, b, err)
	}
}

// TestConcurrent hammers the script: each step is used exactly once.
func TestConcurrent(t *testing.T) {
	const n = 64
	var steps []Step
	for i := range n {
		steps = append(steps, Text(fmt.Sprint(i)))
	}
	s := start(t, WithScript(steps...))
	c := client(t)
	var wg sync.WaitGroup
	got := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b, err := do(t, c, context.Background(), "POST", s.URL()+ChatPath, []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("%v %v", resp, err)
				return
			}
			var a ChatResponse
			json.Unmarshal(b, &a)
			got[i] = a.Choices[0].Message.Text()
			_ = s.Stats()
			_ = s.Requests()
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, g := range got {
		if seen[g] {
			t.Errorf("step %q answered twice", g)
		}
		seen[g] = true
	}
	if st := s.Stats(); st.StepsUsed != n || st.Requests != n || len(seen) != n {
		t.Errorf("stats = %+v, %d distinct answers", st, len(seen))
	}
}
