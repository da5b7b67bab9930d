package net

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

// fixture is a Kind whose resolver maps the test names to loopback, and a
// log of everything it printed.
type fixture struct {
	t    *testing.T
	k    *Kind
	logs *syncBuffer
	gc   kindapi.GrantContext
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	loopback := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "flights.example", "other.example":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "mapped.example":
			return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	f := &fixture{t: t, k: New(append([]Option{WithLookup(loopback)}, opts...)...), logs: &syncBuffer{}, gc: testGrantContext(t)}
	t.Cleanup(func() {
		f.k.CloseIdleConnections()
		if strings.Contains(f.logs.String(), testSecret) {
			t.Errorf("the secret appears in the logs:\n%s", f.logs)
		}
	})
	return f
}

// grant mints a scope for origin "http://<name>:<port of srv>" with extra
// spec fields.
func (f *fixture) grant(name string, srv *httptest.Server, extra string) *Scope {
	f.t.Helper()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	spec := fmt.Sprintf(`{"origin":"http://%s:%s"%s}`, name, port, extra)
	s, err := f.k.Grant(f.gc, []byte(spec))
	if err != nil {
		f.t.Fatalf("Grant(%s): %v", spec, err)
	}
	b, _ := s.MarshalJSON()
	if strings.Contains(string(b), testSecret) || strings.Contains(fmt.Sprint(s), testSecret) {
		f.t.Errorf("the secret appears in the scope: %s", b)
	}
	return s.(*Scope)
}

// fetch invokes "fetch" with req; blobs are the blobs the guest holds.
func (f *fixture) fetch(s *Scope, req abi.HTTPRequest, blobs map[abi.Handle]*kindapi.Blob) (abi.HTTPResponse, *kindapi.Result, error) {
	f.t.Helper()
	args, err := abi.EncodeHTTPRequest(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.call(s, args, blobs)
}

func (f *fixture) call(s *Scope, args []byte, blobs map[abi.Handle]*kindapi.Blob) (abi.HTTPResponse, *kindapi.Result, error) {
	f.t.Helper()
	resolve := func(h abi.Handle) (*kindapi.Blob, error) {
		if b, ok := blobs[h]; ok {
			return b, nil
		}
		return nil, kindapi.ErrBadHandle
	}
	logger := hclog.New(&hclog.LoggerOptions{Output: f.logs, Level: hclog.Trace})
	call := kindtest.NewCall(abi.NetFetchOp, args, s, kindapi.TaskInfo{ID: "t1"}, logger, resolve)
	res, err := f.invoke(call)
	if err != nil {
		if strings.Contains(err.Error(), testSecret) {
			f.t.Errorf("the secret appears in an error: %v", err)
		}
		var ke *kindapi.Error
		if !errors.As(err, &ke) {
			f.t.Errorf("Invoke error %v is %T, not *kindapi.Error", err, err)
		}
		return abi.HTTPResponse{}, nil, err
	}
	if bytes.Contains(res.Data, []byte(testSecret)) {
		f.t.Errorf("the secret appears in the response given to the guest")
	}
	resp, err := abi.DecodeHTTPResponse(res.Data)
	if err != nil {
		f.t.Fatalf("result does not decode: %v", err)
	}
	return resp, res, nil
}

// invoke prepares call and runs its effect, as kerneltest.Invoke does,
// and checks what the kernel would show of it: what an approver sees and
// what a constraint judges never hold an injected secret, and a prepared
// fetch is a sink cleared as its scope is.
func (f *fixture) invoke(call *kindapi.Call) (*kindapi.Result, error) {
	f.t.Helper()
	op, err := f.k.Prepare(call)
	if err != nil {
		return nil, err
	}
	s := call.Scope.(*Scope)
	clearance, _ := s.SinkClearance()
	if op.Sink == nil || op.Sink.Clearance != clearance || op.Sink.RefusesTainted != s.RefusesTainted() {
		f.t.Errorf("prepared fetch sink %+v, want clearance %v refuses tainted %v", op.Sink, clearance, s.RefusesTainted())
	}
	if op.Show == nil {
		f.t.Errorf("a prepared fetch has no Show")
	} else if shown := fmt.Sprint(op.Show()); strings.Contains(shown, testSecret) {
		f.t.Errorf("the secret appears in what an approver is shown: %s", shown)
	}
	if op.Vars != nil {
		if v, err := op.Vars(); err == nil && strings.Contains(fmt.Sprint(v), testSecret) {
			f.t.Errorf("the secret appears in what a constraint sees: %v", v)
		}
	}
	if op.Effect == nil {
		f.t.Fatalf("a prepared fetch has no effect")
	}
	return op.Effect(context.Background())
}

func wantErrno(t *testing.T, err error, want abi.Errno, mention string) {
	t.Helper()
	if got := kindapi.ErrnoOf(err); got != want {
		t.Fatalf("errno = %s (%v), want %s", got, err, want)
	}
	if mention != "" && !strings.Contains(err.Error(), mention) {
		t.Errorf("error %q does not mention %q", err, mention)
	}
}

// flightsServer serves /search (echoing what it saw) and counts hits.
type flightsServer struct {
	*httptest.Server
	hits atomic.Int64
	last atomic.Pointer[http.Request]
	body atomic.Pointer[[]byte]
}

func newFlights(t *testing.T, extra func(mux *http.ServeMux)) *flightsServer {
	t.Helper()
	fs := &flightsServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fs.body.Store(&b)
		w.Header().Set("Set-Cookie", "session=abc")
		w.Header().Set("X-Seen-Uri", r.RequestURI)
		w.Header().Set("X-Seen-Method", r.Method)
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "results for %s", r.URL.Path)
	})
	if extra != nil {
		extra(mux)
	}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.hits.Add(1)
		fs.last.Store(r)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(fs.Close)
	return fs
}

