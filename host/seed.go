package host

import (
	"context"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/manifest"
)

// Seed imports a manifest's seed blocks into the data store of the state
// directory (DataStore), each in one transaction, before anything runs.
func Seed(ctx context.Context, seeds []manifest.Seed, state string) error {
	return SeedTo(ctx, seeds, DataStore(state))
}

// SeedTo is Seed into the data store at dataStore (a path or a
// postgres:// URL; see OpenDataStore).
func SeedTo(ctx context.Context, seeds []manifest.Seed, dataStore string) error {
	if len(seeds) == 0 {
		return nil
	}
	st, err := OpenDataStore(ctx, dataStore)
	if err != nil {
		return err
	}
	defer st.Close()
	for i := range seeds {
		s := &seeds[i]
		recs, err := data.ReadFile(s.File)
		if err != nil {
			return s.Error(err)
		}
		if _, err := st.Import(ctx, s.Collection, recs, data.ImportOptions{Relations: s.Relations}); err != nil {
			return s.Error(err)
		}
	}
	return nil
}
