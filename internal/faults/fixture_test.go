//go:build unix

package faults

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// maxHold bounds how long the fixture holds a request whose submission is
// never released (a safety: every scenario releases its own).
const maxHold = 2 * time.Minute

// request is one request the fixture got.
type request struct {
	Sub      string // the submission, from the path /f/<submission>/<step>
	Step     int
	Attempt  string // the run's nonce (a=): one per attempt
	Method   string
	Path     string // without the query
	Arrived  time.Time
	Held     bool      // ?hold=1: answered only once its submission is released
	Answered time.Time // when the handler returned (zero while held)
	Aborted  bool      // the caller went away while it was held
}

// fixture is the loopback HTTP server the guests call: it records every
// request (its submission, method, path, arrival time) and holds those
// asking to be held until the test releases their submission.
type fixture struct {
	srv *httptest.Server

	mu       sync.Mutex
	reqs     []*request
	released map[string]chan struct{} // by submission; closed on release
	holding  map[string]int           // by submission: held requests waiting now
}

func startFixture(t testing.TB) *fixture {
	fx := &fixture{released: map[string]chan struct{}{}, holding: map[string]int{}}
	fx.srv = httptest.NewServer(http.HandlerFunc(fx.serve))
	t.Cleanup(func() {
		fx.releaseAll()
		fx.srv.Close()
	})
	return fx
}

func (fx *fixture) URL() string { return fx.srv.URL }

func (fx *fixture) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rq := &request{Method: r.Method, Path: r.URL.Path, Arrived: time.Now(), Held: q.Get("hold") == "1", Attempt: q.Get("a")}
	// The server notices a caller that went away (r.Context() ends) only
	// once the body is read.
	io.Copy(io.Discard, r.Body)
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if len(parts) == 3 && parts[0] == "f" {
		rq.Sub = parts[1]
		rq.Step, _ = strconv.Atoi(parts[2])
	}
	fx.mu.Lock()
	fx.reqs = append(fx.reqs, rq)
	ch := fx.releaseChan(rq.Sub)
	if rq.Held {
		fx.holding[rq.Sub]++
	}
	fx.mu.Unlock()
	aborted := false
	if rq.Held {
		select {
		case <-ch:
		case <-r.Context().Done():
			aborted = true
		case <-time.After(maxHold):
		}
	}
	fx.mu.Lock()
	if rq.Held {
		fx.holding[rq.Sub]--
	}
	rq.Answered, rq.Aborted = time.Now(), aborted
	fx.mu.Unlock()
	fmt.Fprintf(w, "step %d of %s\n", rq.Step, rq.Sub)
}

// releaseChan is sub's release channel; fx.mu held.
func (fx *fixture) releaseChan(sub string) chan struct{} {
	ch, ok := fx.released[sub]
	if !ok {
		ch = make(chan struct{})
		fx.released[sub] = ch
	}
	return ch
}

// release answers sub's held requests, and those it makes from now on.
func (fx *fixture) release(sub string) {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	ch := fx.releaseChan(sub)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (fx *fixture) releaseAll() {
	fx.mu.Lock()
	var subs []string
	for s := range fx.released {
		subs = append(subs, s)
	}
	fx.mu.Unlock()
	for _, s := range subs {
		fx.release(s)
	}
}

// holdingNow reports whether a held request of sub waits now.
func (fx *fixture) holdingNow(sub string) bool {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	return fx.holding[sub] > 0
}

// requests returns copies of sub's requests in arrival order ("" for the
// requests that named no submission).
func (fx *fixture) requests(sub string) []request {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	var out []request
	for _, r := range fx.reqs {
		if r.Sub == sub {
			out = append(out, *r)
		}
	}
	return out
}