func TestFetchAllowed(t *testing.T) {
	f := newFixture(t)
	srv := newFlights(t, nil)
	s := f.grant("flights.example", srv.Server, `,"paths":["/search"],"allow_private":true,
	  "headers":[{"name":"Authorization","env":"FLIGHTS_TOKEN","prefix":"Bearer "}]`)
	for _, url := range []string{"/search/../search/%7euk/./x?q=1&r=%2F", s.Origin() + "/search/~uk/x?q=1&r=%2F"} {
		resp, res, err := f.fetch(s, abi.HTTPRequest{Method: "get", URL: url, Header: map[string][]string{"Accept": {"text/plain"}}}, nil)
		if err != nil {
			t.Fatalf("fetch %s: %v", url, err)
		}
		if resp.Status != 200 || string(resp.Body) != "results for /search/~uk/x" {
			t.Errorf("fetch %s = %d %q, want 200 %q", url, resp.Status, resp.Body, "results for /search/~uk/x")
		}
		if got := resp.Header["X-Seen-Uri"]; len(got) != 1 || got[0] != "/search/~uk/x?q=1&r=%2F" {
			t.Errorf("server saw %v, want the canonical /search/~uk/x?q=1&r=%%2F", got)
		}
		if got := resp.Header["X-Seen-Method"]; len(got) != 1 || got[0] != "GET" {
			t.Errorf("server saw method %v, want GET", got)
		}
		if _, ok := resp.Header["Set-Cookie"]; ok {
			t.Error("Set-Cookie reached the guest")
		}
		if want := []string{"web:" + s.Origin()}; fmt.Sprint(res.Label.Integ()) != fmt.Sprint(want) || len(res.Label.Conf()) != 0 {
			t.Errorf("label = %s, want integrity %v", res.Label, want)
		}
		r := srv.last.Load()
		if got := r.Header.Get("Authorization"); got != "Bearer "+testSecret {
			t.Errorf("server got Authorization of length %d, want the injected one", len(got))
		}
		if got := r.Header.Get("Accept"); got != "text/plain" {
			t.Errorf("server got Accept %q, want the guest's", got)
		}
		if r.Host != strings.TrimPrefix(s.Origin(), "http://") {
			t.Errorf("server got Host %q, want %q", r.Host, strings.TrimPrefix(s.Origin(), "http://"))
		}
	}
	if !strings.Contains(f.logs.String(), "fetch") {
		t.Errorf("no fetch logged: %s", f.logs)
	}
}

