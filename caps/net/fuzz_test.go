package net

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// FuzzParseOrigin: parsing never panics; an accepted origin's canonical
// form parses back to the same origin and has the canonical shape.
func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{
		"https://flights.example", "HTTP://FLIGHTS.EXAMPLE:80", "http://flights.example@evil.example",
		"https://bücher.example", "http://[::1]:8080", "http://[fe80::1%25eth0]", "http://127.1",
		"http://flights.example.", "http://a:65535/", "http://a:65536", "http://evil\\@a", "http://xn--zz",
		"https://ＦＬＩＧＨＴＳ。example", "http://0x7f.1", "http://[::ffff:1.2.3.4]", "http://a/b?c#d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parseOrigin(s)
		if err != nil {
			return
		}
		c := o.String()
		o2, err := parseOrigin(c)
		if err != nil || o2 != o || o2.String() != c {
			t.Fatalf("parseOrigin(%q) = %s, which reparses as %v, %v", s, c, o2, err)
		}
		if o.scheme != "http" && o.scheme != "https" {
			t.Fatalf("scheme %q", o.scheme)
		}
		if o.host == "" || o.port == 0 || strings.ContainsAny(o.host, "@/\\?#% ") || strings.ToLower(o.host) != o.host {
			t.Fatalf("parseOrigin(%q): bad host %q port %d", s, o.host, o.port)
		}
		for i := 0; i < len(c); i++ {
			if c[i] >= 0x80 {
				t.Fatalf("canonical origin %q is not ASCII", c)
			}
		}
	})
}

// FuzzPathMatch: canonicalisation never panics, is idempotent, and a path
// allowed for a prefix P is, canonically, P on a segment boundary with no
// dot segments, empty segments, backslashes or encoded slashes; and the
// URL a fetch sends carries exactly that path.
func FuzzPathMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"/search", "/search/../admin"}, {"/search", "/search%2f..%2fadmin"}, {"/search", "/search/%2e%2e/admin"},
		{"/search", "/search\\..\\admin"}, {"/search", "//evil.example/x"}, {"/search", "/searchadmin"},
		{"/search", "/search/..%2fadmin"}, {"/search/", "/search"}, {"/", "/a/./b/../c/"}, {"/a", "/a;x/..;/b"},
		{"/search", "/search?q=/../admin"}, {"/search", "/search/%252e%252e/"}, {"/%7Ea", "/~a/b"},
		{"/search", "/search/caf\xc3\xa9"}, {"/search", "https://flights.example/search/x"},
	} {
		f.Add(s[0], s[1])
	}
	k := New()
	f.Fuzz(func(t *testing.T, prefix, raw string) {
		if c, err := canonPath(raw); err == nil {
			if again, err := canonPath(c); err != nil || again != c {
				t.Fatalf("canonPath(%q) = %q, but canonPath(%q) = %q, %v", raw, c, c, again, err)
			}
		}
		p, err := canonPrefix(prefix)
		if err != nil {
			return
		}
		spec, _ := json.Marshal(map[string]any{"origin": "https://flights.example", "paths": []string{prefix}})
		sc, err := k.Grant(kindapi.GrantContext{}, spec)
		if err != nil {
			t.Fatalf("Grant with prefix %q (canonical %q): %v", prefix, p, err)
		}
		s := sc.(*Scope)
		u, err := s.target(raw)
		if err != nil {
			if kindapi.ErrnoOf(err) != abi.EDENIED && kindapi.ErrnoOf(err) != abi.EINVAL {
				t.Fatalf("target(%q): errno %s", raw, kindapi.ErrnoOf(err))
			}
			return
		}
		c := u.EscapedPath()
		if c != u.RawPath {
			t.Fatalf("target(%q): the request would send %q, not the checked %q", raw, c, u.RawPath)
		}
		if !(p == "/" || c == p || strings.HasPrefix(c, strings.TrimSuffix(p, "/")+"/")) {
			t.Fatalf("target(%q) = %q, not within prefix %q", raw, c, p)
		}
		if strings.HasSuffix(p, "/") && c == strings.TrimSuffix(p, "/") {
			t.Fatalf("target(%q) = %q, but prefix %q requires the slash", raw, c, p)
		}
		if strings.Contains(c, "\\") || strings.Contains(c, "//") {
			t.Fatalf("target(%q) = %q has a backslash or an empty segment", raw, c)
		}
		lc := strings.ToLower(c)
		if strings.Contains(lc, "%2f") || strings.Contains(lc, "%5c") || strings.Contains(lc, "%2e") {
			t.Fatalf("target(%q) = %q has an encoded slash, backslash or dot", raw, c)
		}
		for _, seg := range strings.Split(c, "/") {
			if seg == "." || seg == ".." || strings.HasPrefix(seg, "..;") || strings.HasPrefix(seg, ".;") {
				t.Fatalf("target(%q) = %q has a dot segment", raw, c)
			}
		}
		if rq := u.RequestURI(); !strings.HasPrefix(rq, c) {
			t.Fatalf("target(%q): request URI %q does not start with %q", raw, rq, c)
		}
	})
}

