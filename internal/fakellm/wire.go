package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The wire format of OpenAI-compatible chat completions, as llama.cpp's
// llama-server, Ollama and vLLM speak it: only the fields the fake reads or
// writes. Unknown request fields are accepted and ignored, as those servers
// do; the raw bytes are in Request.Body.

// Paths the fake serves.
const (
	ChatPath   = "/v1/chat/completions"
	ModelsPath = "/v1/models"
)

// Finish reasons.
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool_calls"
	FinishLength    = "length"
)

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	MaxTokens           *int64          `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	ResponseFormat      *ResponseFormat `json:"response_format,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
}

// Message is one message of a conversation, in a request or an answer.
// Content is nil for JSON null or an absent content (an assistant message
// that only calls tools). A request may also send content as an array of
// parts ([{"type":"text","text":...}]); the fake joins the text parts with
// "\n" into Content and ignores other parts.
type Message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// Text returns the content, "" for null.
func (m Message) Text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// UnmarshalJSON accepts content as a string, null, or an array of parts.
func (m *Message) UnmarshalJSON(b []byte) error {
	var w struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []ToolCall      `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
		Name       string          `json:"name"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*m = Message{Role: w.Role, ToolCalls: w.ToolCalls, ToolCallID: w.ToolCallID, Name: w.Name}
	c := bytes.TrimSpace(w.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '"':
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return err
		}
		m.Content = &s
	case c[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(c, &parts); err != nil {
			return fmt.Errorf("content parts: %w", err)
		}
		var texts []string
		for _, p := range parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		s := strings.Join(texts, "\n")
		m.Content = &s
	default:
		return fmt.Errorf("content must be a string, null or an array of parts, not %.20s", c)
	}
	return nil
}

// ToolCall is one call in an assistant message. Arguments is JSON text
// (a string on the wire), which a hostile answer may leave invalid.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the tool and carries its arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool offered in a request.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef describes a tool: Parameters is a JSON Schema.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ResponseFormat asks for JSON: Type is "text", "json_object" or
// "json_schema" (with JSONSchema set).
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is response_format.json_schema.
type JSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
}

// ChatResponse is the body of a 200 answer.
type ChatResponse struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"` // "chat.completion"
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   Usage    `json:"usage"`
}

// Choice is one answer; the fake always sends exactly one, index 0.
type Choice struct {
	Index        int     `json:"index"`
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason"`
}

// Usage is the token accounting of an answer (see CountTokens).
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// ErrorResponse is the body of a 4xx or 5xx answer.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what went wrong.
type ErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"` // "list"
	Data   []Model `json:"data"`
}

// Model is one entry of ModelList.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	OwnedBy string `json:"owned_by"`
}
