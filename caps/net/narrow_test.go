package net

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

const testSecret = "s3cr3t-T0KEN-value-4242"

func testGrantContext(t *testing.T) kindapi.GrantContext {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets", "key.txt"), []byte("file-"+testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"FLIGHTS_TOKEN": testSecret, "EMPTY": "", "BAD": "a\r\nX-Evil: 1"}
	return kindapi.GrantContext{Dir: dir, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
}

func mustGrant(t *testing.T, k *Kind, spec string) *Scope {
	t.Helper()
	s, err := k.Grant(testGrantContext(t), []byte(spec))
	if err != nil {
		t.Fatalf("Grant(%s): %v", spec, err)
	}
	return s.(*Scope)
}

func TestGrantDefaults(t *testing.T) {
	s := mustGrant(t, New(), `{"origin":"https://flights.example"}`)
	got, _ := json.Marshal(s)
	want := `{"origin":"https://flights.example","methods":["GET"],"paths":["/"],"max_request_bytes":1048576,"max_response_bytes":10485760,"timeout":"30s","max_redirects":5,"allow_private":false,"headers":[],"reserved_headers":[],"clearance":[],"accepts_untrusted":true,"labels":[]}`
	if string(got) != want {
		t.Errorf("scope JSON\n got %s\nwant %s", got, want)
	}
	s = mustGrant(t, New(WithDefaultTimeout(3*time.Second)), `{"origin":"https://flights.example"}`)
	if s.Timeout() != 3*time.Second {
		t.Errorf("timeout = %s, want 3s", s.Timeout())
	}
}

func TestGrantFull(t *testing.T) {
	spec := `{"origin":"HTTPS://Flights.Example:443/","methods":["get","POST","GET"],"paths":["/search/","/book","/%7ebook"],
	  "max_request_bytes":100,"max_response_bytes":200,"timeout":"1.5s","max_redirects":2,"allow_private":false,
	  "headers":[{"name":"authorization","env":"FLIGHTS_TOKEN","prefix":"Bearer "},{"name":"X-Api-Key","file":"secrets/key.txt"}]}`
	s := mustGrant(t, New(), spec)
	got, _ := json.Marshal(s)
	want := `{"origin":"https://flights.example","methods":["GET","POST"],"paths":["/book","/search/","/~book"],"max_request_bytes":100,"max_response_bytes":200,"timeout":"1.5s","max_redirects":2,"allow_private":false,"headers":["Authorization","X-Api-Key"],"reserved_headers":["Authorization","X-Api-Key"],"clearance":[],"accepts_untrusted":true,"labels":[]}`
	if string(got) != want {
		t.Errorf("scope JSON\n got %s\nwant %s", got, want)
	}
	if v := s.headers[0].value.Value(); v != "Bearer "+testSecret {
		t.Errorf("Authorization value is wrong (len %d)", len(v))
	}
	if v := s.headers[1].value.Value(); v != "file-"+testSecret {
		t.Errorf("X-Api-Key value is wrong (len %d)", len(v))
	}
	// The secret shows under no formatting.
	for _, out := range []string{string(got), s.String(), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), fmt.Sprintf("%+v %#v", *s, *s)} {
		if strings.Contains(out, testSecret) {
			t.Errorf("secret leaked in %q", out)
		}
	}
	// Accessors return copies.
	s.Methods()[0] = "DELETE"
	s.Paths()[0] = "/admin"
	s.ReservedHeaders()[0] = "X"
	if s.methods[0] != "GET" || s.paths[0] != "/book" || s.reserved[0] != "Authorization" {
		t.Error("an accessor returned the scope's own slice")
	}
}

