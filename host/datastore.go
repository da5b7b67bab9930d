package host

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/caps/data/pgstore/pgurl"
	"github.com/mandatevm/mandate/internal/optional"
)

// DataStoreEnv names the environment variable that puts every command's
// data store elsewhere than STATE_DIR/data.db: a SQLite file path, or a
// postgres:// URL for a PostgreSQL database that a fleet of nodes shares
// (the password best left to PGPASSWORD or PGPASSFILE).
const DataStoreEnv = "MANDATE_DATA_STORE"

// openTimeout bounds connecting to a PostgreSQL data store and checking its
// schema.
const openTimeout = 30 * time.Second

// DataStore returns where the data kind's store is for the state directory
// state: $MANDATE_DATA_STORE when set, else STATE/data.db ("" when state is
// "" too).
func DataStore(state string) string {
	if s := os.Getenv(DataStoreEnv); s != "" {
		return s
	}
	if state == "" {
		return ""
	}
	return DataStorePath(state)
}

// OpenDataStore opens the data store at where: a PostgreSQL database for a
// postgres:// or postgresql:// URL (caps/data/pgstore, in a build with
// the tag postgres: internal/optional), else the SQLite
// file at that path, created when missing.
func OpenDataStore(ctx context.Context, where string) (data.Backend, error) {
	if pgurl.IsURL(where) {
		if optional.Postgres == nil {
			return nil, fmt.Errorf("data store %s: %w", pgurl.Redact(where), optional.Missing("postgres"))
		}
		ctx, cancel := context.WithTimeout(ctx, openTimeout)
		defer cancel()
		return optional.Postgres(ctx, where)
	}
	return data.Open(where)
}

// DataStoreName is where, fit for a message: a URL without its password.
func DataStoreName(where string) string {
	if pgurl.IsURL(where) {
		return pgurl.Redact(where)
	}
	return where
}
