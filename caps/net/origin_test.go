package net

import (
	"net/netip"
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

func TestAddrClass(t *testing.T) {
	tests := []struct {
		addr   string
		public bool
	}{
		{"8.8.8.8", true},
		{"2606:4700::1111", true},
		{"93.184.216.34", true},
		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"::1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"192.168.1.1", false},
		{"fc00::1", false},
		{"fd12:3456::1", false},
		{"169.254.169.254", false},
		{"fe80::1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"100.64.0.1", false},
		{"100.127.255.255", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:169.254.169.254", false},
		{"::127.0.0.1", false},
		{"64:ff9b::7f00:1", false},
		{"64:ff9b::808:808", true},
		{"2002:7f00:1::", false},
		{"2002:808:808::", true},
		{"224.0.0.1", false},
		{"ff02::1", false},
		{"255.255.255.255", false},
		{"fec0::1", false},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		c := addrClass(a)
		if got := c == ""; got != tt.public {
			t.Errorf("addrClass(%s) = %q; public = %v, want %v", tt.addr, c, got, tt.public)
		}
	}
}
