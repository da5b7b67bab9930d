package pgstore

import (
	"context"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/internal/optional"
)

// Importing this package gives the build PostgreSQL data stores
// (internal/optional): cmd/mandate imports it with the tag postgres.
func init() {
	optional.Postgres = func(ctx context.Context, url string) (data.Backend, error) {
		return Open(ctx, url)
	}
}
