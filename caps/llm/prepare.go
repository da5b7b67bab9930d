package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/internal/httpservice"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

const (
	opChat    = abi.LLMChatOp
	opExtract = abi.LLMExtractOp
)

// Bounds on what one call may carry to the provider, and read back.
const (
	MaxToolSchemaBytes = 64 << 10
	MaxToolCalls       = 128
	maxErrorBody       = 64 << 10
	maxShownError      = 256
)

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// wireRequest is the body posted to ENDPOINT/v1/chat/completions: exactly
// what Prepare checked.
type wireRequest struct {
	Model          string              `json:"model"`
	Messages       []abi.ChatMessage   `json:"messages"`
	Tools          []abi.ChatTool      `json:"tools,omitempty"`
	ToolChoice     json.RawMessage     `json:"tool_choice,omitempty"`
	MaxTokens      int64               `json:"max_tokens"`
	Temperature    *float64            `json:"temperature,omitempty"`
	ResponseFormat *abi.ResponseFormat `json:"response_format,omitempty"`
	Stream         bool                `json:"stream"`
}

// wireResponse is what is read of a chat completion. Unknown fields are
// ignored; missing ones are errors where they matter.
type wireResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role      string         `json:"role"`
			Content   *string        `json:"content"`
			ToolCalls []abi.ToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     *int64 `json:"prompt_tokens"`
		CompletionTokens *int64 `json:"completion_tokens"`
		TotalTokens      *int64 `json:"total_tokens"`
	} `json:"usage"`
}

// chat is a prepared call.
type chat struct {
	k        *Kind
	s        *Scope
	op       string
	body     []byte
	model    string
	messages int
	tools    []string
	maxTok   int64
	reserve  int64
	format   string // "", text, json_object, json_schema
	schema   *jsonschema.Resolved
	label    kindapi.Label // the answer's label
	spliced  []kindapi.Label
	log      hclog.Logger
}

