//go:build !linux

package guestbuild

import "io/fs"

// statStamp: no ctime or inode here, so no key records.
func statStamp(fs.FileInfo) (stamp, bool) { return stamp{}, false }
