package wazero

import (
	"testing"

	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// testCacheDir is the compilation cache the tests' engines share, so each
// guest is compiled once per machine rather than once per test.
var testCacheDir = sandboxtest.CacheDir(Name)

func TestMain(m *testing.M) { sandboxtest.Main(m) }
