// Package paytest is a loopback payment provider for tests and examples:
// it speaks the provider API of caps/pay (POST /charges), records every
// charge it accepts, honours idempotency keys, and can be told to fail the
// next charges, to hang, or to require a particular instrument. Clock is a
// settable time source for pay.WithClock.
//
//	p := paytest.NewProvider()
//	defer p.Close()
//	spec := `{"provider":"` + p.URL + `","allow_private":true,...}`
//	...
//	if n := len(p.Charges()); n != 1 { ... }
package paytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// Charge is one charge the provider accepted.
type Charge struct {
	ID             string          `json:"id"`
	AmountMinor    int64           `json:"amount_minor"`
	Currency       string          `json:"currency"`
	Payee          string          `json:"payee"`
	Instrument     string          `json:"instrument"`
	IdempotencyKey string          `json:"idempotency_key"`
	Description    string          `json:"description,omitempty"`
	Details        json.RawMessage `json:"details,omitempty"`
	Time           time.Time       `json:"time"`
}

// Provider is a loopback payment provider. Its methods are safe for
// concurrent use.
type Provider struct {
	// URL is the provider's base URL, e.g. "http://127.0.0.1:41234".
	URL string

	srv      *httptest.Server
	quit     chan struct{}
	quitOnce sync.Once

	mu         sync.Mutex
	charges    []Charge
	byKey      map[string]int // idempotency key -> index in charges
	failNext   int
	hang       bool
	instrument string // required instrument; "" accepts any

	requests atomic.Int64
	replays  atomic.Int64
}

// NewProvider starts a provider on a loopback port.
func NewProvider() *Provider {
	p := &Provider{quit: make(chan struct{}), byKey: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	return p
}

// Close releases hanging requests and stops the server.
func (p *Provider) Close() {
	p.quitOnce.Do(func() { close(p.quit) })
	p.srv.Close()
}

// Charges returns a copy of the charges accepted so far, in order. A
// replayed idempotency key adds none.
func (p *Provider) Charges() []Charge {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Charge(nil), p.charges...)
}

// Total returns the sum of accepted charges in minor units.
func (p *Provider) Total() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var t int64
	for _, c := range p.charges {
		t += c.AmountMinor
	}
	return t
}

// Requests returns how many POST /charges requests arrived (accepted,
// replayed or refused).
func (p *Provider) Requests() int64 { return p.requests.Load() }

// Replays returns how many requests were answered from an earlier charge
// with the same idempotency key.
func (p *Provider) Replays() int64 { return p.replays.Load() }

// FailNext makes the next n charge requests fail with HTTP 500 (before
// anything is recorded).
func (p *Provider) FailNext(n int) {
	p.mu.Lock()
	p.failNext = n
	p.mu.Unlock()
}

// Hang makes charge requests block, recording nothing, until the client
// gives up or the provider is closed. Hang(false) affects later requests.
func (p *Provider) Hang(on bool) {
	p.mu.Lock()
	p.hang = on
	p.mu.Unlock()
}

// RequireInstrument makes the provider refuse (HTTP 402) charges whose
// instrument is not tok; "" accepts any.
func (p *Provider) RequireInstrument(tok string) {
	p.mu.Lock()
	p.instrument = tok
	p.mu.Unlock()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/charges" {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
		return
	}
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "POST only"})
		return
	}
	p.requests.Add(1)
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "read: " + err.Error()})
		return
	}
	var c Charge
	if err := json.Unmarshal(body, &c); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad JSON"})
		return
	}
	p.mu.Lock()
	hang := p.hang
	p.mu.Unlock()
	if hang {
		select {
		case <-r.Context().Done():
		case <-p.quit:
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failNext > 0 {
		p.failNext--
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "provider failure (injected)"})
		return
	}
	switch {
	case c.AmountMinor <= 0, len(c.Currency) != 3, c.Payee == "", c.Instrument == "", c.IdempotencyKey == "":
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "amount_minor, currency, payee, instrument and idempotency_key are required"})
		return
	case p.instrument != "" && c.Instrument != p.instrument:
		writeJSON(w, http.StatusPaymentRequired, map[string]string{"error": "instrument declined"})
		return
	}
	if i, ok := p.byKey[c.IdempotencyKey]; ok {
		prev := p.charges[i]
		if prev.AmountMinor != c.AmountMinor || prev.Currency != c.Currency || prev.Payee != c.Payee {
			writeJSON(w, http.StatusConflict, map[string]string{"error": "idempotency key reused for a different charge"})
			return
		}
		p.replays.Add(1)
		writeJSON(w, http.StatusOK, map[string]string{"id": prev.ID, "status": "succeeded"})
		return
	}
	c.ID = fmt.Sprintf("ch_%d", len(p.charges)+1)
	c.Time = time.Now()
	p.byKey[c.IdempotencyKey] = len(p.charges)
	p.charges = append(p.charges, c)
	writeJSON(w, http.StatusCreated, map[string]string{"id": c.ID, "status": "succeeded"})
}
