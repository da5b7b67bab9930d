package cli

import (
	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/kernel"
)

// kinds returns the capability kinds a run's kernel registers: one line per
// kind. A manifest's cap "KIND" blocks must name one of these.
func kinds() []kernel.Kind {
	return []kernel.Kind{
		net.New(),
	}
}