// Prepare prepares chat or extract: the request is decoded once, its
// blobs are spliced into the message contents, and the model, max_tokens,
// messages, tools and response format are checked against the scope. The
// kernel is told the sink (the provider's clearance: the task's label and
// every spliced blob's must flow to it, or nothing is sent), and the
// amount reserved from every token budget on the chain: max_tokens plus
// the request's size in bytes (no tokenizer makes more tokens of a text
// than it has bytes), settled after the call to the larger of the usage
// the provider reports and the bound the kernel computes from the bytes
// sent and received (chat.bound). The effect sends exactly the request
// that was checked.
func (k *Kind) Prepare(call *kindapi.Call) (kindapi.Op, error) {
	if call.Op != opChat && call.Op != opExtract {
		return kindapi.Op{}, kindapi.Errorf(abi.ENOTSUP, "llm: no operation %q", call.Op)
	}
	s, err := kindapi.ScopeAs[*Scope](call.Scope, KindName)
	if err != nil {
		return kindapi.Op{}, err
	}
	what := "llm: " + call.Op
	inval := func(format string, args ...any) error {
		return kindapi.Errorf(abi.EINVAL, what+": "+format, args...)
	}
	r, err := abi.DecodeChatRequest(call.Args)
	if err != nil {
		if errors.Is(err, abi.ErrTooLarge) {
			return kindapi.Op{}, kindapi.Errorf(abi.ELIMIT, "%s: %v", what, err)
		}
		return kindapi.Op{}, inval("%v", err)
	}
	c := &chat{k: k, s: s, op: call.Op, messages: len(r.Messages), log: call.Logger}
	if c.log == nil {
		c.log = hclog.NewNullLogger()
	}

	// The model and the size of the answer.
	switch {
	case r.Model == "" && len(s.models) == 1:
		c.model = s.models[0]
	case r.Model == "":
		return kindapi.Op{}, inval("name a model: one of %s", strings.Join(s.models, ", "))
	case !containsSorted(s.models, r.Model):
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "%s: model %s is not allowed (allowed: %s)", what, kindapi.QuoteTrunc(r.Model), strings.Join(s.models, ", "))
	default:
		c.model = r.Model
	}
	c.maxTok = r.MaxTokens
	if c.maxTok == 0 {
		c.maxTok = s.maxTokens
	} else if c.maxTok > s.maxTokens {
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "%s: max_tokens %d is above the capability's %d", what, c.maxTok, s.maxTokens)
	}

	// Messages and tools.
	for i, m := range r.Messages {
		switch m.Role {
		case "system", "user", "assistant":
		case "tool":
			if m.ToolCallID == "" {
				return kindapi.Op{}, inval("message %d: a tool message needs tool_call_id", i)
			}
		default:
			return kindapi.Op{}, inval("message %d: role %s (system, user, assistant or tool)", i, kindapi.QuoteTrunc(m.Role))
		}
		for _, tc := range m.ToolCalls {
			if tc.Type != "function" || !toolNameRE.MatchString(tc.Function.Name) {
				return kindapi.Op{}, inval("message %d: a tool call must be a function with a name of [A-Za-z0-9_-]{1,64}", i)
			}
		}
	}
	for _, t := range r.Tools {
		if t.Type != "function" || !toolNameRE.MatchString(t.Function.Name) {
			return kindapi.Op{}, inval("a tool must be a function with a name of [A-Za-z0-9_-]{1,64}")
		}
		if n := len(t.Function.Parameters); n > MaxToolSchemaBytes {
			return kindapi.Op{}, kindapi.Errorf(abi.ELIMIT, "%s: tool %s: parameters of %d bytes (max %d)", what, t.Function.Name, n, MaxToolSchemaBytes)
		}
		c.tools = append(c.tools, t.Function.Name)
	}

	// The response format; extract needs a closed schema and a
	// capability that endorses.
	if rf := r.ResponseFormat; rf != nil {
		c.format = rf.Type
		switch rf.Type {
		case "text", "json_object":
		case "json_schema":
			if rf.JSONSchema == nil {
				return kindapi.Op{}, inval("response_format json_schema needs json_schema")
			}
			if c.schema, err = compileSchema(rf.JSONSchema.Schema); err != nil {
				return kindapi.Op{}, inval("response_format: %v", err)
			}
		default:
			return kindapi.Op{}, inval("response_format type %s (text, json_object or json_schema)", kindapi.QuoteTrunc(rf.Type))
		}
	}
	if c.op == opExtract {
		if !s.endorse {
			return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "%s: this capability may not endorse answers (endorse_schema is false)", what)
		}
		if c.schema == nil {
			return kindapi.Op{}, inval("extract needs a response_format of type json_schema")
		}
		if err := checkClosed(r.ResponseFormat.JSONSchema.Schema); err != nil {
			return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "%s: the schema is not closed, so its answers cannot be endorsed: %v", what, err)
		}
	}

	// The spliced blobs, into the message contents only: UTF-8 text. A
	// blob that is a fetch result (abi.HTTPResponse, what a net
	// capability returns) is spliced as its body, so a page goes to the
	// model without the task reading it.
	vals := make([][]byte, len(r.Splice))
	{
		var total int64
		for i, h := range r.Splice {
			b, err := call.Blob(h)
			if err != nil {
				return kindapi.Op{}, err
			}
			if total += int64(b.Len()); total > s.maxRequest {
				return kindapi.Op{}, kindapi.Errorf(abi.ELIMIT, "%s: spliced blobs exceed max_request_bytes %d", what, s.maxRequest)
			}
			if vals[i], err = io.ReadAll(b.Reader()); err != nil {
				return kindapi.Op{}, kindapi.Errorf(abi.EINTERNAL, "%s: reading a spliced blob: %v", what, err)
			}
			if resp, err := abi.DecodeHTTPResponse(vals[i]); err == nil {
				vals[i] = resp.Body
			}
			if !utf8.Valid(vals[i]) {
				return kindapi.Op{}, inval("spliced blob %d is not UTF-8 text", i)
			}
			c.spliced = append(c.spliced, b.Label())
		}
		for i := range r.Messages {
			if r.Messages[i].Content, err = kindapi.Substitute(r.Messages[i].Content, vals, func(v []byte) string { return string(v) }, what); err != nil {
				return kindapi.Op{}, err
			}
		}
	}

	body, err := json.Marshal(wireRequest{
		Model: c.model, Messages: r.Messages, Tools: r.Tools, ToolChoice: r.ToolChoice, MaxTokens: c.maxTok,
		Temperature: r.Temperature, ResponseFormat: r.ResponseFormat,
	})
	if err != nil {
		return kindapi.Op{}, inval("%v", err)
	}
	if int64(len(body)) > s.maxRequest {
		return kindapi.Op{}, kindapi.Errorf(abi.ELIMIT, "%s: the request is %d bytes (max_request_bytes %d)", what, len(body), s.maxRequest)
	}
	c.body = body
	c.reserve = c.maxTok + int64(len(body))

	// The answer's label: what the model was shown (the task's label and
	// every spliced blob's), and the model's own taint; an endorsed
	// extract keeps only the confidentiality.
	label := call.TaskLabel()
	for _, l := range c.spliced {
		label = label.Join(l)
	}
	if c.op == opExtract {
		c.label = kindapi.NewLabel(label.Conf(), nil)
	} else {
		c.label = label.Join(kindapi.NewLabel(nil, []string{s.Taint()}))
	}
	return kindapi.Op{
		Sink:   s.refusal.Sink(s.clearance),
		Vars:   c.vars,
		Show:   c.show,
		Amount: c.reserve,
		Effect: c.run,
	}, nil
}

