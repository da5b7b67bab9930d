package fakellm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// client is a plain net/http client with a transport of its own, closed
// with the test.
func client(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// start is New, closed with the test.
func start(t *testing.T, opts ...Option) *Server {
	t.Helper()
	s := New(opts...)
	t.Cleanup(s.Close)
	return s
}

func str(s string) *string { return &s }

func i64(n int64) *int64 { return &n }

func user(s string) Message { return Message{Role: "user", Content: str(s)} }

func toolMsg(id, s string) Message { return Message{Role: "tool", ToolCallID: id, Content: str(s)} }

func fn(name, params string) Tool {
	return Tool{Type: "function", Function: FunctionDef{Name: name, Parameters: json.RawMessage(params)}}
}

// do sends a request and returns the response with its whole body.
func do(t *testing.T, c *http.Client, ctx context.Context, method, url string, body []byte, hdr ...string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// chat posts req to the fake and decodes a 200 answer; it fails the test
// on anything else.
func chat(t *testing.T, s *Server, req ChatRequest, hdr ...string) ChatResponse {
	t.Helper()
	status, b := chatRaw(t, s, req, hdr...)
	if status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", status, b)
	}
	var out ChatResponse
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	if len(out.Choices) != 1 {
		t.Fatalf("got %d choices, want 1", len(out.Choices))
	}
	return out
}

// chatRaw posts req and returns the status and body.
func chatRaw(t *testing.T, s *Server, req ChatRequest, hdr ...string) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, b, err := do(t, client(t), context.Background(), http.MethodPost, s.URL()+ChatPath, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// errorOf decodes an error body.
func errorOf(t *testing.T, b []byte) ErrorBody {
	t.Helper()
	var e ErrorResponse
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("not an error body: %s (%v)", b, err)
	}
	return e.Error
}

// waitFor polls cond for up to 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