func TestGrantErrors(t *testing.T) {
	tests := []struct {
		spec  string
		field string
	}{
		{`{}`, "origin"},
		{`{"origin":"http://flights.example@evil.example"}`, "origin"},
		{`{"origin":"http://flights.example/search"}`, "origin"},
		{`{"origin":"http://127.0.0.1"}`, "origin"},
		{`{"origin":"http://[::1]:8080"}`, "origin"},
		{`{"origin":"http://169.254.169.254"}`, "origin"},
		{`{"origin":"http://localhost:8080"}`, "origin"},
		{`{"origin":"http://api.localhost"}`, "origin"},
		{`{"origin":"https://a.example","bogus":1}`, "bogus"},
		{`{"origin":"https://a.example","methods":"GET"}`, "methods"},
		{`{"origin":"https://a.example","methods":[]}`, "methods"},
		{`{"origin":"https://a.example","methods":["GE T"]}`, "methods"},
		{`{"origin":"https://a.example","methods":["TRACE"]}`, "methods"},
		{`{"origin":"https://a.example","methods":["connect"]}`, "methods"},
		{`{"origin":"https://a.example","paths":[]}`, "paths"},
		{`{"origin":"https://a.example","paths":["search"]}`, "paths"},
		{`{"origin":"https://a.example","paths":["/a/../b"]}`, "paths"},
		{`{"origin":"https://a.example","paths":["/a/%2e%2E"]}`, "paths"},
		{`{"origin":"https://a.example","paths":["/a?b"]}`, "paths"},
		{`{"origin":"https://a.example","paths":["/a%2fb"]}`, "paths"},
		{`{"origin":"https://a.example","max_request_bytes":-1}`, "max_request_bytes"},
		{`{"origin":"https://a.example","max_request_bytes":1e30}`, "max_request_bytes"},
		{`{"origin":"https://a.example","max_response_bytes":999999999999}`, "max_response_bytes"},
		{`{"origin":"https://a.example","timeout":"0s"}`, "timeout"},
		{`{"origin":"https://a.example","timeout":"soon"}`, "timeout"},
		{`{"origin":"https://a.example","timeout":"2h"}`, "timeout"},
		{`{"origin":"https://a.example","max_redirects":21}`, "max_redirects"},
		{`{"origin":"https://a.example","headers":[{"name":"X-K"}]}`, "headers[0]"},
		{`{"origin":"https://a.example","headers":[{"name":"X-K","env":"NOPE"}]}`, "headers[0].env"},
		{`{"origin":"https://a.example","headers":[{"name":"X-K","env":"EMPTY"}]}`, "headers[0].env"},
		{`{"origin":"https://a.example","headers":[{"name":"X-K","env":"BAD"}]}`, "headers[0].env"},
		{`{"origin":"https://a.example","headers":[{"name":"X-K","file":"secrets/nope.txt"}]}`, "headers[0].file"},
		{`{"origin":"https://a.example","headers":[{"name":"X-K","env":"FLIGHTS_TOKEN","file":"secrets/key.txt"}]}`, "headers[0]"},
		{`{"origin":"https://a.example","headers":[{"name":"Host","env":"FLIGHTS_TOKEN"}]}`, "headers[0].name"},
		{`{"origin":"https://a.example","headers":[{"name":"Proxy-Authorization","env":"FLIGHTS_TOKEN"}]}`, "headers[0].name"},
		{`{"origin":"https://a.example","headers":[{"name":"Bad Name","env":"FLIGHTS_TOKEN"}]}`, "headers[0].name"},
		{`{"origin":"https://a.example","headers":[{"name":"X-K","env":"FLIGHTS_TOKEN"},{"name":"x-k","file":"secrets/key.txt"}]}`, "headers[1].name"},
		{`{"origin":"https://a.example","headers":[{"name":"X-K","env":"FLIGHTS_TOKEN","value":"literal"}]}`, "value"},
	}
	k := New()
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := k.Grant(testGrantContext(t), []byte(tt.spec))
			var fe *kindapi.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Grant error = %v, want a *kindapi.FieldError", err)
			}
			if fe.Field != tt.field {
				t.Errorf("Grant error field = %q (%v), want %q", fe.Field, err, tt.field)
			}
			if strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), "X-Evil") {
				t.Errorf("Grant error leaks a value: %v", err)
			}
		})
	}
	if _, err := k.Grant(testGrantContext(t), []byte(`{"origin":"https://a.example"} {}`)); err == nil {
		t.Error("Grant with trailing data succeeded")
	}
}

