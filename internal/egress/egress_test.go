package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// classTests is the one table: a row per address class, and public rows.
// in is an address (checked with Classify and HostReason) or a host name
// (HostReason only); want is the reason, "" for public.
var classTests = []struct {
	in, want string
}{
	// public
	{"8.8.8.8", ""},
	{"93.184.216.34", ""},
	{"2606:4700::1111", ""},
	{"64:ff9b::808:808", ""},  // NAT64 of a public address
	{"2002:808:808::1", ""},   // 6to4 of a public address
	{"::ffff:8.8.8.8", ""},    // IPv4-mapped public
	{"192.0.1.1", ""},         // next to 192.0.0/24 and 192.0.2/24
	{"100.128.0.1", ""},       // just past CGNAT
	{"172.32.0.1", ""},        // just past 172.16/12
	{"flights.example", ""},   // names are checked when dialed
	{"localhost.example", ""}, // not under localhost
	// IPv4
	{"0.0.0.0", "a this-network address"},
	{"0.1.2.3", "a this-network address"},
	{"10.1.2.3", "a private address"},
	{"100.64.0.1", "a shared (CGNAT) address"},
	{"100.127.255.255", "a shared (CGNAT) address"},
	{"127.0.0.1", "a loopback address"},
	{"127.255.255.254", "a loopback address"},
	{"169.254.169.254", "a link-local address"},
	{"172.16.0.1", "a private address"},
	{"172.31.255.255", "a private address"},
	{"192.0.0.8", "an IETF protocol address"},
	{"192.0.2.1", "a documentation address"},
	{"192.88.99.1", "a 6to4 relay anycast address"},
	{"192.168.1.1", "a private address"},
	{"198.18.0.1", "a benchmarking address"},
	{"198.19.255.255", "a benchmarking address"},
	{"198.51.100.1", "a documentation address"},
	{"203.0.113.1", "a documentation address"},
	{"224.0.0.1", "a multicast address"},
	{"239.255.255.250", "a multicast address"},
	{"240.0.0.1", "a reserved address"},
	{"255.255.255.255", "the broadcast address"},
	// IPv6
	{"::", "the unspecified address"},
	{"::1", "a loopback address"},
	{"::ffff:127.0.0.1", "a loopback address"},
	{"::ffff:10.0.0.1", "a private address"},
	{"::ffff:169.254.169.254", "a link-local address"},
	{"::127.0.0.1", "an IPv4-compatible address (deprecated)"},
	{"::8.8.8.8", "an IPv4-compatible address (deprecated)"},
	{"64:ff9b::7f00:1", "a loopback address (embedded in a NAT64 address)"},
	{"64:ff9b::a9fe:a9fe", "a link-local address (embedded in a NAT64 address)"},
	{"64:ff9b:1::808:808", "a local-use NAT64 address"},
	{"100::1", "a discard-only address"},
	{"2001::1", "a Teredo address"},
	{"2001:2::1", "a benchmarking address"},
	{"2001:10::1", "an ORCHID address"},
	{"2001:20::1", "an ORCHID address"},
	{"2001:db8::1", "a documentation address"},
	{"2002:7f00:1::1", "a loopback address (embedded in a 6to4 address)"},
	{"2002:a00:1::", "a private address (embedded in a 6to4 address)"},
	{"3fff::1", "a documentation address"},
	{"fc00::1", "a unique-local address"},
	{"fd12:3456::1", "a unique-local address"},
	{"fe80::1", "a link-local address"},
	{"fe80::1%eth0", "an address with a zone"},
	{"fec0::1", "a site-local address"},
	{"ff02::1", "a multicast address"},
	{"5f00::1", "a reserved IPv6 address"},
	{"::ffff:0:7f00:1", "a reserved IPv6 address"}, // IPv4-translated, ::/8
	// hosts: names and the IPv4 numbers some resolvers accept
	{"localhost", "a loopback name"},
	{"LOCALHOST.", "a loopback name"},
	{"api.localhost", "a loopback name"},
	{"[::1]", "a loopback address"},
	{"127.1", "a loopback address"},
	{"0x7f.1", "a loopback address"},
	{"0177.0.0.1", "a loopback address"},
	{"2130706433", "a loopback address"},
	{"10.1", "a private address"},
	{"134744072", ""}, // 8.8.8.8
}

func TestClassify(t *testing.T) {
	for _, tt := range classTests {
		if a, err := netip.ParseAddr(tt.in); err == nil {
			if got := Classify(a); got != tt.want {
				t.Errorf("Classify(%s) = %q, want %q", tt.in, got, tt.want)
			}
		}
		if got := HostReason(tt.in); got != tt.want {
			t.Errorf("HostReason(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := Classify(netip.Addr{}); got == "" {
		t.Error("Classify of the zero Addr is public")
	}
}

// TestControl checks the hook that runs on the address being connected.
func TestControl(t *testing.T) {
	var d *Denied
	if err := control("tcp", "127.0.0.1:80", nil); !errors.As(err, &d) || d.Reason != "a loopback address" {
		t.Errorf("control(127.0.0.1:80) = %v", err)
	}
	if err := control("tcp6", "[64:ff9b::a00:1]:443", nil); !errors.As(err, &d) {
		t.Errorf("control(NAT64 of 10.0.0.1) = %v", err)
	}
	if err := control("tcp", "garbage", nil); !errors.As(err, &d) {
		t.Errorf("control(garbage) = %v", err)
	}
	if err := control("tcp", "8.8.8.8:53", nil); err != nil {
		t.Errorf("control(8.8.8.8:53) = %v", err)
	}
}

func TestDialer(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	var lookups atomic.Int32
	// A name no real resolver knows: if the dialer resolved it a second
	// time, itself, the dial would fail.
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		switch host {
		case "rebind.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "mixed.test":
			return []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("::ffff:127.0.0.1")}, nil
		case "empty.test":
			return nil, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	get := func(allowPrivate bool, host string) (string, error) {
		c := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: Dialer(lookup, allowPrivate, 0)}}
		defer c.CloseIdleConnections()
		resp, err := c.Get("http://" + net.JoinHostPort(host, port) + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	for _, host := range []string{"127.0.0.1", "rebind.test", "mixed.test"} {
		_, err := get(false, host)
		var d *Denied
		if !errors.As(err, &d) {
			t.Fatalf("allowPrivate false, %s: err = %v, want a *Denied", host, err)
		}
		if !strings.Contains(d.Reason, "address") || !strings.Contains(err.Error(), "allow_private is false") {
			t.Errorf("allowPrivate false, %s: %v", host, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server was reached %d times with allowPrivate false", n)
	}

	lookups.Store(0)
	// (Not mixed.test: a dial to 10.0.0.1 may hang rather than fail.)
	for _, host := range []string{"127.0.0.1", "rebind.test"} {
		body, err := get(true, host)
		if err != nil || body != "ok" {
			t.Fatalf("allowPrivate true, %s: %q, %v", host, body, err)
		}
	}
	if n := lookups.Load(); n != 1 {
		t.Errorf("rebind.test was looked up %d times, want once", n)
	}

	for _, host := range []string{"empty.test", "nosuch.test"} {
		_, err := get(true, host)
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Errorf("%s: err = %v, want a not-found DNSError", host, err)
		}
	}
	if _, err := Dialer(lookup, true, 0)(context.Background(), "unix", "/tmp/x"); err == nil {
		t.Error("a unix dial was not refused")
	}
}
