package fakellm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

var hi = []byte(`{"messages":[{"role":"user","content":"hi"}]}`)

func TestGarbage(t *testing.T) {
	s := start(t, WithScript(Garbage()))
	resp, b, err := do(t, client(t), context.Background(), "POST", s.URL()+ChatPath, hi)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%v %v", resp, err)
	}
	var v any
	if json.Unmarshal(b, &v) == nil {
		t.Errorf("garbage body %q decodes as JSON", b)
	}
}

func TestHuge(t *testing.T) {
	const n = 10 << 20
	s := start(t, WithScript(Huge(n), Huge(n)))
	c := client(t)
	// A client that reads it all gets a well-formed completion of n bytes.
	resp, b, err := do(t, c, context.Background(), "POST", s.URL()+ChatPath, hi)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ContentLength != n || len(b) != n {
		t.Errorf("Content-Length %d, read %d, want %d", resp.ContentLength, len(b), n)
	}
	var a ChatResponse
	if err := json.Unmarshal(b, &a); err != nil || len(a.Choices[0].Message.Text()) < n-400 {
		t.Errorf("huge body does not decode as a completion: %v", err)
	}
	// A client that bounds what it reads stops early, and the server lets go.
	req, _ := http.NewRequest("POST", s.URL()+ChatPath, strings.NewReader(string(hi)))
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if got != 1<<20 {
		t.Errorf("read %d bytes", got)
	}
	waitFor(t, "the huge handler to return", func() bool { return s.Stats().Active == 0 })
}

func TestWrongContentTypeAndHeaders(t *testing.T) {
	s := start(t, WithScript(
		Text("hello").WithContentType("text/html; charset=utf-8"),
		Error(http.StatusTooManyRequests, "slow down").WithHeader("Retry-After", "7"),
		RawBody(http.StatusBadGateway, "", "upstream died"),
		Error(http.StatusServiceUnavailable, "overloaded"),
	))
	c := client(t)
	resp, b, _ := do(t, c, context.Background(), "POST", s.URL()+ChatPath, hi)
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" || !strings.Contains(string(b), `"content":"hello"`) {
		t.Errorf("content type %q, body %s", ct, b)
	}
	resp, b, _ = do(t, c, context.Background(), "POST", s.URL()+ChatPath, hi)
	if e := errorOf(t, b); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || e.Type != "rate_limit_error" || e.Message != "slow down" {
		t.Errorf("429: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	resp, b, _ = do(t, c, context.Background(), "POST", s.URL()+ChatPath, hi)
	if _, has := resp.Header["Content-Type"]; resp.StatusCode != 502 || string(b) != "upstream died" || has {
		t.Errorf("raw: %d %q", resp.StatusCode, b)
	}
	resp, b, _ = do(t, c, context.Background(), "POST", s.URL()+ChatPath, hi)
	if resp.StatusCode != 503 || errorOf(t, b).Type != "server_error" {
		t.Errorf("503: %d %s", resp.StatusCode, b)
	}
	if st := s.Stats(); st.Answers != 4 || st.Refused != 0 {
		t.Errorf("stats = %+v: scripted errors are answers, not refusals", st)
	}
}

func TestAbsurdUsage(t *testing.T) {
	for _, u := range []Usage{
		{PromptTokens: -1, CompletionTokens: -100, TotalTokens: -101},
		{PromptTokens: math.MaxInt64, CompletionTokens: math.MaxInt64, TotalTokens: 3},
	} {
		s := start(t, WithScript(Text(strings.Repeat("x", 100)).WithUsage(u).WithFinishReason(FinishStop)))
		a := chat(t, s, ChatRequest{Messages: []Message{user("hi")}, MaxTokens: i64(2)})
		if a.Usage != u {
			t.Errorf("usage = %+v, want %+v", a.Usage, u)
		}
		// The lie is in the report only: the answer is still cut, and the
		// fake's own count is true.
		if c := a.Choices[0]; c.Message.Text() != "xxxxxxxx" || c.FinishReason != FinishStop {
			t.Errorf("answer = %+v", c)
		}
		if st := s.Stats(); st.CompletionTokens != 2 {
			t.Errorf("counted %d completion tokens, want 2", st.CompletionTokens)
		}
	}
}

func TestInvalidToolArguments(t *testing.T) {
	s := start(t, WithScript(Calls(Call{Name: "fetch", Arguments: `{"url": "https://x.example`})))
	a := chat(t, s, ChatRequest{Messages: []Message{user("hi")}})
	args := a.Choices[0].Message.ToolCalls[0].Function.Arguments
	if json.Valid([]byte(args)) || args != `{"url": "https://x.example` {
		t.Errorf("arguments = %q, want them verbatim and invalid", args)
	}
}

func TestSchemaViolationStep(t *testing.T) {
	schema := `{"type":"object","additionalProperties":false,"required":["ok","n","kind"],
		"properties":{"ok":{"type":"boolean"},"n":{"type":"integer"},"kind":{"enum":["a","b"]},"note":{"type":"string"}}}`
	s := start(t, WithScript(SchemaViolation(), SchemaViolation()))
	a := chat(t, s, ChatRequest{Messages: []Message{user("hi")},
		ResponseFormat: &ResponseFormat{Type: "json_schema", JSONSchema: &JSONSchema{Name: "x", Schema: json.RawMessage(schema)}}})
	var got map[string]any
	if err := json.Unmarshal([]byte(a.Choices[0].Message.Text()), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ok", "n", "kind", "injected"} {
		if _, isString := got[k].(string); !isString {
			t.Errorf("%s = %#v, want a string the schema forbids", k, got[k])
		}
	}
	// Without a schema: a JSON string, no object.
	a = chat(t, s, ChatRequest{Messages: []Message{user("hi")}})
	var str string
	if err := json.Unmarshal([]byte(a.Choices[0].Message.Text()), &str); err != nil {
		t.Errorf("answer %q is not a JSON string", a.Choices[0].Message.Text())
	}
}

func TestTrickleAndAfter(t *testing.T) {
	const every = 20 * time.Millisecond
	s := start(t, WithScript(Text("slow").Trickle(16, every), Text("late").After(100*time.Millisecond)))
	c := client(t)
	t0 := time.Now()
	resp, b, err := do(t, c, context.Background(), "POST", s.URL()+ChatPath, hi)
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(err)
	}
	chunks := (len(b) + 15) / 16
	if d := time.Since(t0); d < time.Duration(chunks-1)*every {
		t.Errorf("%d chunks took %v, want at least %v", chunks, d, time.Duration(chunks-1)*every)
	}
	var a ChatResponse
	if err := json.Unmarshal(b, &a); err != nil || a.Choices[0].Message.Text() != "slow" {
		t.Errorf("trickled body: %s %v", b, err)
	}
	// A client that gives up before the answer starts gets nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := do(t, c, ctx, "POST", s.URL()+ChatPath, hi); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("After: err = %v, want the client's deadline", err)
	}
	waitFor(t, "the late handler to return", func() bool { return s.Stats().Active == 0 })
}