func TestNarrow(t *testing.T) {
	k := New()
	parent := mustGrant(t, k, `{"origin":"https://flights.example","methods":["GET","POST"],"paths":["/search","/book/"],
	  "max_request_bytes":1000,"max_response_bytes":2000,"timeout":"10s","max_redirects":3,"allow_private":false,
	  "headers":[{"name":"Authorization","env":"FLIGHTS_TOKEN","prefix":"Bearer "},{"name":"X-Api-Key","file":"secrets/key.txt"}]}`)
	tests := []struct {
		req  string
		want string // the child's JSON, or an errno name
	}{
		{`{}`, `{"origin":"https://flights.example","methods":["GET","POST"],"paths":["/book/","/search"],"max_request_bytes":1000,"max_response_bytes":2000,"timeout":"10s","max_redirects":3,"allow_private":false,"headers":["Authorization","X-Api-Key"],"reserved_headers":["Authorization","X-Api-Key"],"clearance":[],"accepts_untrusted":true,"labels":[]}`},
		{`{"methods":["get"],"paths":["/search/economy","/book/x/"],"max_request_bytes":0,"max_response_bytes":5,"timeout":"1s","max_redirects":0,"allow_private":false,"drop_headers":["authorization"]}`,
			`{"origin":"https://flights.example","methods":["GET"],"paths":["/book/x/","/search/economy"],"max_request_bytes":0,"max_response_bytes":5,"timeout":"1s","max_redirects":0,"allow_private":false,"headers":["X-Api-Key"],"reserved_headers":["Authorization","X-Api-Key"],"clearance":[],"accepts_untrusted":true,"labels":[]}`},
		{`{"origin":"HTTPS://FLIGHTS.EXAMPLE:443","paths":["/search"]}`, `{"origin":"https://flights.example","methods":["GET","POST"],"paths":["/search"],"max_request_bytes":1000,"max_response_bytes":2000,"timeout":"10s","max_redirects":3,"allow_private":false,"headers":["Authorization","X-Api-Key"],"reserved_headers":["Authorization","X-Api-Key"],"clearance":[],"accepts_untrusted":true,"labels":[]}`},

		{`{"origin":"https://evil.example"}`, "EDENIED"},
		{`{"origin":"http://flights.example"}`, "EDENIED"},
		{`{"methods":["DELETE"]}`, "EDENIED"},
		{`{"methods":["GET","PUT"]}`, "EDENIED"},
		{`{"paths":["/"]}`, "EDENIED"},
		{`{"paths":["/searchadmin"]}`, "EDENIED"},
		{`{"paths":["/book"]}`, "EDENIED"},
		{`{"paths":["/search","/admin"]}`, "EDENIED"},
		{`{"max_request_bytes":1001}`, "EDENIED"},
		{`{"max_response_bytes":2001}`, "EDENIED"},
		{`{"timeout":"11s"}`, "EDENIED"},
		{`{"max_redirects":4}`, "EDENIED"},
		{`{"allow_private":true}`, "EDENIED"},

		{`{"methods":[]}`, "EINVAL"},
		{`{"methods":["TRACE"]}`, "EINVAL"},
		{`{"paths":["/search/../admin"]}`, "EINVAL"},
		{`{"paths":["/search%2f..%2fadmin"]}`, "EINVAL"},
		{`{"max_request_bytes":-1}`, "EINVAL"},
		{`{"timeout":"-1s"}`, "EINVAL"},
		{`{"timeout":"0s"}`, "EINVAL"},
		{`{"max_redirects":-1}`, "EINVAL"},
		{`{"drop_headers":["Cookie"]}`, "EINVAL"},
		{`{"drop_headers":["bad name"]}`, "EINVAL"},
		{`{"headers":[]}`, "EINVAL"},
		{`{"origin":"http://a@b"}`, "EINVAL"},
		{`[]`, "EINVAL"},
		{`{"methods":"GET"}`, "EINVAL"},
		{`{} {}`, "EINVAL"},
		{``, "EINVAL"},
	}
	for _, tt := range tests {
		t.Run(tt.req, func(t *testing.T) {
			child, err := k.Narrow(parent, []byte(tt.req))
			if strings.HasPrefix(tt.want, "E") {
				if err == nil {
					b, _ := json.Marshal(child)
					t.Fatalf("Narrow(%s) = %s, want %s", tt.req, b, tt.want)
				}
				if got := kindapi.ErrnoOf(err).String(); got != tt.want {
					t.Fatalf("Narrow(%s) errno = %s (%v), want %s", tt.req, got, err, tt.want)
				}
				if tt.want == "EDENIED" && !errors.Is(err, kindapi.ErrDenied) {
					t.Errorf("Narrow(%s) error does not match kindapi.ErrDenied", tt.req)
				}
				if strings.Contains(err.Error(), testSecret) {
					t.Errorf("Narrow error leaks the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Narrow(%s): %v", tt.req, err)
			}
			got, _ := json.Marshal(child)
			if string(got) != tt.want {
				t.Errorf("Narrow(%s)\n got %s\nwant %s", tt.req, got, tt.want)
			}
			if !parent.Contains(child) {
				t.Errorf("parent does not contain Narrow(%s)", tt.req)
			}
		})
	}
	// A widening error names every field that widened.
	_, err := k.Narrow(parent, []byte(`{"methods":["PUT"],"max_redirects":9}`))
	if err == nil || !strings.Contains(err.Error(), "PUT") || !strings.Contains(err.Error(), "max_redirects") {
		t.Errorf("widening error = %v; want it to name methods and max_redirects", err)
	}
}

func TestContains(t *testing.T) {
	k := New()
	gc := testGrantContext(t)
	grant := func(spec string) *Scope {
		t.Helper()
		s, err := k.Grant(gc, []byte(spec))
		if err != nil {
			t.Fatal(err)
		}
		return s.(*Scope)
	}
	base := `"origin":"https://flights.example","max_request_bytes":10,"max_response_bytes":10,"timeout":"10s","max_redirects":2`
	p := grant(`{` + base + `,"methods":["GET","POST"],"paths":["/search"],"headers":[{"name":"X-K","env":"FLIGHTS_TOKEN"}]}`)
	if !p.Contains(p) {
		t.Error("a scope does not contain itself")
	}
	notWithin := []string{
		`{"origin":"https://other.example","methods":["GET"],"paths":["/search"],"max_request_bytes":10,"max_response_bytes":10,"timeout":"10s","max_redirects":2,"headers":[{"name":"X-K","env":"FLIGHTS_TOKEN"}]}`,
		`{` + base + `,"methods":["PUT"],"paths":["/search"],"headers":[{"name":"X-K","env":"FLIGHTS_TOKEN"}]}`,
		`{` + base + `,"methods":["GET"],"paths":["/searchx"],"headers":[{"name":"X-K","env":"FLIGHTS_TOKEN"}]}`,
		`{` + base + `,"methods":["GET"],"paths":["/search"],"headers":[{"name":"X-K","file":"secrets/key.txt"}]}`, // same name, other value
		`{` + base + `,"methods":["GET"],"paths":["/search"],"headers":[{"name":"X-Other","env":"FLIGHTS_TOKEN"}]}`,
		`{` + base + `,"methods":["GET"],"paths":["/search"]}`, // X-K not reserved: the guest could set it
		`{"origin":"https://flights.example","max_request_bytes":11,"max_response_bytes":10,"timeout":"10s","max_redirects":2,"paths":["/search"],"headers":[{"name":"X-K","env":"FLIGHTS_TOKEN"}]}`,
		`{"origin":"https://flights.example","max_request_bytes":10,"max_response_bytes":11,"timeout":"10s","max_redirects":2,"paths":["/search"],"headers":[{"name":"X-K","env":"FLIGHTS_TOKEN"}]}`,
		`{"origin":"https://flights.example","max_request_bytes":10,"max_response_bytes":10,"timeout":"11s","max_redirects":2,"paths":["/search"],"headers":[{"name":"X-K","env":"FLIGHTS_TOKEN"}]}`,
		`{"origin":"https://flights.example","max_request_bytes":10,"max_response_bytes":10,"timeout":"10s","max_redirects":3,"paths":["/search"],"headers":[{"name":"X-K","env":"FLIGHTS_TOKEN"}]}`,
	}
	for _, spec := range notWithin {
		if c := grant(spec); p.Contains(c) {
			t.Errorf("%s contains %s", p, c)
		}
	}
	if p.Contains(nil) || p.Contains(fakeScope{}) {
		t.Error("Contains accepted a non-net scope")
	}
	priv := grant(`{"origin":"https://flights.example","allow_private":true}`)
	pub := grant(`{"origin":"https://flights.example"}`)
	if !priv.Contains(pub) || pub.Contains(priv) {
		t.Error("allow_private must only go true to false")
	}
}

type fakeScope struct{}

func (fakeScope) MarshalJSON() ([]byte, error) { return []byte("{}"), nil }
func (fakeScope) Contains(kindapi.Scope) bool  { return true }

// TestNarrowProperty narrows random scopes with random requests: a request
// within the parent yields exactly what it asked for, inside the parent;
// a request that widens anything fails with EDENIED.
func TestNarrowProperty(t *testing.T) {
	k := New()
	gc := testGrantContext(t)
	rng := rand.New(rand.NewSource(1))
	allMethods := []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}
	allPaths := []string{"/", "/a", "/a/", "/a/b", "/a/b/c", "/ab", "/b", "/b/a", "/a/b/", "/c/d", "/a%3Bb", "/~x"}
	headerNames := []string{"Authorization", "X-Api-Key", "X-Two"}
	taints := []string{"*", "web:*", "web:a", "web:ab", "web:a*", "bank:tx", "bank:*", "bank:tx*", "b*"}
	pick := func(from []string) []string {
		var out []string
		for _, s := range from {
			if rng.Intn(3) == 0 {
				out = append(out, s)
			}
		}
		if len(out) == 0 {
			out = append(out, from[rng.Intn(len(from))])
		}
		return out
	}
	const iterations = 5000
	var okCount, deniedCount int
	for i := 0; i < iterations; i++ {
		spec := map[string]any{
			"origin":             "https://flights.example",
			"methods":            pick(allMethods),
			"paths":              pick(allPaths),
			"max_request_bytes":  rng.Int63n(1000),
			"max_response_bytes": rng.Int63n(1000),
			"timeout":            (time.Duration(1+rng.Intn(20)) * time.Second).String(),
			"max_redirects":      rng.Intn(6),
			"allow_private":      rng.Intn(2) == 0,
		}
		var hs []map[string]string
		for _, n := range pick(headerNames) {
			hs = append(hs, map[string]string{"name": n, "env": "FLIGHTS_TOKEN"})
		}
		spec["headers"] = hs
		if rng.Intn(2) == 0 {
			spec["refuses_taints"] = pick(taints)
		}
		sb, _ := json.Marshal(spec)
		ps, err := k.Grant(gc, sb)
		if err != nil {
			t.Fatalf("Grant(%s): %v", sb, err)
		}
		parent := ps.(*Scope)

		// Each field is present half the time; a present field is drawn
		// from the whole domain one time in eight (often widening), else
		// from within the parent.
		req := map[string]any{}
		wide := func() bool { return rng.Intn(8) == 0 }
		present := func() bool { return rng.Intn(2) == 0 }
		n64 := func(parentV int64) int64 {
			if wide() {
				return rng.Int63n(1100)
			}
			return rng.Int63n(parentV + 1)
		}
		if present() {
			if wide() {
				req["methods"] = pick(allMethods)
			} else {
				req["methods"] = pick(parent.methods)
			}
		}
		if present() {
			if wide() {
				req["paths"] = pick(allPaths)
			} else {
				var within []string
				for _, p := range allPaths {
					if pathAllowed(parent.paths, p) {
						within = append(within, p)
					}
				}
				req["paths"] = pick(within)
			}
		}
		if present() {
			req["max_request_bytes"] = n64(parent.maxRequest)
		}
		if present() {
			req["max_response_bytes"] = n64(parent.maxResponse)
		}
		if present() {
			secs := int64(parent.timeout / time.Second)
			if wide() {
				secs = 22
			}
			req["timeout"] = (time.Duration(1+rng.Int63n(secs)) * time.Second).String()
		}
		if present() {
			if wide() {
				req["max_redirects"] = rng.Intn(8)
			} else {
				req["max_redirects"] = rng.Intn(parent.maxRedirects + 1)
			}
		}
		if rng.Intn(3) == 0 {
			req["allow_private"] = rng.Intn(2) == 0
		}
		if rng.Intn(3) == 0 {
			req["drop_headers"] = pick(parent.HeaderNames())
		}
		if rng.Intn(3) == 0 {
			ts := pick(taints)
			if pt := parent.RefusedTaints(); len(pt) > 0 {
				ts = append(ts, pick(pt)...)
			}
			req["refuses_taints"] = ts
			if wide() {
				req["refuses_taints"] = pick(taints)
			}
		}
		if rng.Intn(10) == 0 {
			req["origin"] = []string{"https://flights.example", "https://FLIGHTS.example:443", "http://flights.example", "https://evil.example"}[rng.Intn(4)]
		}
		rb, _ := json.Marshal(req)

		widens := wouldWiden(parent, req)
		cs, err := k.Narrow(parent, rb)
		if widens != "" {
			if err == nil || !errors.Is(err, kindapi.ErrDenied) {
				t.Fatalf("parent %s\nreq %s widens %s, but Narrow = %v, %v", parent, rb, widens, cs, err)
			}
			deniedCount++
			continue
		}
		if err != nil {
			t.Fatalf("parent %s\nreq %s: %v", parent, rb, err)
		}
		okCount++
		child := cs.(*Scope)
		if !parent.Contains(child) {
			t.Fatalf("parent %s does not contain child %s (req %s)", parent, child, rb)
		}
		// Concretely, not only through Contains.
		for _, m := range child.methods {
			if !slices.Contains(parent.methods, m) {
				t.Fatalf("child method %s not in parent %v", m, parent.methods)
			}
		}
		for _, p := range child.paths {
			if !pathAllowed(parent.paths, p) {
				t.Fatalf("child path %s not within parent %v", p, parent.paths)
			}
		}
		if child.maxRequest > parent.maxRequest || child.maxResponse > parent.maxResponse ||
			child.timeout > parent.timeout || child.maxRedirects > parent.maxRedirects ||
			(child.allowPrivate && !parent.allowPrivate) || child.origin != parent.origin ||
			len(child.headers) > len(parent.headers) || !slices.Equal(child.reserved, parent.reserved) ||
			!equalResponses(child.responses, parent.responses) {
			t.Fatalf("child %s exceeds parent %s", child, parent)
		}
		// Whatever was asked is what was given (no clamping).
		if v, ok := req["max_response_bytes"]; ok && child.maxResponse != v.(int64) {
			t.Fatalf("max_response_bytes = %d, asked %d", child.maxResponse, v)
		}
		// Asking the child for all of the parent's fields either fails or
		// yields a scope still within the child.
		if g, err := k.Narrow(child, mustJSON(parent)); err == nil && !child.Contains(g) {
			t.Fatalf("narrowing child %s to parent's fields gave %s, outside the child", child, g)
		} else if err != nil && !errors.Is(err, kindapi.ErrDenied) {
			t.Fatalf("narrowing child to parent's fields: %v", err)
		}
	}
	if okCount < iterations/10 || deniedCount < iterations/10 {
		t.Errorf("unbalanced generator: %d narrowed, %d denied", okCount, deniedCount)
	}
}

