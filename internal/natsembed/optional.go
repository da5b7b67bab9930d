package natsembed

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/internal/optional"
)

// Importing this package gives the build its embedded NATS server
// (internal/optional): cmd/mandate imports it with the tag natsserver.
func init() {
	optional.NATSServer = func(ctx context.Context, storeDir string, port int, logger hclog.Logger) (string, func(), error) {
		srv, err := Start(ctx, Config{StoreDir: storeDir, Port: port, Logger: logger})
		if err != nil {
			return "", nil, err
		}
		return srv.ClientURL(), srv.Shutdown, nil
	}
}
