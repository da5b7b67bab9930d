package fakellm

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// statusWriter records the status of a request when it is written. It
// unwraps, so http.ResponseController still reaches Flush.
type statusWriter struct {
	http.ResponseWriter
	s     *Server
	i     int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.s.mu.Lock()
		w.s.reqs[w.i].status = code
		w.s.mu.Unlock()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Add(-1)

	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, s.cfg.maxRequest))
	var tooBig *http.MaxBytesError
	errors.As(err, &tooBig)
	s.mu.Lock()
	i := len(s.reqs)
	s.reqs = append(s.reqs, record{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
	s.stats.Requests++
	s.mu.Unlock()
	w := &statusWriter{ResponseWriter: rw, s: s, i: i}

	switch r.URL.Path {
	case ModelsPath:
		if r.Method != http.MethodGet {
			s.refuse(w, http.StatusMethodNotAllowed, "use GET for "+ModelsPath)
			return
		}
		if !s.authorized(r) {
			s.refuse(w, http.StatusUnauthorized, "invalid or missing API key")
			return
		}
		list := ModelList{Object: "list"}
		for _, m := range s.cfg.models {
			list.Data = append(list.Data, Model{ID: m, Object: "model", OwnedBy: "fakellm"})
		}
		s.write(w, http.StatusOK, list)
	case ChatPath:
		if r.Method != http.MethodPost {
			s.refuse(w, http.StatusMethodNotAllowed, "use POST for "+ChatPath)
			return
		}
		if !s.authorized(r) {
			s.refuse(w, http.StatusUnauthorized, "invalid or missing API key")
			return
		}
		if tooBig != nil {
			s.refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", s.cfg.maxRequest))
			return
		}
		if err != nil {
			s.refuse(w, http.StatusBadRequest, "reading the body: "+err.Error())
			return
		}
		var req ChatRequest
		if err := json.Unmarshal(body, &req); err != nil {
			s.refuse(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
			return
		}
		if msg := validate(&req); msg != "" {
			s.refuse(w, http.StatusBadRequest, msg)
			return
		}
		s.mu.Lock()
		in := s.request(i)
		s.mu.Unlock()
		in.Chat = &req
		step, ok := s.step(in)
		if !ok {
			s.refuse(w, http.StatusInternalServerError, step.text)
			return
		}
		s.mu.Lock()
		s.stats.Answers++
		s.mu.Unlock()
		s.render(w, r.Context(), in, step)
	default:
		s.refuse(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
}

// authorized checks the bearer key, if one is configured.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.key == "" {
		return true
	}
	got := r.Header.Get("Authorization")
	return subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+s.cfg.key)) == 1
}

// validate returns why a request is malformed, "" if it is not.
func validate(req *ChatRequest) string {
	if req.Stream {
		return "stream=true is not supported: fakellm answers whole completions only"
	}
	if len(req.Messages) == 0 {
		return "messages must not be empty"
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant":
		case "tool":
			if m.ToolCallID == "" {
				return fmt.Sprintf("messages[%d]: a tool message needs tool_call_id", i)
			}
		default:
			return fmt.Sprintf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	for _, p := range []*int64{req.MaxTokens, req.MaxCompletionTokens} {
		if p != nil && *p < 1 {
			return "max_tokens must be at least 1"
		}
	}
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return fmt.Sprintf("tools[%d]: want type \"function\" and a name", i)
		}
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case "text", "json_object":
		case "json_schema":
			if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
				return "response_format json_schema needs json_schema.schema"
			}
		default:
			return fmt.Sprintf("response_format: unknown type %q", f.Type)
		}
	}
	return ""
}

// step chooses the answer to a valid chat request: the compromised
// model's next move, else the script, else the responder. With none of
// them it returns false and an error step saying so.
func (s *Server) step(in Request) (Step, bool) {
	if s.cfg.compromised {
		if st, ok := s.compromisedStep(in.Chat); ok {
			return st, true
		}
	}
	s.mu.Lock()
	if s.next < len(s.cfg.script) {
		st := s.cfg.script[s.next]
		s.next++
		s.stats.StepsUsed++
		s.stats.StepsLeft--
		s.mu.Unlock()
		return st, true
	}
	used := s.next
	s.mu.Unlock()
	switch {
	case s.cfg.responder != nil:
		return s.cfg.responder(in), true
	case s.cfg.compromised:
		return doneStep(in.Chat), true
	}
	return Error(http.StatusInternalServerError,
		fmt.Sprintf("fakellm: script exhausted: request #%d came after all %d steps were used", in.Seq, used)), false
}

// refuse answers an error the fake itself decided on.
func (s *Server) refuse(w http.ResponseWriter, status int, msg string) {
	s.mu.Lock()
	s.stats.Refused++
	s.mu.Unlock()
	s.write(w, status, errorBody(status, msg))
}

func errorBody(status int, msg string) ErrorResponse {
	return ErrorResponse{Error: ErrorBody{Message: msg, Type: errorType(status)}}
}

