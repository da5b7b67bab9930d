package wazero

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/internal/guestbuild"
)

// testCacheDir is the compilation cache the tests' engines share, so each
// guest is compiled once per machine rather than once per test.
var testCacheDir string

// guests holds the test guests built in TestMain, by name without the
// "engine-" prefix.
var guests = map[string][]byte{}

var guestNames = []string{
	"hello", "exit", "ambient", "reactor", "spin", "sleep",
	"membomb", "flood", "compute", "badimport",
}

func TestMain(m *testing.M) {
	// Build every guest in parallel; guestbuild caches them by content in
	// the user cache dir (or $MANDATE_CACHE_DIR), so reruns are fast.
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for _, name := range guestNames {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := filepath.Join("..", "..", "testdata", "guests", "engine-"+name)
			wasm, _, err := guestbuild.Build(context.Background(), dir, guestbuild.Options{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			guests[name] = wasm
		}()
	}
	wg.Wait()
	testCacheDir = filepath.Join(filepath.Dir(guestbuild.DefaultCacheDir()), "wazero-test")
	if len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
	os.Exit(m.Run())
}
