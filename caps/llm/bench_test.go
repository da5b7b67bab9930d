package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/mandatevm/mandate/caps/llm"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/fakellm"
)

// BenchmarkChat measures the kernel's overhead on one llm call against a
// loopback model: kernel is the whole pipeline (decode, checks, reserve,
// flow, audit to memory, the effect, settle, the result blob); direct is
// a plain net/http POST of the same request to the same server, reading
// the answer. The difference is what the kernel adds.
func BenchmarkChat(b *testing.B) {
	model := fakellm.New(fakellm.WithAPIKey(testKey), fakellm.WithResponder(func(fakellm.Request) fakellm.Step {
		return fakellm.Text("The cheapest stay is L3.")
	}))
	defer model.Close()
	req := abi.ChatRequest{Model: "m1", MaxTokens: 64, Messages: []abi.ChatMessage{
		{Role: "system", Content: "You book stays."},
		{Role: "user", Content: "Find a stay in Lisbon for 3 nights under 150 EUR a night."},
	}}
	args, _ := json.Marshal(req)
	b.Run("direct", func(b *testing.B) {
		body, _ := json.Marshal(map[string]any{"model": "m1", "max_tokens": 64, "messages": req.Messages, "stream": false})
		client := &http.Client{}
		for b.Loop() {
			r, _ := http.NewRequest(http.MethodPost, model.URL()+llm.ChatPath, bytes.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+testKey)
			r.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(r)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("kernel", func(b *testing.B) {
		e := newKenv(b, grant{kind: "llm", name: "model", spec: llmSpec(model.URL(), ""), budget: "1000000000"})
		ctx := context.Background()
		h := e.lookup("model")
		for b.Loop() {
			rh, err := e.task.Invoke(ctx, h, "chat", args)
			if err != nil {
				b.Fatal(err)
			}
			e.task.Drop(ctx, rh)
		}
	})
}