// vars is what constraints see: request.model, .max_tokens, .messages
// (how many), .prompt_bytes, .tools (names), .spliced (how many), .op,
// .format.
func (c *chat) vars() (map[string]any, error) {
	tools := make([]any, len(c.tools))
	for i, t := range c.tools {
		tools[i] = t
	}
	return map[string]any{"request": map[string]any{
		"model": c.model, "max_tokens": c.maxTok, "messages": int64(c.messages),
		"prompt_bytes": int64(len(c.body)), "tools": tools, "spliced": int64(len(c.spliced)),
		"op": c.op, "format": c.format,
	}}, nil
}

// show is what an approver sees: the model, the prompt's size and the
// labels of the blobs spliced into it (never the prompt: it may hold
// what the approver must not be shown either).
func (c *chat) show() kindapi.Preview {
	d := []kindapi.Detail{
		{Name: "model", Value: c.model}, {Name: "endpoint", Value: c.s.endpoint},
		{Name: "messages", Value: strconv.Itoa(c.messages)},
		{Name: "prompt", Value: kindapi.FormatBytes(int64(len(c.body)))},
		{Name: "max_tokens", Value: strconv.FormatInt(c.maxTok, 10)},
		// The whole request the model server is sent: the approval is
		// bound to it, not to its size.
		{Name: "request", Value: string(c.body)},
	}
	if len(c.tools) > 0 {
		d = append(d, kindapi.Detail{Name: "tools", Value: strings.Join(c.tools, ", ")})
	}
	for i, l := range c.spliced {
		d = append(d, kindapi.Detail{Name: fmt.Sprintf("spliced %d", i), Value: l.String()})
	}
	return kindapi.Preview{
		Summary: fmt.Sprintf("ask %s at %s (%d messages, %s prompt)", c.model, c.s.endpoint, c.messages, kindapi.FormatBytes(int64(len(c.body)))),
		Details: d,
	}
}

