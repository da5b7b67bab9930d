package host

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/caps/declassify"
	"github.com/mandatevm/mandate/caps/llm"
	"github.com/mandatevm/mandate/caps/mcp"
	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/spawn"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Kinds returns the capability kinds a run's kernel registers: one line per
// kind. A manifest's cap "KIND" blocks must name one of these. state is
// the state directory: the data kind opens its store, STATE/data.db unless
// $MANDATE_DATA_STORE says otherwise (DataStore), on its first use (a run
// that uses no data capability opens no database). close
// releases what the kinds opened; call it when the run ends.
func Kinds(state string) (ks []kindapi.Kind, close func() error) {
	return KindsWith(state, DataStore(state))
}

// KindsWith is Kinds with the data kind's store at dataStore (a path or a
// postgres:// URL; see OpenDataStore) rather than where DataStore says.
func KindsWith(state, dataStore string) (ks []kindapi.Kind, close func() error) {
	d := data.NewLazy(func() (data.Backend, error) {
		if dataStore == "" {
			return nil, errors.New("data: no state directory, so no data store")
		}
		return OpenDataStore(context.Background(), dataStore)
	})
	m := mcp.New()
	ks = []kindapi.Kind{net.New(), d, pay.New(), spawn.New(), declassify.New(), llm.New(), m}
	return ks, func() error { return errors.Join(d.Close(), m.Close()) }
}

// Declassifiers names the kinds granted the privilege to lower labels:
// declassify, and llm, whose extract drops the integrity taints of an
// answer it validated against a closed schema (each such kind's calls are
// all audited). A new slice each call: what the host grants this privilege
// is not a variable any linked package can append to.
func Declassifiers() []string { return []string{declassify.KindName, llm.KindName} }

// DataStorePath is the data kind's store in the state directory state.
func DataStorePath(state string) string { return filepath.Join(state, "data.db") }
