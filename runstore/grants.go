package runstore

import (
	"context"
	"encoding/json"

	"github.com/mandatevm/mandate/kernel"
)

// RootCaps returns each run's root capabilities, by run id, in record
// order: those derived from no capability of the run (the manifest's
// grants), with their id, kind, name, holder and view. It is what a list
// of runs says each run could do (every other capability is narrower than
// a root), read in one query rather than a Get per run. A capability
// whose view does not decode is listed without it.
func (s *Store) RootCaps(ctx context.Context) (map[string][]kernel.GraphCap, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT c.run, c.id, c.kind, c.name, c.holder, c.view FROM caps c
		WHERE c.parent = '' OR NOT EXISTS (SELECT 1 FROM caps p WHERE p.run = c.run AND p.id = c.parent)
		ORDER BY c.run, c.ord`)
	if err != nil {
		return nil, s.errorf("%v", err)
	}
	defer rows.Close()
	out := map[string][]kernel.GraphCap{}
	for rows.Next() {
		var run, view string
		var c kernel.GraphCap
		if err := rows.Scan(&run, &c.ID, &c.Kind, &c.Name, &c.Holder, &view); err != nil {
			return nil, s.errorf("corrupted capability row: %v", err)
		}
		if json.Unmarshal([]byte(view), &c.View) != nil {
			c.View = kernel.CapView{}
		}
		out[run] = append(out[run], c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("%v", err)
	}
	return out, nil
}
