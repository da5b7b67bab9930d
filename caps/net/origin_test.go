package net

import (
	"strings"
	"testing"
)

func TestParseOrigin(t *testing.T) {
	tests := []struct {
		in      string
		want    string // canonical; "" means an error is wanted
		errPart string // part of the error message, when an error is wanted
	}{
		{"https://flights.example", "https://flights.example", ""},
		{"https://flights.example/", "https://flights.example", ""},
		{"HTTP://FLIGHTS.EXAMPLE:80", "http://flights.example", ""},
		{"http://flights.example:80", "http://flights.example", ""},
		{"https://flights.example:443", "https://flights.example", ""},
		{"http://flights.example:443", "http://flights.example:443", ""},
		{"https://flights.example:8443", "https://flights.example:8443", ""},
		{"http://flights.example:0080", "http://flights.example", ""},
		{"http://flights.example.", "http://flights.example", ""},
		{"https://bücher.example", "https://xn--bcher-kva.example", ""},
		{"https://BÜCHER.example", "https://xn--bcher-kva.example", ""},
		{"https://xn--bcher-kva.example", "https://xn--bcher-kva.example", ""},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"http://[::1]:8080", "http://[::1]:8080", ""},
		{"http://[0:0::1]", "http://[::1]", ""},
		{"http://[::FFFF:127.0.0.1]", "http://[::ffff:127.0.0.1]", ""},

		{"http://flights.example@evil.example", "", "userinfo"},
		{"http://user:pw@flights.example", "", "userinfo"},
		{"http://flights.example/search", "", "no path"},
		{"http://flights.example?q=1", "", "no path"},
		{"http://flights.example#x", "", "no path"},
		{"http://flights.example//", "", "no path"},
		{"ftp://flights.example", "", "scheme"},
		{"javascript://flights.example", "", "scheme"},
		{"flights.example", "", "absolute"},
		{"http:flights.example", "", "absolute"},
		{"http://", "", "empty host"},
		{"http://:80", "", "empty host"},
		{"http://.", "", "empty host"},
		{"http://flights.example:", "", "bad port"},
		{"http://flights.example:0", "", "out of range"},
		{"http://flights.example:65536", "", "out of range"},
		{"http://flights.example:+80", "", "bad port"},
		{"http://flights.example:8o", "", "bad port"},
		{"http://flights.example:1:2", "", "brackets"},
		{"http://evil.example\\@flights.example", "", "backslash"},
		{"http://flights%2eexample", "", "percent"},
		{"http://flights .example", "", "space"},
		{"http://flights.example\n", "", "control"},
		{"http://[::1", "", "unclosed"},
		{"http://[fe80::1%25eth0]", "", "percent"},
		{"http://[127.0.0.1]", "", "IPv6"},
		{"http://::1", "", "brackets"},
		{"http://127.1", "", "looks like an IP"},
		{"http://0x7f.0.0.1", "", "looks like an IP"},
		{"http://127.000.000.001", "", "looks like an IP"},
		{"http://my_host.example", "", "valid domain"},
		{"http://flights..example", "", ""},
		{"http://" + strings.Repeat("a", 64) + ".example", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			o, err := parseOrigin(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("parseOrigin(%q) = %s, want error", tt.in, o)
				}
				if !strings.Contains(err.Error(), tt.errPart) {
					t.Errorf("parseOrigin(%q) error = %q, want it to mention %q", tt.in, err, tt.errPart)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseOrigin(%q): %v", tt.in, err)
			}
			if got := o.String(); got != tt.want {
				t.Errorf("parseOrigin(%q) = %s, want %s", tt.in, got, tt.want)
			}
			// Canonical forms are fixed points.
			o2, err := parseOrigin(o.String())
			if err != nil || o2 != o {
				t.Errorf("parseOrigin(%q) = %v, %v; want %v", o.String(), o2, err, o)
			}
		})
	}
}
