package audit

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mandatevm/mandate/internal/sqlitedb"
)

// OpenReadOnly opens the existing audit log at path, and its existing
// signing key, for reading and verifying only: it creates nothing and
// writes nothing, and works where the state directory cannot be written
// (a snapshot, a read-only mount). A missing log or key is an error
// wrapping fs.ErrNotExist. Appending to it and signing checkpoints fail.
func OpenReadOnly(path string) (*Log, error) {
	if path == "" {
		return nil, fmt.Errorf("audit log: empty path")
	}
	keyPath := filepath.Join(filepath.Dir(path), KeyFile)
	if _, err := os.Lstat(keyPath); err != nil {
		return nil, fmt.Errorf("audit log %s: its key: %w", path, err)
	}
	signer, verif, vkey, err := loadKey(keyPath)
	if err != nil {
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	db, err := sqlitedb.OpenReadOnly(path, config)
	if err != nil {
		return nil, err
	}
	return &Log{db: db, path: path, signer: signer, verif: verif, vkey: vkey}, nil
}