// FuzzNarrow: decoding a narrowing request never panics; a success is
// within the parent; a failure is EINVAL, ELIMIT or EDENIED.
func FuzzNarrow(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"methods":["GET"]}`, `{"methods":["POST"]}`, `{"paths":["/search/x"]}`, `{"paths":["/"]}`,
		`{"max_request_bytes":1,"max_response_bytes":99999999999,"timeout":"1s","max_redirects":0}`,
		`{"allow_private":true}`, `{"drop_headers":["authorization"]}`, `{"origin":"https://FLIGHTS.example"}`,
		`{"timeout":"-5m"}`, `{"paths":["/search/../x"]}`, `{"methods":null}`, `[`, `{"a":1}`, `{"timeout":"9223372036854775807ns"}`,
	} {
		f.Add([]byte(s))
	}
	k := New()
	gc := kindapi.GrantContext{LookupEnv: func(string) (string, bool) { return "a-long-secret-value", true }}
	ps, err := k.Grant(gc, []byte(`{"origin":"https://flights.example","methods":["GET","HEAD"],"paths":["/search","/book/"],
	  "max_request_bytes":1000,"max_response_bytes":100000,"timeout":"10s","max_redirects":3,
	  "headers":[{"name":"Authorization","env":"T"}]}`))
	if err != nil {
		f.Fatal(err)
	}
	parent := ps.(*Scope)
	f.Fuzz(func(t *testing.T, req []byte) {
		cs, ok := kerneltest.CheckNarrow(t, k, []kindapi.Scope{parent}, req, abi.EINVAL, abi.ELIMIT, abi.EDENIED)
		if !ok {
			return
		}
		b, err := cs.MarshalJSON()
		if err != nil || strings.Contains(string(b), "a-long-secret-value") {
			t.Fatalf("MarshalJSON: %s, %v", b, err)
		}
		// Narrowing is idempotent: the child narrowed by its own fields
		// is the child.
		var j map[string]any
		_ = json.Unmarshal(b, &j)
		delete(j, "headers")
		delete(j, "reserved_headers")
		again, _ := json.Marshal(j)
		g, err := k.Narrow(cs, again)
		if err != nil {
			t.Fatalf("Narrow(child, %s): %v", again, err)
		}
		if gb, _ := g.MarshalJSON(); string(gb) != string(b) {
			t.Fatalf("re-narrowing changed the scope:\n%s\n%s", b, gb)
		}
	})
}

// FuzzGrant: a grant spec never panics the kind; a granted scope contains
// itself and its JSON has no secret.
func FuzzGrant(f *testing.F) {
	for _, s := range []string{
		`{"origin":"https://flights.example"}`,
		`{"origin":"https://flights.example","methods":["get"],"paths":["/a/"],"timeout":"1s","headers":[{"name":"X","env":"T","prefix":"B "}]}`,
		`{"origin":"http://127.0.0.1","allow_private":true}`, `{"origin":1}`, `{"headers":[{}]}`,
	} {
		f.Add([]byte(s))
	}
	k := New()
	gc := kindapi.GrantContext{Dir: f.TempDir(), LookupEnv: func(string) (string, bool) { return "a-long-secret-value", true }}
	f.Fuzz(func(t *testing.T, spec []byte) {
		s, err := k.Grant(gc, spec)
		if err != nil {
			if strings.Contains(err.Error(), "a-long-secret-value") {
				t.Fatalf("grant error leaks the secret: %v", err)
			}
			return
		}
		if !s.Contains(s) {
			t.Fatalf("%s does not contain itself", s)
		}
		if b, _ := s.MarshalJSON(); strings.Contains(string(b), "a-long-secret-value") {
			t.Fatalf("scope JSON leaks the secret: %s", b)
		}
	})
}
