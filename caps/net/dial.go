package net

import (
	"context"
	"errors"
	gonet "net"

	"github.com/mandatevm/mandate/internal/egress"
)

// privateAddrError is a dial refused because the address is not public and
// the scope does not allow private addresses. It names the class of
// address (egress.Denied's Reason), not the address: the guest need not
// learn the network's layout.
type privateAddrError struct{ reason string }

func (e *privateAddrError) Error() string {
	return "the origin resolves to " + e.reason + " and allow_private is false"
}

// privateHost reports, at grant time, why an origin's host is certainly
// not public: an IP literal in a private range, or a name under
// "localhost" (egress.HostReason). Names are otherwise checked when
// dialed, on the address actually dialed.
func privateHost(o origin) string {
	if why := egress.HostReason(o.host); why != "" {
		return "host " + o.host + " is " + why
	}
	return ""
}

// lookupFunc resolves a host name to addresses.
type lookupFunc = egress.Lookup

// dialer returns the DialContext of a transport: egress.Dialer, which
// resolves the host once, refuses non-public addresses when allowPrivate
// is false, dials only the address it checked, and checks the connected
// address again in a Control hook.
func dialer(lookup lookupFunc, allowPrivate bool) func(ctx context.Context, network, addr string) (gonet.Conn, error) {
	return egress.Dialer(lookup, allowPrivate, 0)
}

func defaultLookup(r *gonet.Resolver) lookupFunc { return egress.Resolver(r) }

// isPrivateDenial reports whether err is a dial refused by policy.
func isPrivateDenial(err error) (*privateAddrError, bool) {
	var d *egress.Denied
	if !errors.As(err, &d) {
		return nil, false
	}
	return &privateAddrError{reason: d.Reason}, true
}
