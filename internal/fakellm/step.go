package fakellm

import (
	"maps"
	"time"
)

// A Step is one answer of the model, or one way of misbehaving: each chat
// request the fake accepts consumes the next step of its script (or asks
// its responder for one). The zero Step answers empty text.
//
// Answers: Text, JSON, Calls. Failures and misbehaviours: Error, Garbage,
// Huge, Hang, RawBody, SchemaViolation. Modifiers, which return a changed
// copy and combine: WithUsage, WithFinishReason, WithContentType,
// WithHeader, Trickle, After.
type Step struct {
	kind        stepKind
	text        string
	calls       []Call
	status      int    // Error, RawBody
	body        string // RawBody
	size        int    // Huge
	usage       *Usage
	finish      string
	contentType string
	header      map[string]string
	chunk       int
	every       time.Duration
	after       time.Duration
}

type stepKind int

const (
	kindText stepKind = iota
	kindCalls
	kindError
	kindGarbage
	kindHuge
	kindHang
	kindRaw
	kindViolation
)

// Call is one tool call of a scripted answer. Arguments is sent verbatim
// as function.arguments: it need not be valid JSON.
type Call struct {
	Name      string
	Arguments string

	id string // set by the compromised model; else call_<request>_<i>
}

// CallTool returns a Call of tool name with args marshalled to JSON. It
// panics if args cannot be marshalled (a bug in the test).
func CallTool(name string, args any) Call {
	return Call{Name: name, Arguments: string(marshal(args))}
}

// Text answers content s, finish_reason "stop" (or "length" if cut to the
// request's max_tokens).
func Text(s string) Step { return Step{kind: kindText, text: s} }

// JSON answers v marshalled as the content, as a model asked for
// response_format json_object or json_schema would. It panics if v cannot
// be marshalled. A string v is marshalled too (a JSON string); to answer
// JSON text verbatim, use Text.
func JSON(v any) Step { return Step{kind: kindText, text: string(marshal(v))} }

// Calls answers tool calls, content null, finish_reason "tool_calls".
// Call ids are "call_<request>_<i>", from the request's sequence number and
// the call's index.
func Calls(calls ...Call) Step {
	return Step{kind: kindCalls, calls: append([]Call(nil), calls...)}
}

// Error answers status with {"error":{"message":message,"type":T}}, T from
// the status (see errorType).
func Error(status int, message string) Step {
	return Step{kind: kindError, status: status, text: message}
}

// Garbage answers 200 with Content-Type application/json and a body that
// is not JSON.
func Garbage() Step { return Step{kind: kindGarbage} }

// Huge answers 200 with a well-formed chat completion of exactly n bytes
// (at least a few hundred), most of them content, written in 64 KiB
// pieces, with Content-Length set: a client that does not bound what it
// reads will read it all.
func Huge(n int) Step { return Step{kind: kindHuge, size: n} }

// Hang sends 200 headers and the start of a body, then never finishes: the
// handler waits until the client goes away or the server is closed, and on
// Close aborts the connection, so the client sees an error, never a
// complete body. To hang before any header, use Text(...).After(d).
func Hang() Step { return Step{kind: kindHang} }

// RawBody answers status with exactly body and Content-Type contentType
// (none when ""): for anything the other steps do not cover, such as
// usage numbers that are not integers.
func RawBody(status int, contentType, body string) Step {
	return Step{kind: kindRaw, status: status, contentType: contentType, body: body}
}

// SchemaViolation answers JSON that the request's json_schema does not
// accept: every boolean, number, integer, enum and const becomes a string,
// and every object gains an "injected" property (see Compromised mode for
// the generator). Without a json_schema it answers a JSON string.
func SchemaViolation() Step { return Step{kind: kindViolation} }

// WithUsage makes the answer report u as its usage instead of the counted
// one (negative, huge, inconsistent...). The answer itself is unchanged.
func (s Step) WithUsage(u Usage) Step {
	s.usage = &u
	return s
}

// WithFinishReason reports reason instead of the true one.
func (s Step) WithFinishReason(reason string) Step {
	s.finish = reason
	return s
}

// WithContentType sends Content-Type ct instead of application/json.
func (s Step) WithContentType(ct string) Step {
	s.contentType = ct
	return s
}

// WithHeader adds a response header (Retry-After on a 429, say).
func (s Step) WithHeader(key, value string) Step {
	h := maps.Clone(s.header)
	if h == nil {
		h = map[string]string{}
	}
	h[key] = value
	s.header = h
	return s
}

// Trickle writes the body chunk bytes at a time, flushing each, with every
// between chunks. Waits end early when the client goes away or the server
// is closed.
func (s Step) Trickle(chunk int, every time.Duration) Step {
	if chunk < 1 {
		chunk = 1
	}
	s.chunk, s.every = chunk, every
	return s
}

// After waits d before answering anything, headers included.
func (s Step) After(d time.Duration) Step {
	s.after = d
	return s
}
