package fakellm

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// MessageOverhead is the tokens every message and tool definition costs on
// top of its text.
const MessageOverhead = 4

// CountTokens is the fake's tokenizer: one token per 4 bytes, rounded up.
func CountTokens(s string) int64 { return (int64(len(s)) + 3) / 4 }

// PromptTokens is the prompt_tokens the fake reports for a request. The
// fake's tokenizer is deliberately trivial, so a test can compute the
// usage it expects by hand:
//
//	CountTokens(s)    = ceil(len(s) / 4), len in bytes
//	message           = MessageOverhead + CountTokens(content)
//	                    + CountTokens(name) + CountTokens(arguments) of each tool call
//	tool definition   = MessageOverhead + CountTokens(name) + CountTokens(description)
//	                    + CountTokens(parameters, compacted JSON)
//	prompt_tokens     = sum over messages + sum over tool definitions
//	completion_tokens = CountTokens(content)
//	                    + CountTokens(name) + CountTokens(arguments) of each tool call
//	total_tokens      = prompt_tokens + completion_tokens
//
// response_format is not counted (servers turn it into a grammar, not a
// prompt). A completion is never more than the request's limit: the
// smaller of max_tokens and max_completion_tokens.
func PromptTokens(req *ChatRequest) int64 {
	var n int64
	for _, m := range req.Messages {
		n += MessageOverhead + CountTokens(m.Text())
		for _, c := range m.ToolCalls {
			n += CountTokens(c.Function.Name) + CountTokens(c.Function.Arguments)
		}
	}
	for _, t := range req.Tools {
		var p bytes.Buffer
		if len(t.Function.Parameters) > 0 && json.Compact(&p, t.Function.Parameters) != nil {
			p.Reset()
			p.Write(t.Function.Parameters)
		}
		n += MessageOverhead + CountTokens(t.Function.Name) + CountTokens(t.Function.Description) + CountTokens(p.String())
	}
	return n
}

// completionTokens counts an answer's message.
func completionTokens(m Message) int64 {
	n := CountTokens(m.Text())
	for _, c := range m.ToolCalls {
		n += CountTokens(c.Function.Name) + CountTokens(c.Function.Arguments)
	}
	return n
}

// limit is the request's completion limit, 0 for none.
func limit(req *ChatRequest) int64 {
	var l int64
	for _, p := range []*int64{req.MaxTokens, req.MaxCompletionTokens} {
		if p != nil && (l == 0 || *p < l) {
			l = *p
		}
	}
	return l
}

// truncate cuts an answer to at most max completion tokens (max > 0),
// reporting whether it cut. Content is cut first; then tool calls are kept
// while they fit, the first that does not has its arguments cut (so they
// are no longer valid JSON, as a real model's would be), and the rest are
// dropped.
func truncate(m Message, max int64) (Message, bool) {
	if completionTokens(m) <= max {
		return m, false
	}
	left := max
	if m.Content != nil {
		s := cutBytes(*m.Content, 4*left)
		m.Content = &s
		left -= CountTokens(s)
	}
	var calls []ToolCall
	for _, c := range m.ToolCalls {
		cost := CountTokens(c.Function.Name) + CountTokens(c.Function.Arguments)
		if cost <= left {
			calls = append(calls, c)
			left -= cost
			continue
		}
		if n := CountTokens(c.Function.Name); n < left {
			c.Function.Arguments = cutBytes(c.Function.Arguments, 4*(left-n))
			calls = append(calls, c)
		}
		break
	}
	m.ToolCalls = calls
	if m.Content == nil && len(calls) == 0 {
		s := ""
		m.Content = &s
	}
	return m, true
}

// cutBytes returns the longest prefix of s of at most n bytes that does
// not split a UTF-8 sequence.
func cutBytes(s string, n int64) string {
	if int64(len(s)) <= n {
		return s
	}
	i := int(n)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
