package net

import (
	"errors"
	"strings"
	"testing"
)

func TestCanonPath(t *testing.T) {
	const (
		ok      = 0
		invalid = 1
		denied  = 2
	)
	tests := []struct {
		in   string
		want string
		res  int
	}{
		{"/", "/", ok},
		{"/search", "/search", ok},
		{"/search/", "/search/", ok},
		{"/search/x", "/search/x", ok},
		{"/search//x", "/search/x", ok},
		{"//search", "/search", ok},
		{"/search/./x", "/search/x", ok},
		{"/search/../admin", "/admin", ok},
		{"/search/%2e%2e/admin", "/admin", ok},
		{"/search/%2E%2E/admin", "/admin", ok},
		{"/search/.%2e/admin", "/admin", ok},
		{"/search/x/..", "/search/", ok},
		{"/../../etc/passwd", "/etc/passwd", ok},
		{"/%73earch", "/search", ok},
		{"/search%7e", "/search~", ok},
		{"/a%3db", "/a%3Db", ok},
		{"/a=b", "/a=b", ok},
		{"/caf\xc3\xa9", "/caf%C3%A9", ok},
		{"/a\"b", "/a%22b", ok},
		{"/a%00b", "/a%00b", ok},
		{"/search;jsessionid=1", "/search;jsessionid=1", ok},
		{"/...", "/...", ok},
		{"/..foo", "/..foo", ok},

		{"", "", invalid},
		{"search", "", invalid},
		{"/a b", "", invalid},
		{"/a\tb", "", invalid},
		{"/a%zz", "", invalid},
		{"/a%2", "", invalid},
		{"/a%", "", invalid},

		{"/search%2f..%2fadmin", "", denied},
		{"/search%2F..%2Fadmin", "", denied},
		{"/search/..%2fadmin", "", denied},
		{"/search\\..\\admin", "", denied},
		{"/search%5c..%5cadmin", "", denied},
		{"/search/..;/admin", "", denied},
		{"/search/.;/admin", "", denied},
		{"/search/..%00/admin", "", denied},
		{"/search/..%3B/admin", "", denied},
		{"/search/%252e%252e/admin", "", denied},
		{"/search/%252E", "", denied},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := canonPath(tt.in)
			var pe *pathError
			switch {
			case tt.res == ok && err != nil:
				t.Fatalf("canonPath(%q): %v", tt.in, err)
			case tt.res == ok && got != tt.want:
				t.Fatalf("canonPath(%q) = %q, want %q", tt.in, got, tt.want)
			case tt.res != ok && err == nil:
				t.Fatalf("canonPath(%q) = %q, want error", tt.in, got)
			case tt.res != ok && (!errors.As(err, &pe) || pe.denied != (tt.res == denied)):
				t.Fatalf("canonPath(%q) error %v: denied = %v, want %v", tt.in, err, pe != nil && pe.denied, tt.res == denied)
			}
			if tt.res == ok {
				if again, err := canonPath(got); err != nil || again != got {
					t.Errorf("canonPath(%q) = %q, %v; want it unchanged", got, again, err)
				}
			}
		})
	}
}

func TestPathAllowed(t *testing.T) {
	tests := []struct {
		prefixes []string
		path     string
		want     bool
	}{
		{[]string{"/search"}, "/search", true},
		{[]string{"/search"}, "/search/", true},
		{[]string{"/search"}, "/search/x", true},
		{[]string{"/search"}, "/searchadmin", false},
		{[]string{"/search"}, "/admin", false},
		{[]string{"/search"}, "/", false},
		{[]string{"/search/"}, "/search", false},
		{[]string{"/search/"}, "/search/x", true},
		{[]string{"/"}, "/anything/at/all", true},
		{[]string{"/a", "/b"}, "/b/c", true},
	}
	for _, tt := range tests {
		if got := pathAllowed(tt.prefixes, tt.path); got != tt.want {
			t.Errorf("pathAllowed(%v, %q) = %v, want %v", tt.prefixes, tt.path, got, tt.want)
		}
	}
}

// TestTargetEscapes checks request URLs that try to leave the /search
// prefix: each is refused, by the path rules or by the prefix check.
func TestTargetEscapes(t *testing.T) {
	s := mustGrant(t, New(), `{"origin":"https://flights.example","paths":["/search"]}`)
	allowed := []struct{ in, want string }{
		{"/search", "https://flights.example/search"},
		{"/search?q=1", "https://flights.example/search?q=1"},
		{"/search?", "https://flights.example/search?"},
		{"/search/x?q=%2F..%2F", "https://flights.example/search/x?q=%2F..%2F"},
		{"/search/a/../b", "https://flights.example/search/b"},
		{"/search//x", "https://flights.example/search/x"},
		{"/search#frag", "https://flights.example/search"},
		{"https://flights.example/search", "https://flights.example/search"},
		{"HTTPS://FLIGHTS.EXAMPLE:443/search/%7Ex", "https://flights.example/search/~x"},
		{"https://flights.example", ""}, // path "/": denied below
		{"/search?q=caf\xc3\xa9", "https://flights.example/search?q=caf%C3%A9"},
	}
	for _, tt := range allowed {
		u, err := s.target(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("target(%q) = %s, want error", tt.in, u)
			}
			continue
		}
		if err != nil {
			t.Errorf("target(%q): %v", tt.in, err)
			continue
		}
		if got := u.String(); got != tt.want {
			t.Errorf("target(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	refused := []string{
		"/search/../admin",
		"/search%2f..%2fadmin",
		"/search/%2e%2e/admin",
		"/search/..%2fadmin",
		"/search\\..\\admin",
		"//evil.example/x",
		"/\\evil.example/x",
		"/searchadmin",
		"/admin",
		"/admin/../search/../admin",
		"/search/..;/admin",
		"http://flights.example/search",
		"https://evil.example/search",
		"https://flights.example@evil.example/search",
		"https://flights.example:8443/search",
		"https://flights.example.evil.example/search",
		"search",
		"",
	}
	for _, in := range refused {
		if u, err := s.target(in); err == nil {
			t.Errorf("target(%q) = %s, want error", in, u)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("target(%q) error has a newline: %q", in, err)
		}
	}
}