func TestFetchDenied(t *testing.T) {
	f := newFixture(t)
	srv := newFlights(t, nil)
	s := f.grant("flights.example", srv.Server, `,"methods":["GET","POST"],"paths":["/search"],"allow_private":true,
	  "headers":[{"name":"Authorization","env":"FLIGHTS_TOKEN","prefix":"Bearer "}]`)
	child, err := f.k.Narrow(s, []byte(`{"drop_headers":["Authorization"]}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		scope *Scope
		req   abi.HTTPRequest
		errno abi.Errno
		says  string
	}{
		{"method", s, abi.HTTPRequest{Method: "DELETE", URL: "/search"}, abi.EDENIED, "DELETE"},
		{"trace", s, abi.HTTPRequest{Method: "TRACE", URL: "/search"}, abi.EDENIED, "TRACE"},
		{"bad method", s, abi.HTTPRequest{Method: "G T", URL: "/search"}, abi.EINVAL, ""},
		{"path", s, abi.HTTPRequest{Method: "GET", URL: "/admin"}, abi.EDENIED, "/admin"},
		{"prefix", s, abi.HTTPRequest{Method: "GET", URL: "/searchadmin"}, abi.EDENIED, "/searchadmin"},
		{"dotdot", s, abi.HTTPRequest{Method: "GET", URL: "/search/../admin"}, abi.EDENIED, "/admin"},
		{"encoded dotdot", s, abi.HTTPRequest{Method: "GET", URL: "/search/%2e%2e/admin"}, abi.EDENIED, "/admin"},
		{"encoded slash", s, abi.HTTPRequest{Method: "GET", URL: "/search%2f..%2fadmin"}, abi.EDENIED, "encoded slash"},
		{"backslash", s, abi.HTTPRequest{Method: "GET", URL: "/search\\..\\admin"}, abi.EDENIED, "backslash"},
		{"network path", s, abi.HTTPRequest{Method: "GET", URL: "//evil.example/search"}, abi.EDENIED, "network-path"},
		{"other origin", s, abi.HTTPRequest{Method: "GET", URL: "http://evil.example/search"}, abi.EDENIED, "evil.example"},
		{"userinfo", s, abi.HTTPRequest{Method: "GET", URL: "http://flights.example@evil.example/search"}, abi.EDENIED, "userinfo"},
		{"relative", s, abi.HTTPRequest{Method: "GET", URL: "search"}, abi.EINVAL, ""},
		{"injected header", s, abi.HTTPRequest{Method: "GET", URL: "/search", Header: map[string][]string{"authorization": {"Bearer mine"}}}, abi.EDENIED, "Authorization"},
		{"dropped header", child.(*Scope), abi.HTTPRequest{Method: "GET", URL: "/search", Header: map[string][]string{"Authorization": {"Bearer mine"}}}, abi.EDENIED, "Authorization"},
		{"host header", s, abi.HTTPRequest{Method: "GET", URL: "/search", Header: map[string][]string{"Host": {"evil.example"}}}, abi.EDENIED, "Host"},
		{"cookie", s, abi.HTTPRequest{Method: "GET", URL: "/search", Header: map[string][]string{"Cookie": {"a=b"}}}, abi.EDENIED, "Cookie"},
		{"transfer-encoding", s, abi.HTTPRequest{Method: "GET", URL: "/search", Header: map[string][]string{"Transfer-Encoding": {"chunked"}}}, abi.EDENIED, "Transfer-Encoding"},
		{"content-length", s, abi.HTTPRequest{Method: "GET", URL: "/search", Header: map[string][]string{"Content-Length": {"0"}}}, abi.EDENIED, "Content-Length"},
		{"proxy", s, abi.HTTPRequest{Method: "GET", URL: "/search", Header: map[string][]string{"Proxy-Foo": {"x"}}}, abi.EDENIED, "Proxy-Foo"},
		{"header newline", s, abi.HTTPRequest{Method: "GET", URL: "/search", Header: map[string][]string{"X-A": {"a\r\nHost: evil"}}}, abi.EINVAL, ""},
		{"header name", s, abi.HTTPRequest{Method: "GET", URL: "/search", Header: map[string][]string{"X A": {"a"}}}, abi.EINVAL, ""},
		{"url control", s, abi.HTTPRequest{Method: "GET", URL: "/search\n"}, abi.EINVAL, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := srv.hits.Load()
			_, _, err := f.fetch(tt.scope, tt.req, nil)
			wantErrno(t, err, tt.errno, tt.says)
			if srv.hits.Load() != before {
				t.Error("the server was reached")
			}
		})
	}
	_, _, err = f.call(s, []byte(`{"method":"GET","url":"/search","bogus":1}`), nil)
	wantErrno(t, err, abi.EINVAL, "")
	call := kindtest.NewCall("delete", nil, s, kindapi.TaskInfo{}, nil, nil)
	_, err = kerneltest.Invoke(context.Background(), f.k, call)
	wantErrno(t, err, abi.ENOTSUP, "")
}

func TestFetchRedirects(t *testing.T) {
	f := newFixture(t)
	other := newFlights(t, nil)
	otherPort := other.URL[strings.LastIndexByte(other.URL, ':')+1:]
	srv := newFlights(t, func(mux *http.ServeMux) {
		mux.HandleFunc("/search/old", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/search/new", http.StatusFound)
		})
		mux.HandleFunc("/search/relative", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "new", http.StatusMovedPermanently)
		})
		mux.HandleFunc("/search/post307", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/search/landing")
			w.WriteHeader(http.StatusTemporaryRedirect)
		})
		mux.HandleFunc("/search/post303", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/search/landing")
			w.WriteHeader(http.StatusSeeOther)
		})
		mux.HandleFunc("/search/offsite", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://other.example:"+otherPort+"/search/x", http.StatusFound)
		})
		mux.HandleFunc("/search/scheme-relative", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "//other.example:"+otherPort+"/search/x")
			w.WriteHeader(http.StatusFound)
		})
		mux.HandleFunc("/search/admin", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/admin/secret", http.StatusFound)
		})
		mux.HandleFunc("/search/sneaky", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/search/%2e%2e/admin")
			w.WriteHeader(http.StatusFound)
		})
		mux.HandleFunc("/search/loop", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/search/loop", http.StatusFound)
		})
		mux.HandleFunc("/search/notmodified", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotModified)
		})
		mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
			t.Errorf("the server served %s", r.URL.Path)
		})
	})
	s := f.grant("flights.example", srv.Server, `,"methods":["GET","POST"],"paths":["/search"],"allow_private":true,"max_redirects":3,
	  "headers":[{"name":"X-Api-Key","env":"FLIGHTS_TOKEN"}]`)
	postOnly, err := f.k.Narrow(s, []byte(`{"methods":["POST"]}`))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("within scope", func(t *testing.T) {
		for _, u := range []string{"/search/old", "/search/relative"} {
			resp, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: u}, nil)
			if err != nil {
				t.Fatalf("%s: %v", u, err)
			}
			if resp.Status != 200 || string(resp.Body) != "results for /search/new" {
				t.Errorf("%s: got %d %q, want the redirect target", u, resp.Status, resp.Body)
			}
			if got := srv.last.Load().Header.Get("X-Api-Key"); got != testSecret {
				t.Errorf("%s: the redirected request lacks the injected header", u)
			}
		}
	})
	t.Run("307 keeps method and body", func(t *testing.T) {
		resp, _, err := f.fetch(s, abi.HTTPRequest{Method: "POST", URL: "/search/post307", Body: []byte("payload")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header["X-Seen-Method"][0] != "POST" || string(*srv.body.Load()) != "payload" {
			t.Errorf("after 307: method %v body %q, want POST payload", resp.Header["X-Seen-Method"], *srv.body.Load())
		}
	})
	t.Run("303 becomes GET", func(t *testing.T) {
		resp, _, err := f.fetch(s, abi.HTTPRequest{Method: "POST", URL: "/search/post303", Body: []byte("payload")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header["X-Seen-Method"][0] != "GET" || len(*srv.body.Load()) != 0 {
			t.Errorf("after 303: method %v body %q, want GET and no body", resp.Header["X-Seen-Method"], *srv.body.Load())
		}
		_, _, err = f.fetch(postOnly.(*Scope), abi.HTTPRequest{Method: "POST", URL: "/search/post303"}, nil)
		wantErrno(t, err, abi.EDENIED, "method GET")
	})
	t.Run("other origin", func(t *testing.T) {
		for _, u := range []string{"/search/offsite", "/search/scheme-relative"} {
			_, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: u}, nil)
			wantErrno(t, err, abi.EDENIED, "other.example:"+otherPort)
			if other.hits.Load() != 0 {
				t.Fatal("the other origin was reached")
			}
		}
	})
	t.Run("disallowed path", func(t *testing.T) {
		_, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: "/search/admin"}, nil)
		wantErrno(t, err, abi.EDENIED, "/admin/secret")
		_, _, err = f.fetch(s, abi.HTTPRequest{Method: "GET", URL: "/search/sneaky"}, nil)
		wantErrno(t, err, abi.EDENIED, "/admin")
	})
	t.Run("too many", func(t *testing.T) {
		before := srv.hits.Load()
		_, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: "/search/loop"}, nil)
		wantErrno(t, err, abi.ELIMIT, "max_redirects")
		if n := srv.hits.Load() - before; n != 4 {
			t.Errorf("server hit %d times, want 4 (the request and 3 redirects)", n)
		}
	})
	t.Run("304 is a response", func(t *testing.T) {
		resp, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: "/search/notmodified"}, nil)
		if err != nil || resp.Status != 304 {
			t.Errorf("got %d, %v; want 304", resp.Status, err)
		}
	})
}

func TestFetchLimits(t *testing.T) {
	f := newFixture(t)
	srv := newFlights(t, func(mux *http.ServeMux) {
		mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "101")
			w.Write(bytes.Repeat([]byte("x"), 101))
		})
		mux.HandleFunc("/big-chunked", func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i < 101; i++ {
				w.Write([]byte("x"))
				w.(http.Flusher).Flush()
			}
		})
		mux.HandleFunc("/exact", func(w http.ResponseWriter, r *http.Request) {
			w.Write(bytes.Repeat([]byte("x"), 100))
		})
		mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i <= abi.MaxHeaders; i++ {
				w.Header().Add(fmt.Sprintf("X-H%d", i), "v")
			}
		})
	})
	s := f.grant("flights.example", srv.Server, `,"methods":["GET","HEAD","POST"],"allow_private":true,"max_response_bytes":100,"max_request_bytes":10`)
	for _, u := range []string{"/big", "/big-chunked"} {
		_, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: u}, nil)
		wantErrno(t, err, abi.ELIMIT, "max_response_bytes")
	}
	resp, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: "/exact"}, nil)
	if err != nil || len(resp.Body) != 100 {
		t.Errorf("a body of exactly max_response_bytes: %d bytes, %v", len(resp.Body), err)
	}
	// HEAD: the Content-Length is of a body that is not sent.
	if resp, _, err := f.fetch(s, abi.HTTPRequest{Method: "HEAD", URL: "/big"}, nil); err != nil || resp.Status != 200 {
		t.Errorf("HEAD of a large resource: %d, %v", resp.Status, err)
	}
	_, _, err = f.fetch(s, abi.HTTPRequest{Method: "GET", URL: "/headers"}, nil)
	wantErrno(t, err, abi.ELIMIT, "header")

	before := srv.hits.Load()
	_, _, err = f.fetch(s, abi.HTTPRequest{Method: "POST", URL: "/x", Body: []byte("01234567890")}, nil)
	wantErrno(t, err, abi.ELIMIT, "max_request_bytes")
	if srv.hits.Load() != before {
		t.Error("an oversized request reached the server")
	}
}

func TestFetchBodyBlob(t *testing.T) {
	f := newFixture(t)
	srv := newFlights(t, nil)
	s := f.grant("flights.example", srv.Server, `,"methods":["POST"],"allow_private":true,"max_request_bytes":16`)
	passport := kindapi.NewBlob([]byte("P<UTOPIA<<ALICE"), kindapi.NewLabel([]string{"pii:alice"}, nil))
	big := kindapi.NewBlob(bytes.Repeat([]byte("x"), 17), kindapi.Label{})
	blobs := map[abi.Handle]*kindapi.Blob{7: passport, 8: big}

	args, _ := abi.EncodeHTTPRequest(abi.HTTPRequest{Method: "POST", URL: "/book", BodyBlob: 7})
	call := kindtest.NewCall(abi.NetFetchOp, args, s, kindapi.TaskInfo{}, nil, func(h abi.Handle) (*kindapi.Blob, error) {
		if b, ok := blobs[h]; ok {
			return b, nil
		}
		return nil, kindapi.ErrBadHandle
	})
	if _, err := kerneltest.Invoke(context.Background(), f.k, call); err != nil {
		t.Fatal(err)
	}
	if got := string(*srv.body.Load()); got != "P<UTOPIA<<ALICE" {
		t.Errorf("server got body %q, want the blob's bytes", got)
	}
	if sp := call.Spliced(); len(sp) != 1 || sp[0] != passport {
		t.Errorf("Spliced() = %v, want the passport blob", sp)
	}
	if got := srv.last.Load().ContentLength; got != int64(passport.Len()) {
		t.Errorf("Content-Length %d, want %d", got, passport.Len())
	}

	before := srv.hits.Load()
	_, _, err := f.fetch(s, abi.HTTPRequest{Method: "POST", URL: "/book", BodyBlob: 8}, blobs)
	wantErrno(t, err, abi.ELIMIT, "max_request_bytes")
	_, _, err = f.fetch(s, abi.HTTPRequest{Method: "POST", URL: "/book", BodyBlob: 9}, blobs)
	wantErrno(t, err, abi.EBADHANDLE, "")
	if srv.hits.Load() != before {
		t.Error("a refused request reached the server")
	}
	_, _, err = f.call(s, []byte(`{"method":"POST","url":"/book","body":"eA==","body_blob":7}`), blobs)
	wantErrno(t, err, abi.EINVAL, "")
}

func TestFetchTimeout(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	srv := newFlights(t, func(mux *http.ServeMux) {
		mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
	})
	defer close(release)
	s := f.grant("flights.example", srv.Server, `,"allow_private":true,"timeout":"300ms"`)
	for _, u := range []string{"/hang", "/slow-body"} {
		start := time.Now()
		_, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: u}, nil)
		wantErrno(t, err, abi.ETIMEDOUT, "300ms")
		// Not a bound on the machine's speed: the default timeout would
		// have ended it only after DefaultTimeout.
		if d := time.Since(start); d >= DefaultTimeout {
			t.Errorf("%s: took %s with a 300ms timeout: the default, not the grant's", u, d)
		}
	}
}

func TestFetchPrivateAddress(t *testing.T) {
	f := newFixture(t)
	srv := newFlights(t, nil)
	// The names resolve to loopback (as a rebinding attacker's would): the
	// grant cannot know, the dial refuses.
	for _, name := range []string{"flights.example", "mapped.example"} {
		pub := f.grant(name, srv.Server, `,"allow_private":false`)
		_, _, err := f.fetch(pub, abi.HTTPRequest{Method: "GET", URL: "/search"}, nil)
		wantErrno(t, err, abi.EDENIED, "loopback")
		if strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("the error reveals the address: %v", err)
		}
	}
	if srv.hits.Load() != 0 {
		t.Fatal("the loopback server was reached")
	}
	// A connection pooled for a scope that allows private addresses is
	// not reused for one that does not.
	priv := f.grant("flights.example", srv.Server, `,"allow_private":true`)
	if _, _, err := f.fetch(priv, abi.HTTPRequest{Method: "GET", URL: "/search"}, nil); err != nil {
		t.Fatal(err)
	}
	narrowed, err := f.k.Narrow(priv, []byte(`{"allow_private":false}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = f.fetch(narrowed.(*Scope), abi.HTTPRequest{Method: "GET", URL: "/search"}, nil)
	wantErrno(t, err, abi.EDENIED, "allow_private")
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("server hit %d times, want 1", n)
	}
}

func TestFetchUpstreamError(t *testing.T) {
	f := newFixture(t)
	srv := newFlights(t, nil)
	s := f.grant("flights.example", srv.Server, `,"allow_private":true`)
	srv.Close()
	_, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: "/search"}, nil)
	wantErrno(t, err, abi.EIO, "flights.example")

	hijack := newFlights(t, func(mux *http.ServeMux) {
		mux.HandleFunc("/reset", func(w http.ResponseWriter, r *http.Request) {
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		})
	})
	s = f.grant("flights.example", hijack.Server, `,"allow_private":true`)
	_, _, err = f.fetch(s, abi.HTTPRequest{Method: "GET", URL: "/reset"}, nil)
	wantErrno(t, err, abi.EIO, "")
}

