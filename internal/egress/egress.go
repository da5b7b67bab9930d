// Package egress is the one guard on where a capability kind may connect.
// Every kind that dials out (net, pay) asks it what a non-public address
// is and dials through it, so the kinds cannot disagree.
//
// Classify names the class of an address that is not the public
// internet, from one table: IPv4 this-network (0/8), private (10/8,
// 172.16/12, 192.168/16), shared CGNAT (100.64/10), loopback (127/8),
// link-local (169.254/16), IETF protocol (192.0.0/24), documentation
// (192.0.2/24, 198.51.100/24, 203.0.113/24), the 6to4 relay anycast
// (192.88.99/24), benchmarking (198.18/15), multicast (224/4), reserved
// (240/4) and broadcast (255.255.255.255); IPv6 unspecified (::), loopback
// (::1), IPv4-compatible (::/96, deprecated), local-use NAT64
// (64:ff9b:1::/48), discard-only (100::/64), Teredo (2001::/32),
// benchmarking (2001:2::/48), ORCHID (2001:10::/28, 2001:20::/28),
// documentation (2001:db8::/32, 3fff::/20), unique-local (fc00::/7),
// link-local (fe80::/10), site-local (fec0::/10), multicast (ff00::/8),
// and anything else outside the global unicast 2000::/3. Addresses that
// embed an IPv4 address a gateway would reach are classified as that
// address: IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96, so
// 64:ff9b::7f00:1 is loopback) and 6to4 (2002::/16). An address with a
// zone (fe80::1%eth0) is refused.
//
// HostReason checks a host before any dial (at grant time): names under
// "localhost", IP literals, and numbers some resolvers read as IPv4
// ("127.1", "0x7f.1", "2130706433").
//
// Dialer returns a DialContext that resolves a name once, refuses every
// non-public address unless private addresses are allowed, dials only the
// address it checked (no second resolution, so DNS rebinding cannot slip
// a private address past the check), and checks again, in the dialer's
// Control hook, the address actually connected to. A refusal is a
// *Denied, which callers find with errors.As to report EDENIED.
package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Lookup resolves a host name to addresses.
type Lookup func(ctx context.Context, host string) ([]netip.Addr, error)

// Resolver returns a Lookup that asks r (net.DefaultResolver when nil).
func Resolver(r *net.Resolver) Lookup {
	if r == nil {
		r = net.DefaultResolver
	}
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		return r.LookupNetIP(ctx, "ip", host)
	}
}

// Denied is a dial refused because the address is not public and private
// addresses are not allowed.
type Denied struct {
	Addr   netip.Addr // the refused address; invalid if it did not parse
	Reason string     // what Classify said, e.g. "a loopback address"
}

// Error reads "address 127.0.0.1 is a loopback address and allow_private
// is false". A kind that must not tell the guest the address (the
// network's layout) formats Reason alone.
func (e *Denied) Error() string {
	if e.Addr.IsValid() {
		return "address " + e.Addr.String() + " is " + e.Reason + " and allow_private is false"
	}
	return "address is " + e.Reason + " and allow_private is false"
}

// class is one row of the address table. embed, when non-zero, is the
// byte offset of an IPv4 address embedded in an IPv6 prefix: the address
// is classified as the IPv4 address it reaches.
type class struct {
	prefix netip.Prefix
	reason string
	embed  int
}

// via is the reason suffix for an IPv4 address reached through a
// translating or tunnelling IPv6 prefix.
const (
	viaNAT64  = " (embedded in a NAT64 address)"
	viaSixTo4 = " (embedded in a 6to4 address)"
)

// classes is the table of addresses that are not the public internet. The
// longest matching prefix wins, so order does not matter.
var classes = []class{
	// IPv4
	{p("0.0.0.0/8"), "a this-network address", 0},
	{p("10.0.0.0/8"), "a private address", 0},
	{p("100.64.0.0/10"), "a shared (CGNAT) address", 0},
	{p("127.0.0.0/8"), "a loopback address", 0},
	{p("169.254.0.0/16"), "a link-local address", 0},
	{p("172.16.0.0/12"), "a private address", 0},
	{p("192.0.0.0/24"), "an IETF protocol address", 0},
	{p("192.0.2.0/24"), "a documentation address", 0},
	{p("192.88.99.0/24"), "a 6to4 relay anycast address", 0},
	{p("192.168.0.0/16"), "a private address", 0},
	{p("198.18.0.0/15"), "a benchmarking address", 0},
	{p("198.51.100.0/24"), "a documentation address", 0},
	{p("203.0.113.0/24"), "a documentation address", 0},
	{p("224.0.0.0/4"), "a multicast address", 0},
	{p("240.0.0.0/4"), "a reserved address", 0},
	{p("255.255.255.255/32"), "the broadcast address", 0},
	// IPv6
	{p("::/128"), "the unspecified address", 0},
	{p("::1/128"), "a loopback address", 0},
	{p("::ffff:0:0/96"), "", 12}, // IPv4-mapped
	{p("::/96"), "an IPv4-compatible address (deprecated)", 0},
	{p("64:ff9b::/96"), viaNAT64, 12},
	{p("64:ff9b:1::/48"), "a local-use NAT64 address", 0},
	{p("100::/64"), "a discard-only address", 0},
	{p("2001::/32"), "a Teredo address", 0},
	{p("2001:2::/48"), "a benchmarking address", 0},
	{p("2001:10::/28"), "an ORCHID address", 0},
	{p("2001:20::/28"), "an ORCHID address", 0},
	{p("2001:db8::/32"), "a documentation address", 0},
	{p("2002::/16"), viaSixTo4, 2},
	{p("3fff::/20"), "a documentation address", 0},
	{p("fc00::/7"), "a unique-local address", 0},
	{p("fe80::/10"), "a link-local address", 0},
	{p("fec0::/10"), "a site-local address", 0},
	{p("ff00::/8"), "a multicast address", 0},
}

