package wazero

import (
	"fmt"
	"os"
	"testing"

	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// testCacheDir is the compilation cache the tests' engines share, so each
// guest is compiled once per machine rather than once per test.
var testCacheDir = sandboxtest.CacheDir(Name)

func TestMain(m *testing.M) {
	if err := sandboxtest.BuildGuests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
