//go:build !linux

package host

import "os"

// statFile reports no stamp: elsewhere a module file is hashed on every
// read (digestcache.go).
func statFile(*os.File) (fileStamp, bool) { return fileStamp{}, false }
