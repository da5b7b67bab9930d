// Package buildstamp names the build of the running binary, for the
// engines' cache records that only the same build may read (what a record
// holds, such as wasmbin's static counts or a rewritten module, may change
// from one build to the next).
package buildstamp

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"
)

// Get returns the binary's version control revision when it was built
// from a clean tree ("vcs:REV"), else its module version and sum
// ("mod:V@SUM"), else the executable's path, size and time; "" when none
// of them is known.
var Get = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, modified := "", true
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value != "false"
			}
		}
		if rev != "" && !modified {
			return "vcs:" + rev
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" && bi.Main.Sum != "" {
			return "mod:" + v + "@" + bi.Main.Sum
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("exe:%s:%d:%d", exe, fi.Size(), fi.ModTime().UnixNano())
})
