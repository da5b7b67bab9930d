package net

import (
	"context"
	"errors"
	gonet "net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// privateAddrError is a dial refused because the address is not public and
// the scope does not allow private addresses. It names the class of
// address, not the address: the guest need not learn the network's layout.
type privateAddrError struct{ class string }

func (e *privateAddrError) Error() string {
	return "the origin resolves to a " + e.class + " address and allow_private is false"
}

// nonPublic lists IPv4 and IPv6 ranges that are not the public internet,
// beyond what netip.Addr's predicates cover.
var nonPublic = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// Prefixes whose addresses embed an IPv4 address: the embedded address is
// checked too, since a NAT64 or 6to4 gateway would reach it.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
)

// addrClass returns the class of a non-public address ("loopback",
// "private", "link-local", ...) or "" for a public one. IPv4-mapped IPv6
// addresses are classified as their IPv4 address.
func addrClass(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid"
	}
	a = a.WithZone("").Unmap()
	switch {
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, p := range nonPublic {
		if p.prefix.Contains(a) {
			return p.class
		}
	}
	if a.Is6() {
		b := a.As16()
		var v4 netip.Addr
		switch {
		case nat64.Contains(a), nat64Local.Contains(a):
			v4 = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		case sixToFour.Contains(a):
			v4 = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		}
		if v4.IsValid() {
			if c := addrClass(v4); c != "" {
				return c + " (embedded in IPv6)"
			}
		}
	}
	return ""
}

// privateHost reports, at grant time, why an origin's host is certainly
// not public: an IP literal in a private range, or a name under
// "localhost". Names are otherwise checked when dialed, on the address
// actually dialed.
func privateHost(o origin) string {
	if a, ok := o.ip(); ok {
		if c := addrClass(a); c != "" {
			return "host " + o.host + " is a " + c + " address"
		}
		return ""
	}
	if o.host == "localhost" || strings.HasSuffix(o.host, ".localhost") {
		return "host " + o.host + " is loopback"
	}
	return ""
}

// controlPublic is a net.Dialer Control function that refuses to connect
// to a non-public address. It runs on the address actually being dialed,
// after resolution, so a name that resolves (or rebinds) to a private
// address is refused.
func controlPublic(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &privateAddrError{class: "unparseable"}
	}
	if c := addrClass(ap.Addr()); c != "" {
		return &privateAddrError{class: c}
	}
	return nil
}

// lookupFunc resolves a host name to addresses.
type lookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// dialer returns the DialContext of a transport. It resolves the host
// itself, skips non-public addresses when allowPrivate is false, and dials
// with controlPublic as the last word on the address.
func dialer(lookup lookupFunc, allowPrivate bool) func(ctx context.Context, network, addr string) (gonet.Conn, error) {
	d := &gonet.Dialer{KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = controlPublic
	}
	return func(ctx context.Context, network, addr string) (gonet.Conn, error) {
		host, portStr, err := gonet.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			return nil, err
		}
		var ips []netip.Addr
		if a, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{a}
		} else if ips, err = lookup(ctx, host); err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, &gonet.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
		var denied, first error
		for _, ip := range ips {
			ip = ip.Unmap()
			if !allowPrivate {
				if c := addrClass(ip); c != "" {
					if denied == nil {
						denied = &privateAddrError{class: c}
					}
					continue
				}
			}
			c, err := d.DialContext(ctx, network, netip.AddrPortFrom(ip, uint16(port)).String())
			if err == nil {
				return c, nil
			}
			if first == nil {
				first = err
			}
			if ctx.Err() != nil {
				break
			}
		}
		// A refusal on policy is the decision the guest must see, ahead
		// of a connection error on some other address.
		if denied != nil {
			return nil, denied
		}
		return nil, first
	}
}

func defaultLookup(r *gonet.Resolver) lookupFunc {
	if r == nil {
		r = gonet.DefaultResolver
	}
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		return r.LookupNetIP(ctx, "ip", host)
	}
}

// isPrivateDenial reports whether err is a dial refused by policy.
func isPrivateDenial(err error) (*privateAddrError, bool) {
	var pe *privateAddrError
	ok := errors.As(err, &pe)
	return pe, ok
}
