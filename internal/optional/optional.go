// Package optional holds the parts of mandate that its default build
// leaves out for what they cost to compile, and says what a build has.
//
// A cold "go build ./cmd/mandate" spends about a fifth of its CPU time on
// the embedded NATS server (github.com/nats-io/nats-server, for "mandate
// node --embedded-nats", a fleet of one to try) and the PostgreSQL driver
// (github.com/jackc/pgx, for a data store that a fleet shares). A build
// with the tags natsserver and postgres has them:
//
//	go install -tags 'natsserver postgres' ./cmd/mandate
//
// The packages that implement them (internal/natsembed, caps/data/pgstore)
// set the variables below when they are imported: cmd/mandate imports them
// in files with those build tags, and tests import them directly. A build
// without one says so when it is asked for, naming the tag.
package optional

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/data"
)

// NATSServer starts a NATS server with JetStream in this process, its
// streams in storeDir, on 127.0.0.1:port, and returns its client URL and a
// function that shuts it down. Nil in a build without one.
var NATSServer func(ctx context.Context, storeDir string, port int, logger hclog.Logger) (url string, shutdown func(), err error)

// Postgres opens the data store in the PostgreSQL database at url (a
// postgres:// URL). Nil in a build without one.
var Postgres func(ctx context.Context, url string) (data.Backend, error)

// Part is one optional part: its build tag, what it is for, and whether
// this build has it.
type Part struct {
	Tag, What string
	In        bool
}

// Parts are the optional parts, in a fixed order.
func Parts() []Part {
	return []Part{
		{Tag: "natsserver", What: "the embedded NATS server (mandate node --embedded-nats)", In: NATSServer != nil},
		{Tag: "postgres", What: "PostgreSQL data stores (postgres:// in MANDATE_DATA_STORE)", In: Postgres != nil},
	}
}

// Missing is the error for a part this build lacks: what it is and how to
// build a mandate that has it.
func Missing(tag string) error {
	for _, p := range Parts() {
		if p.Tag == tag {
			return fmt.Errorf("this mandate was built without %s: the default build leaves it out for its compile time; "+
				"build one with it: go install -tags %s ./cmd/mandate (in a checkout of mandate)", p.What, p.Tag)
		}
	}
	return fmt.Errorf("this mandate was built without the part %q", tag)
}
