package fleet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// nodeLock takes the lock of a node's state directory for incarnation inc
// for as long as the process runs, and returns the incarnation that held
// it before ("" if none, or if this system has no file locks). The kernel
// releases a lock when its process ends, however it ends, so holding it
// proves that the previous process is gone: a node restarted on its state
// directory ends its previous process's runs at once, rather than after
// their lease. A second process on the same directory is refused.
func nodeLock(stateDir, inc string) (prev string, unlock func(), err error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", nil, err
	}
	p := filepath.Join(stateDir, "node.lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", nil, err
	}
	locks, err := lockExclusive(f)
	if err != nil {
		f.Close()
		return "", nil, fmt.Errorf("another node process uses the state directory %s (%s is locked): %w", stateDir, p, err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		f.Close()
		return "", nil, err
	}
	if locks {
		prev = strings.TrimSpace(string(b))
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(inc+"\n"), 0)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return "", nil, errors.Join(errors.New("recording this node's incarnation"), err)
		}
	}
	return prev, func() { f.Close() }, nil
}
