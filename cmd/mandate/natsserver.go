//go:build natsserver

package main

// The embedded NATS server, for "mandate node --embedded-nats"
// (internal/optional).
import _ "github.com/mandatevm/mandate/internal/natsembed"
