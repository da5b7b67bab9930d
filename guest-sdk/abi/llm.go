package abi

import (
	"encoding/json"
	"fmt"
)

// The operations of an llm capability (caps/llm): chat asks the model for
// an answer, labelled with what it was shown and tainted by the model;
// extract asks for an answer the kernel validates against a closed JSON
// Schema (booleans, bounded numbers, enums of constants) and, when the
// capability may endorse, hands back without integrity taints.
const (
	LLMChatOp    = "chat"
	LLMExtractOp = "extract"
)

// Bounds on a chat request (beyond MaxArgLen for the whole document).
const (
	MaxChatMessages = 1024
	MaxChatTools    = 128
)

// ChatRequest is the argument document of chat and extract: the
// OpenAI-compatible chat-completions request a guest may ask for. The
// kernel adds the key and sends exactly what it checked. Message contents
// may hold SplicePlaceholder(i) for Splice[i]: the blob's bytes (UTF-8
// text; a fetch result is spliced as its body) are put there by the
// kernel, so the guest can show the model a document it never read.
type ChatRequest struct {
	Model          string          `json:"model,omitempty"` // "" when the capability allows one model
	Messages       []ChatMessage   `json:"messages"`
	Tools          []ChatTool      `json:"tools,omitempty"`
	ToolChoice     json.RawMessage `json:"tool_choice,omitempty"`
	MaxTokens      int64           `json:"max_tokens,omitempty"` // 0: the capability's max_tokens
	Temperature    *float64        `json:"temperature,omitempty"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	Splice         []Handle        `json:"splice,omitempty"`
}

// ChatMessage is one message of a transcript.
type ChatMessage struct {
	Role       string     `json:"role"` // system, user, assistant or tool
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // assistant
	ToolCallID string     `json:"tool_call_id,omitempty"` // tool
	Name       string     `json:"name,omitempty"`
}

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the tool and carries its arguments (a JSON document,
// as text, as the model wrote it: never trusted).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ChatTool offers the model a tool.
type ChatTool struct {
	Type     string       `json:"type"` // "function"
	Function ToolFunction `json:"function"`
}

// ToolFunction describes a tool: its parameters are a JSON Schema.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ResponseFormat asks for a JSON answer: Type "json_object", or
// "json_schema" with a schema the answer must validate against (the
// kernel checks it; an answer that does not is an error, never returned).
type ResponseFormat struct {
	Type       string            `json:"type"` // text, json_object or json_schema
	JSONSchema *JSONSchemaFormat `json:"json_schema,omitempty"`
}

// JSONSchemaFormat is a named JSON Schema for the answer.
type JSONSchemaFormat struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict,omitempty"`
}

// ChatResponse is the result of chat and extract.
type ChatResponse struct {
	Model        string      `json:"model"`
	Message      ChatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
	Usage        ChatUsage   `json:"usage"`
	// Endorsed reports that the kernel validated the answer against a
	// closed schema and dropped its integrity taints (extract). The
	// content of an endorsed answer is then the kernel's canonical
	// serialisation of the value that validated (object keys sorted by
	// their bytes, no white space, whole numbers as integers, others in
	// their shortest form, strings escaped as encoding/json does but
	// without HTML escapes), never the provider's text: an answer the
	// kernel could not read exactly (a key given twice, even escaped;
	// keys equal but for case; invalid UTF-8 or a lone surrogate; an
	// inexact number; data after the value; tool calls) is an error.
	Endorsed bool `json:"endorsed,omitempty"`
}

// ChatUsage is what the call spent: the tokens as the provider reported
// them, and what the kernel charged to the token budgets.
type ChatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	// Charged is the tokens the kernel took from every budget on the
	// capability's chain: the reported total, but at least the bound it
	// computes from the bytes sent and received (the request body's
	// bytes, plus the smaller of max_tokens and the answer's content
	// and tool calls' bytes), and at most what it reserved (max_tokens
	// plus the request body's bytes), which is also the charge when the
	// report is missing or not believable. See caps/llm, "Tokens".
	Charged int64 `json:"charged,omitempty"`
}

// DecodeChatRequest decodes and bounds-checks a chat argument.
func DecodeChatRequest(b []byte) (ChatRequest, error) {
	var r ChatRequest
	if err := DecodeJSON(b, &r); err != nil {
		return ChatRequest{}, err
	}
	switch {
	case len(r.Messages) == 0:
		return ChatRequest{}, fmt.Errorf("%w: no messages", ErrMalformed)
	case len(r.Messages) > MaxChatMessages:
		return ChatRequest{}, fmt.Errorf("%w: %d messages (max %d)", ErrTooLarge, len(r.Messages), MaxChatMessages)
	case len(r.Tools) > MaxChatTools:
		return ChatRequest{}, fmt.Errorf("%w: %d tools (max %d)", ErrTooLarge, len(r.Tools), MaxChatTools)
	case len(r.Splice) > MaxSplice:
		return ChatRequest{}, fmt.Errorf("%w: %d spliced blobs (max %d)", ErrTooLarge, len(r.Splice), MaxSplice)
	case r.MaxTokens < 0:
		return ChatRequest{}, fmt.Errorf("%w: max_tokens %d", ErrMalformed, r.MaxTokens)
	}
	return r, nil
}
