package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxLegacySize bounds a legacy JSON record read back.
const maxLegacySize = 256 << 20

// importLegacy imports the JSON run records earlier versions of Mandate
// wrote (STATE/runs/ID.json, the same JSON as a Record). Each imported file
// is renamed ID.json.imported; a file that cannot be read or parsed stays
// as it is and is reported in ImportErrors, so nothing is lost.
func (s *Store) importLegacy(ctx context.Context) {
	dir := filepath.Join(s.dir, "runs")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return // no legacy records (or none readable: nothing to import)
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := s.importFile(ctx, path, id); err != nil {
			s.ImportErrors = append(s.ImportErrors, fmt.Errorf("legacy run record %s not imported: %w", path, err))
			continue
		}
		if err := os.Rename(path, path+".imported"); err != nil {
			s.ImportErrors = append(s.ImportErrors, err)
		}
		s.Imported = append(s.Imported, id)
	}
}

func (s *Store) importFile(ctx context.Context, path, id string) error {
	if !ValidRunID(id) {
		return fmt.Errorf("%q is not a run id", id)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLegacySize+1))
	if err != nil {
		return err
	}
	if len(b) > maxLegacySize {
		return fmt.Errorf("larger than %d bytes", maxLegacySize)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return err
	}
	switch {
	case rec.Version != RecordVersion:
		return fmt.Errorf("unknown record version %d", rec.Version)
	case rec.Run.ID != id:
		return fmt.Errorf("it records run %q", truncate(rec.Run.ID, 64))
	case rec.Tasks == nil || rec.Caps == nil:
		return errors.New("missing tasks or caps")
	}
	var exists int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM runs WHERE id = ?", id).Scan(&exists); err != nil {
		return err
	}
	if exists > 0 {
		return nil // imported before the rename failed, or by a concurrent Open
	}
	return s.Finish(ctx, rec)
}