// TestHang: a body that never ends keeps the client until it gives up; the
// handler then returns; Close releases hung requests promptly and leaves
// no goroutine behind.
func TestHang(t *testing.T) {
	before := runtime.NumGoroutine()
	s := New(WithScript(Hang(), Hang(), Text("x").Trickle(1, time.Hour)))
	tr := &http.Transport{}
	c := &http.Client{Transport: tr}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	resp, _, err := do(t, c, ctx, "POST", s.URL()+ChatPath, hi)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, %v; want the client's deadline while reading the body", resp, err)
	}
	waitFor(t, "the hung handler to notice the client left", func() bool { return s.Stats().Active == 0 })
	if r := s.Requests()[0]; r.Status != 200 {
		t.Errorf("status recorded %d", r.Status)
	}

	// Two more hang with a client that never gives up; Close ends them.
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, b, err := do(t, c, context.Background(), "POST", s.URL()+ChatPath, hi)
			if err == nil {
				err = errors.New("complete body: " + string(b))
			}
			errs <- err
		}()
	}
	waitFor(t, "two hung requests", func() bool { return s.Stats().Active == 2 })
	t0 := time.Now()
	s.Close()
	// Not a bound on the machine's speed: a Close that waited for the
	// hung requests would wait until the test's end.
	if d := time.Since(t0); d > time.Minute {
		t.Errorf("Close took %v", d)
	}
	for range 2 {
		if err := <-errs; err == nil || strings.HasPrefix(err.Error(), "complete body") {
			t.Errorf("client got %v, want a broken connection", err)
		}
	}
	s.Close() // twice is fine
	tr.CloseIdleConnections()
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// TestCloseUnblocksWrite: a client that stops reading a huge body does not
// keep Close waiting.
func TestCloseUnblocksWrite(t *testing.T) {
	s := New(WithScript(Huge(64 << 20)))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("POST", s.URL()+ChatPath, strings.NewReader(string(hi)))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	time.Sleep(50 * time.Millisecond) // let the socket buffers fill
	t0 := time.Now()
	s.Close()
	// Not a bound on the machine's speed: a Close that waited for the
	// hung requests would wait until the test's end.
	if d := time.Since(t0); d > time.Minute {
		t.Errorf("Close took %v", d)
	}
}