func TestFetchEchoedSecret(t *testing.T) {
	f := newFixture(t)
	srv := newFlights(t, func(mux *http.ServeMux) {
		mux.HandleFunc("/echo-body", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "you sent %s", r.Header.Get("Authorization"))
		})
		mux.HandleFunc("/echo-header", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Debug", r.Header.Get("Authorization"))
		})
		mux.HandleFunc("/echo-location", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "http://evil.example/"+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			w.WriteHeader(http.StatusFound)
		})
		mux.HandleFunc("/presigned", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "http://bucket.example/file?signature=minted-from-credential")
			w.WriteHeader(http.StatusFound)
		})
		mux.HandleFunc("/echo-cookie", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Set-Cookie", "tok="+r.Header.Get("Authorization"))
		})
	})
	s := f.grant("flights.example", srv.Server, `,"allow_private":true,"headers":[{"name":"Authorization","env":"FLIGHTS_TOKEN","prefix":"Bearer "}]`)
	for _, u := range []string{"/echo-body", "/echo-header", "/echo-location"} {
		_, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: u}, nil)
		wantErrno(t, err, abi.EDENIED, "echoes the injected header Authorization")
	}
	// A refused redirect names its target's origin and path, not its query.
	_, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: "/presigned"}, nil)
	wantErrno(t, err, abi.EDENIED, "http://bucket.example/file")
	if strings.Contains(err.Error(), "signature") {
		t.Errorf("the refused redirect's query reached the error: %v", err)
	}
	// Set-Cookie is stripped before the check: the guest gets neither.
	resp, _, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: "/echo-cookie"}, nil)
	if err != nil || resp.Header["Set-Cookie"] != nil {
		t.Errorf("echo-cookie: %v, %v", resp.Header, err)
	}
}

func TestFetchTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls %s", r.URL.Path)
	}))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	f := newFixture(t, WithTLSConfig(&tls.Config{RootCAs: pool}))
	s, err := f.k.Grant(f.gc, []byte(`{"origin":"`+srv.URL+`","allow_private":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, _, err := f.fetch(s.(*Scope), abi.HTTPRequest{Method: "GET", URL: "/x"}, nil)
	if err != nil || string(resp.Body) != "tls /x" {
		t.Fatalf("TLS fetch: %q, %v", resp.Body, err)
	}
	// Without the test CA the handshake fails: EIO, not a silent downgrade.
	plain := newFixture(t)
	s, _ = plain.k.Grant(plain.gc, []byte(`{"origin":"`+srv.URL+`","allow_private":true}`))
	_, _, err = plain.fetch(s.(*Scope), abi.HTTPRequest{Method: "GET", URL: "/x"}, nil)
	wantErrno(t, err, abi.EIO, "")
}

// TestFetchConcurrent hammers one Kind from many goroutines (run -race).
func TestFetchConcurrent(t *testing.T) {
	f := newFixture(t)
	srv := newFlights(t, nil)
	s := f.grant("flights.example", srv.Server, `,"allow_private":true,"paths":["/search"],"headers":[{"name":"X-Api-Key","env":"FLIGHTS_TOKEN"}]`)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				args, _ := abi.EncodeHTTPRequest(abi.HTTPRequest{Method: "GET", URL: fmt.Sprintf("/search/%d/%d", i, j)})
				res, err := kerneltest.Invoke(context.Background(), f.k, kindtest.NewCall(abi.NetFetchOp, args, s, kindapi.TaskInfo{}, nil, nil))
				if err != nil {
					t.Error(err)
					return
				}
				resp, _ := abi.DecodeHTTPResponse(res.Data)
				if want := fmt.Sprintf("results for /search/%d/%d", i, j); string(resp.Body) != want {
					t.Errorf("got %q, want %q", resp.Body, want)
				}
			}
		}(i)
	}
	wg.Wait()
}

// TestMarkSpliced: what an effect's account shows of a request as the
// task wrote it: each placeholder as what was spliced there, never more;
// a malformed one as written.
func TestMarkSpliced(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:                                `plain`,
		`{"guest":{{mandate:splice:0}},"n":1}`: `{"guest":[spliced 0],"n":1}`,
		`a={{mandate:splice:12}}&b={{mandate:splice:1}}`: `a=[spliced 12]&b=[spliced 1]`,
		`{"sender":"{{mandate:part:3}}"}`:                `{"sender":"[spliced part 3]"}`,
		`{{mandate:splice:0}} {{mandate:part:0}}`:        `[spliced 0] [spliced part 0]`,
		`{{mandate:splice:99}} {{mandate:splice:`:        `{{mandate:splice:99}} {{mandate:splice:`,
	} {
		if got := markSpliced(in); got != want {
			t.Errorf("markSpliced(%q) = %q, want %q", in, got, want)
		}
	}
}