// mustJSON renders a scope as a narrowing request for all its fields.
func mustJSON(s *Scope) []byte {
	b, _ := json.Marshal(map[string]any{
		"methods": s.methods, "paths": s.paths, "max_request_bytes": s.maxRequest,
		"max_response_bytes": s.maxResponse, "timeout": s.timeout.String(),
		"max_redirects": s.maxRedirects, "allow_private": s.allowPrivate,
	})
	return b
}

// wouldWiden is an independent statement of the narrowing rule: it names
// the first field of req outside parent, or "".
func wouldWiden(parent *Scope, req map[string]any) string {
	if v, ok := req["origin"]; ok {
		o, _ := parseOrigin(v.(string))
		if o != parent.origin {
			return "origin"
		}
	}
	if v, ok := req["methods"]; ok {
		for _, m := range v.([]string) {
			if !slices.Contains(parent.methods, m) {
				return "methods"
			}
		}
	}
	if v, ok := req["paths"]; ok {
		for _, p := range v.([]string) {
			within := false
			for _, pp := range parent.paths {
				if segWithin(pp, p) {
					within = true
				}
			}
			if !within {
				return "paths"
			}
		}
	}
	if v, ok := req["max_request_bytes"]; ok && v.(int64) > parent.maxRequest {
		return "max_request_bytes"
	}
	if v, ok := req["max_response_bytes"]; ok && v.(int64) > parent.maxResponse {
		return "max_response_bytes"
	}
	if v, ok := req["timeout"]; ok {
		d, _ := time.ParseDuration(v.(string))
		if d > parent.timeout {
			return "timeout"
		}
	}
	if v, ok := req["max_redirects"]; ok && v.(int) > parent.maxRedirects {
		return "max_redirects"
	}
	if v, ok := req["allow_private"]; ok && v.(bool) && !parent.allowPrivate {
		return "allow_private"
	}
	if v, ok := req["refuses_taints"]; ok {
		// Each refused taint of the parent's is asked for again, or lies
		// under a prefix asked for ("bank:*" keeps "bank:tx" and "bank:t*").
		for _, p := range parent.RefusedTaints() {
			kept := false
			for _, q := range v.([]string) {
				pre, isPrefix := strings.CutSuffix(q, "*")
				if q == p || isPrefix && strings.HasPrefix(p, pre) {
					kept = true
				}
			}
			if !kept {
				return "refuses_taints"
			}
		}
	}
	return ""
}

// segWithin decides prefix containment on segment lists, independently of
// pathWithin's string arithmetic.
func segWithin(pre, p string) bool {
	segs := func(x string) ([]string, bool) {
		t := strings.Trim(x, "/")
		if t == "" {
			return nil, true
		}
		return strings.Split(t, "/"), strings.HasSuffix(x, "/")
	}
	ps, pTrail := segs(pre)
	xs, xTrail := segs(p)
	if len(xs) < len(ps) || !slices.Equal(xs[:len(ps)], ps) {
		return false
	}
	if pTrail && len(ps) > 0 {
		return len(xs) > len(ps) || xTrail
	}
	return true
}
