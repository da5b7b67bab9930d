//go:build !unix

package fleet

import "os"

// lockExclusive cannot lock here: it reports so, and a restarted node's
// earlier runs are judged by their silence, as another node's are.
func lockExclusive(*os.File) (bool, error) { return false, nil }
