package tools

import (
	"path/filepath"

	"github.com/mandatevm/mandate/internal/guestbuild"
)

// testCache is the cache root the tests share (see internal/cli).
func testCache() string { return filepath.Dir(guestbuild.DefaultCacheDir()) }
