package httpservice

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/egress"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

func TestClients(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Accept") != "application/json" {
			t.Errorf("request %s, Content-Type %q, Accept %q", r.Method, r.Header.Get("Content-Type"), r.Header.Get("Accept"))
		}
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	redirect := errors.New("test: redirected")
	c := NewClients("test: service", redirect)
	defer c.CloseIdleConnections()
	ctx := context.Background()

	// The public client refuses the loopback test server before sending.
	req, err := NewJSONRequest(ctx, srv.URL+"/echo", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.For(false).Do(req)
	var denied *egress.Denied
	if !errors.As(err, &denied) || !strings.Contains(err.Error(), "test: service address 127.0.0.1 is a loopback address") {
		t.Fatalf("public client to loopback: %v", err)
	}

	// The private client reaches it; the answer is read within its bound.
	req, _ = NewJSONRequest(ctx, srv.URL+"/echo", []byte(`{"a":1}`))
	resp, err := c.For(true).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, over, err := ReadAtMost(resp.Body, 7)
	resp.Body.Close()
	if err != nil || over || string(raw) != `{"a":1}` {
		t.Fatalf("ReadAtMost(7) = %q, %v, %v", raw, over, err)
	}

	// A redirect is not followed.
	req, _ = NewJSONRequest(ctx, srv.URL+"/moved", nil)
	if _, err = c.For(true).Do(req); !errors.Is(err, redirect) {
		t.Fatalf("redirect: %v", err)
	}
}

func TestReadAtMost(t *testing.T) {
	raw, over, err := ReadAtMost(strings.NewReader("12345678"), 7)
	if err != nil || !over || string(raw) != "12345678" {
		t.Fatalf("ReadAtMost(8 bytes, 7) = %q, %v, %v", raw, over, err)
	}
}

// timeoutErr is a transport timeout (as a slow TLS handshake reports).
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "handshake timeout with tok_secret" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestFailure(t *testing.T) {
	secret := kindapi.NewSecret("tok_secret")
	f := Failure{What: "k: op", Peer: "service", Secret: secret, Timeout: 3 * time.Second}
	live := context.Background()
	expired, cancel := context.WithCancel(live)
	cancel()
	type want struct {
		errno        abi.Errno
		notPerformed bool
		msg          string
	}
	for _, tc := range []struct {
		name string
		f    Failure
		ctx  context.Context
		err  error
		want want
	}{
		{"denied", f, live, &egress.Denied{Reason: "a loopback address"},
			want{abi.EDENIED, true, "k: op: address is a loopback address and allow_private is false"}},
		{"unreachable", f, live, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("refused tok_secret")},
			want{abi.EIO, true, "k: op: service unreachable, nothing was sent: dial tcp: refused [redacted]"}},
		{"deadline", f, expired, errors.New("context canceled"),
			want{abi.ETIMEDOUT, false, "k: op: the service did not answer within 3s"}},
		{"transport timeout, not counted", f, live, timeoutErr{},
			want{abi.EIO, false, "k: op: handshake timeout with [redacted]"}},
		{"transport timeout, counted", Failure{What: "k", Peer: "service", Other: "k: service", Secret: secret, Timeout: time.Second, NetTimeouts: true}, live, timeoutErr{},
			want{abi.ETIMEDOUT, false, "k: the service did not answer within 1s"}},
		{"other", Failure{What: "k", Peer: "service", Other: "k: service", Secret: secret}, live, errors.New("EOF after tok_secret"),
			want{abi.EIO, false, "k: service: EOF after [redacted]"}},
	} {
		err := tc.f.Of(tc.ctx, tc.err)
		if got := kindapi.ErrnoOf(err); got != tc.want.errno {
			t.Errorf("%s: errno %v, want %v (%v)", tc.name, got, tc.want.errno, err)
		}
		if got := !kindapi.Performed(err); got != tc.want.notPerformed {
			t.Errorf("%s: not performed %v, want %v", tc.name, got, tc.want.notPerformed)
		}
		if err.Error() != tc.want.msg {
			t.Errorf("%s: %q, want %q", tc.name, err.Error(), tc.want.msg)
		}
	}
}
