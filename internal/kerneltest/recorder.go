package kerneltest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Request is one request a Recorder received.
type Request struct {
	Method     string
	RequestURI string // as sent, undecoded
	Path       string // decoded
	Host       string
	Header     http.Header
	Body       []byte // at most 1 MiB
}

func (s Request) String() string {
	return fmt.Sprintf("%s %s (host %s) header=%v body=%q", s.Method, s.RequestURI, s.Host, s.Header, s.Body)
}

// Recorder is a loopback HTTP server that records every request it gets
// before its handler answers, so a test can assert what reached the wire
// (and that nothing reached an origin nobody granted).
type Recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []Request
}

// NewRecorder starts a Recorder. h answers each request, given the request
// as recorded (its body already read); a nil h answers 200 with no body.
// Close it when done.
func NewRecorder(h func(w http.ResponseWriter, r *http.Request, seen Request)) *Recorder {
	rec := &Recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen := rec.record(r)
		if h != nil {
			h(w, r, seen)
		}
	}))
	return rec
}

func (rec *Recorder) record(r *http.Request) Request {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s := Request{Method: r.Method, RequestURI: r.RequestURI, Path: r.URL.Path, Host: r.Host, Header: r.Header.Clone(), Body: b}
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, s)
	rec.mu.Unlock()
	return s
}

// Requests returns the requests received so far, in order.
func (rec *Recorder) Requests() []Request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]Request(nil), rec.reqs...)
}

// Port is the port the server listens on, for building URLs with other
// host names that resolve to it.
func (rec *Recorder) Port() string { return rec.URL[strings.LastIndexByte(rec.URL, ':')+1:] }