// run posts the prepared request and reads the answer.
func (c *chat) run(ctx context.Context) (*kindapi.Result, error) {
	s := c.s
	what := "llm: " + c.op
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := httpservice.NewJSONRequest(ctx, s.endpoint+ChatPath, c.body)
	if err != nil {
		return nil, kindapi.NotPerformed(kindapi.Errorf(abi.EIO, "%s: %v", what, err))
	}
	if v := s.key.Value(); v != "" {
		req.Header.Set("Authorization", "Bearer "+v)
	}
	resp, err := c.k.clients.For(s.allowPrivate).Do(req)
	if err != nil {
		f := httpservice.Failure{What: what, Peer: "endpoint", Secret: s.key, Timeout: s.timeout}
		return nil, f.Of(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg := errorMessage(resp.Body, s)
		err := kindapi.Errorf(abi.EIO, "%s: the endpoint answered HTTP %d%s", what, resp.StatusCode, msg)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout {
			return nil, kindapi.NotPerformed(err) // refused: no answer was made
		}
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/json") {
		return nil, kindapi.Errorf(abi.EIO, "%s: the endpoint's answer is not JSON (content type %s)", what, kindapi.QuoteTrunc(ct))
	}
	raw, over, err := httpservice.ReadAtMost(resp.Body, s.maxResponse)
	if err != nil {
		if ctx.Err() != nil {
			return nil, kindapi.Errorf(abi.ETIMEDOUT, "%s: the endpoint did not finish its answer within %s", what, s.timeout)
		}
		return nil, kindapi.Errorf(abi.EIO, "%s: reading the answer: %s", what, httpservice.Redact(err.Error(), s.key))
	}
	if over {
		return nil, kindapi.Errorf(abi.ELIMIT, "%s: the answer exceeds max_response_bytes %d", what, s.maxResponse)
	}
	if v := s.key.Value(); v != "" && bytes.Contains(raw, []byte(v)) {
		return nil, kindapi.Errorf(abi.EIO, "%s: the endpoint's answer contains the API key; it is withheld", what)
	}
	var wr wireResponse
	if err := json.Unmarshal(raw, &wr); err != nil {
		return nil, kindapi.Errorf(abi.EIO, "%s: the endpoint's answer is not a chat completion: %v", what, err)
	}
	if len(wr.Choices) == 0 {
		return nil, kindapi.Errorf(abi.EIO, "%s: the endpoint's answer has no choices", what)
	}
	ch := wr.Choices[0]
	if len(ch.Message.ToolCalls) > MaxToolCalls {
		return nil, kindapi.Errorf(abi.EIO, "%s: the answer has %d tool calls (max %d)", what, len(ch.Message.ToolCalls), MaxToolCalls)
	}
	content := ""
	if ch.Message.Content != nil {
		content = *ch.Message.Content
	}
	charge := c.bound(content, ch.Message.ToolCalls)
	if c.op == opExtract && len(ch.Message.ToolCalls) > 0 {
		return nil, kindapi.Errorf(abi.EIO, "%s: the answer has tool calls, which no schema validates; the answer is withheld", what)
	}
	if c.format == "json_object" || c.schema != nil {
		v, err := validateAnswer(content, c.schema, c.op == opExtract)
		if err != nil {
			return nil, kindapi.Errorf(abi.EIO, "%s: %v; the answer is withheld", what, truncate(err.Error()))
		}
		if c.op == opExtract {
			// What is endorsed is the value that validated, written
			// by the kernel: never the provider's bytes, which could
			// hold what the value does not (white space, escapes).
			b, err := canonical(v)
			if err != nil {
				return nil, kindapi.Errorf(abi.EINTERNAL, "%s: writing the validated answer: %v", what, err)
			}
			content = string(b)
		}
	}
	out := abi.ChatResponse{
		Model: wr.Model, FinishReason: ch.FinishReason, Endorsed: c.op == opExtract,
		Message: abi.ChatMessage{Role: "assistant", Content: content, ToolCalls: ch.Message.ToolCalls},
	}
	if out.Model == "" {
		out.Model = c.model
	}
	// The charge: what the server reported, but never less than the
	// bound on what the call can have cost (a server reporting 0 spends
	// the bound), never more than the reservation.
	res := &kindapi.Result{Label: c.label}
	spent := c.reserve
	if reported, ok := c.usage(&wr, &out.Usage); ok {
		spent = min(max(reported, charge), c.reserve)
	} else {
		c.log.Warn("llm: the endpoint reported no usable token usage; the whole reservation counts", "reserved", c.reserve)
	}
	out.Usage.Charged = spent
	res.Spent = &spent
	if res.Data, err = json.Marshal(out); err != nil {
		return nil, kindapi.Errorf(abi.EINTERNAL, "%s: %v", what, err)
	}
	if c.op == opExtract {
		c.log.Info("llm: answer endorsed: it validated against a closed schema; its integrity taints are dropped", "model", c.model)
	}
	return res, nil
}

// bound is the most tokens the call can have cost, by bytes: every token
// of a byte-level BPE tokenizer (what llama, qwen, mistral and the other
// models behind these servers use) is at least one byte of its text, so
//
//   - the prompt is at most the bytes of the request body posted (the
//     messages' text, and JSON framing that outweighs the chat template's
//     tokens), and
//   - the completion is at most the bytes of the answer's content plus
//     its tool calls' names and arguments, and at most max_tokens.
//
// A call is charged at least this, whatever the server reports. It is
// never more than the reservation (max_tokens plus the body's bytes).
func (c *chat) bound(content string, calls []abi.ToolCall) int64 {
	completion := int64(len(content))
	for _, tc := range calls {
		completion += int64(len(tc.Function.Name)) + int64(len(tc.Function.Arguments))
	}
	return int64(len(c.body)) + min(c.maxTok, completion)
}

// usage reads the reported usage into u; ok is false when it is missing
// or not believable (negative, or inconsistent), and the reservation then
// counts whole.
func (c *chat) usage(wr *wireResponse, u *abi.ChatUsage) (int64, bool) {
	if wr.Usage == nil {
		return 0, false
	}
	get := func(p *int64) int64 {
		if p == nil {
			return -1
		}
		return *p
	}
	p, cm, t := get(wr.Usage.PromptTokens), get(wr.Usage.CompletionTokens), get(wr.Usage.TotalTokens)
	if t < 0 && p >= 0 && cm >= 0 {
		t = p + cm
	}
	if p < 0 || cm < 0 || t < 0 || t < p || t < cm {
		return 0, false
	}
	*u = abi.ChatUsage{PromptTokens: p, CompletionTokens: cm, TotalTokens: t}
	return t, true
}

// errorMessage reads an error answer's message, bounded, printable and
// with the key redacted: ": MESSAGE", or "" when there is none.
func errorMessage(r io.Reader, s *Scope) string {
	raw, _ := io.ReadAll(io.LimitReader(r, maxErrorBody))
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Error.Message == "" {
		return ""
	}
	return ": " + truncate(kindapi.Printable(httpservice.Redact(e.Error.Message, s.key)))
}

func truncate(s string) string {
	if len(s) > maxShownError {
		return s[:maxShownError] + "..."
	}
	return s
}

func containsSorted(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