// errorType is the OpenAI error type of a status.
func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// write answers v as JSON.
func (s *Server) write(w http.ResponseWriter, status int, v any) {
	b := marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// marshal is json.Marshal without HTML escaping, so "<" stays "<" in
// content as real servers send it. It panics on an error: only the fake's
// own values, and test values (JSON, Tool), reach it.
func marshal(v any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		panic(fmt.Sprintf("fakellm: marshal %T: %v", v, err))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// wait sleeps d; it returns false if the client went away, and aborts the
// connection if the server is closed.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		panic(http.ErrAbortHandler)
	}
}

// render writes a step's answer.
func (s *Server) render(w http.ResponseWriter, ctx context.Context, in Request, st Step) {
	// A write blocked on a client that does not read must not keep Close
	// waiting: on Close, the connection's write deadline passes.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-s.done:
			http.NewResponseController(w).SetWriteDeadline(time.Unix(1, 0))
		case <-stop:
		}
	}()
	if !s.wait(ctx, st.after) {
		return
	}
	for k, v := range st.header {
		w.Header().Set(k, v)
	}
	ct := "application/json"
	if st.contentType != "" {
		ct = st.contentType
	}
	status := http.StatusOK
	var body io.Reader
	var size int64
	switch st.kind {
	case kindText, kindCalls, kindViolation:
		b := marshal(s.completion(in, st))
		body, size = bytes.NewReader(b), int64(len(b))
	case kindError:
		status = st.status
		b := marshal(errorBody(st.status, st.text))
		body, size = bytes.NewReader(b), int64(len(b))
	case kindGarbage:
		b := "<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>\n"
		body, size = strings.NewReader(b), int64(len(b))
	case kindRaw:
		status, ct = st.status, st.contentType
		body, size = strings.NewReader(st.body), int64(len(st.body))
	case kindHuge:
		body, size = s.hugeBody(in, st.size)
	case kindHang:
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, `{"id":"chatcmpl-fake-%d","object":"chat.completion","created":%d,"choices":[{"index":0,"message":{"role":"assistant","content":"`, in.Seq, created)
		http.NewResponseController(w).Flush()
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			panic(http.ErrAbortHandler)
		}
	}
	if ct != "" {
		w.Header().Set("Content-Type", ct)
	} else {
		w.Header()["Content-Type"] = nil // no sniffing: send none
	}
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(status)
	chunk := 64 << 10
	if st.chunk > 0 {
		chunk = st.chunk
	}
	buf := make([]byte, chunk)
	for first := true; ; first = false {
		if !first && !s.wait(ctx, st.every) {
			return
		}
		n, err := io.ReadFull(body, buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if st.chunk > 0 {
				http.NewResponseController(w).Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// completion builds the chat completion a well-formed answer sends.
func (s *Server) completion(in Request, st Step) ChatResponse {
	req := in.Chat
	m := Message{Role: "assistant"}
	switch st.kind {
	case kindText:
		t := st.text
		m.Content = &t
	case kindCalls:
		for i, c := range st.calls {
			id := c.id
			if id == "" {
				id = fmt.Sprintf("call_%d_%d", in.Seq, i)
			}
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Type: "function",
				Function: FunctionCall{Name: c.Name, Arguments: c.Arguments}})
		}
	case kindViolation:
		t := string(schemaAnswer(req, "not what the schema allows", true))
		m.Content = &t
	}
	finish := FinishStop
	if len(m.ToolCalls) > 0 {
		finish = FinishToolCalls
	}
	if l := limit(req); l > 0 {
		var cut bool
		if m, cut = truncate(m, l); cut {
			finish = FinishLength
		}
	}
	if st.finish != "" {
		finish = st.finish
	}
	prompt, compl := PromptTokens(req), completionTokens(m)
	s.mu.Lock()
	s.stats.PromptTokens += prompt
	s.stats.CompletionTokens += compl
	s.mu.Unlock()
	u := Usage{PromptTokens: prompt, CompletionTokens: compl, TotalTokens: prompt + compl}
	if st.usage != nil {
		u = *st.usage
	}
	model := req.Model
	if model == "" {
		model = s.cfg.models[0]
	}
	return ChatResponse{
		ID: fmt.Sprintf("chatcmpl-fake-%d", in.Seq), Object: "chat.completion", Created: created,
		Model: model, Choices: []Choice{{Index: 0, Message: m, FinishReason: finish}}, Usage: u,
	}
}

// hugeBody is a well-formed completion of n bytes, generated as it is
// read.
func (s *Server) hugeBody(in Request, n int) (io.Reader, int64) {
	model := in.Chat.Model
	if model == "" {
		model = s.cfg.models[0]
	}
	head := fmt.Sprintf(`{"id":"chatcmpl-fake-%d","object":"chat.completion","created":%d,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"`,
		in.Seq, created, model)
	tail := `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}`
	pad := int64(n) - int64(len(head)+len(tail))
	if pad < 0 {
		pad = 0
	}
	return io.MultiReader(strings.NewReader(head), io.LimitReader(repeat('A'), pad), strings.NewReader(tail)),
		int64(len(head)+len(tail)) + pad
}

// repeat reads b forever.
type repeat byte

func (r repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}
