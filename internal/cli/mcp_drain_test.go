package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

type discardCloser struct{ io.Writer }

func (discardCloser) Close() error { return nil }

// TestStdioDrain: the input's end is held back until each request read
// is answered or canceled; notifications and the server's own requests
// wait for nothing.
func TestStdioDrain(t *testing.T) {
	d := newStdioDrain(context.Background(), time.Minute)
	r := d.reader(nopCloser{strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"a"}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
			`{"jsonrpc":"2.0","id":"x","method":"b"}` + "\n" +
			`{"jsonrpc":"2.0","id":3,"method":"c"}`)})
	w := d.writer(discardCloser{io.Discard})
	ended := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(r)
		ended <- err
	}()
	mustWait := func(what string) {
		t.Helper()
		select {
		case err := <-ended:
			t.Fatalf("the input ended (%v) %s", err, what)
		case <-time.After(50 * time.Millisecond): // can only hide a failure, never cause one
		}
	}
	mustWait("with three requests unanswered")
	// The server's own request, and an answer split across writes.
	io.WriteString(w, `{"jsonrpc":"2.0","id":1,"method":"elicitation/create"}`+"\n"+`{"jsonrpc":"2.0","id":1.0,`)
	io.WriteString(w, `"result":{}}`+"\n")
	io.WriteString(w, `{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"no"}}`+"\n")
	mustWait("with request 3 unanswered")
	// The client cancels 3: no answer will come.
	d.mu.Lock()
	d.read([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`))
	d.mu.Unlock()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the input never ended with every request answered or canceled")
	}

	// A bound: an answer that never comes ends the wait.
	d = newStdioDrain(context.Background(), 10*time.Millisecond)
	if _, err := io.ReadAll(d.reader(nopCloser{strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"a"}` + "\n")})); err != nil {
		t.Fatal(err)
	}
}