// globalUnicast is where IANA allocates public IPv6 unicast addresses;
// an IPv6 address outside it and outside the table is reserved.
var globalUnicast = p("2000::/3")

func p(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// Classify returns "" for a public unicast address, else why it is not
// one: "a loopback address", "a private address", ... See the package
// documentation for the classes.
func Classify(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "an invalid address"
	case a.Zone() != "":
		return "an address with a zone"
	}
	var best *class
	for i := range classes {
		c := &classes[i]
		if c.prefix.Contains(a) && (best == nil || c.prefix.Bits() > best.prefix.Bits()) {
			best = c
		}
	}
	switch {
	case best == nil && a.Is6() && !globalUnicast.Contains(a):
		return "a reserved IPv6 address"
	case best == nil:
		return ""
	case best.embed == 0:
		return best.reason
	}
	b := a.As16()
	v4 := netip.AddrFrom4([4]byte(b[best.embed : best.embed+4]))
	if r := Classify(v4); r != "" {
		return r + best.reason
	}
	return ""
}

// HostReason returns "" for a host that may be public, else why it is
// certainly not: a name under "localhost" ("a loopback name"), or an IP
// literal, bracketed or not, or a number some resolvers read as an IPv4
// address ("127.1"), that Classify refuses. Other names can only be
// checked on the addresses they resolve to, when dialed (Dialer).
func HostReason(host string) string {
	h := strings.TrimRight(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return "a loopback name"
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return Classify(a)
	}
	if a, ok := inetAton(h); ok {
		return Classify(a)
	}
	return ""
}

// inetAton parses the IPv4 forms of inet_aton(3) that netip refuses: one
// to four parts, each decimal, octal (leading 0) or hex (0x), the last
// filling the remaining bytes ("127.1", "0x7f000001", "017700000001").
func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v [4]uint64
	for i, part := range parts {
		base, digits := 10, part
		switch {
		case len(part) > 2 && (part[:2] == "0x"):
			base, digits = 16, part[2:]
		case len(part) > 1 && part[0] == '0':
			base, digits = 8, part[1:]
		}
		n, err := strconv.ParseUint(digits, base, 32)
		if err != nil || digits == "" || digits[0] == '+' {
			return netip.Addr{}, false
		}
		v[i] = n
	}
	last := len(parts) - 1
	for i := 0; i < last; i++ {
		if v[i] > 0xff {
			return netip.Addr{}, false
		}
	}
	if v[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	n := v[last]
	for i := 0; i < last; i++ {
		n |= v[i] << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// control is a net.Dialer Control hook: the last word, on the address
// actually being connected to.
func control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &Denied{Reason: "an unparseable address"}
	}
	if r := Classify(ap.Addr()); r != "" {
		return &Denied{Addr: ap.Addr(), Reason: r}
	}
	return nil
}

// Dialer returns the DialContext of an http.Transport for a kind. It
// resolves the host once with lookup (Resolver(nil) when nil), skips
// every address Classify refuses unless allowPrivate, dials the checked
// address itself (never the name, so it is never resolved again), and,
// unless allowPrivate, checks the connected address once more in a
// Control hook. A timeout of 0 means none beyond the context's.
//
// If an address is refused and no other address could be connected to,
// the error is the *Denied: the policy's decision comes ahead of a
// connection error on some other address.
func Dialer(lookup Lookup, allowPrivate bool, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if lookup == nil {
		lookup = Resolver(nil)
	}
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = control
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		switch network {
		case "tcp", "tcp4", "tcp6":
		default:
			return nil, errors.New("egress: network " + strconv.Quote(network) + " is not dialed")
		}
		host, portStr, err := net.SplitHostPort(addr)
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
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
		var denied, first error
		for _, ip := range ips {
			ip = ip.Unmap()
			if !allowPrivate {
				if r := Classify(ip); r != "" {
					if denied == nil {
						denied = &Denied{Addr: ip, Reason: r}
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
		if denied != nil {
			return nil, denied
		}
		return nil, first
	}
}

// NotSent reports whether err, from an HTTP client dialing through Dialer,
// happened before any byte of the request could have left this host: the
// name did not resolve, the guard refused the address, or no connection
// was made. A kind tells the kernel so (kindapi.NotPerformed), and the call
// spends no use, budget or rate token.
func NotSent(err error) bool {
	var d *Denied
	if errors.As(err, &d) {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
