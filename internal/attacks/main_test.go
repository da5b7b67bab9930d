package attacks_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/internal/guestbuild"
)

// guests holds every guest under testdata/attacks, built in TestMain, by
// directory name.
var guests = map[string][]byte{}

func TestMain(m *testing.M) {
	ents, err := os.ReadDir(guestsDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Build in parallel (a few at a time: each go build is itself
	// parallel); guestbuild caches by content, so reruns are fast.
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
		sem  = make(chan struct{}, 4)
	)
	for _, ent := range ents {
		if !ent.IsDir() {
			continue
		}
		name := ent.Name()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			wasm, _, err := guestbuild.Build(context.Background(), filepath.Join(guestsDir, name), guestbuild.Options{})
			mu.Lock()
			defer mu.Unlock()
			// A C or Rust guest needs its toolchain: without one, its
			// rows skip (lang_c_test.go, lang_rust_test.go say why),
			// except in CI, which installs them.
			if err != nil && os.Getenv("CI") != "true" &&
				(errors.Is(err, guestbuild.ErrNoCToolchain) || errors.Is(err, guestbuild.ErrNoRustToolchain)) {
				return
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("building %s: %w", name, err))
				return
			}
			guests[name] = wasm
		}()
	}
	wg.Wait()
	// Hand-assembled modules (table_test.go).
	guests["table-bomb"] = tableBomb(0, 65536)
	guests["table-bomb-steps"] = tableBomb(0, 1000)
	guests["table-bomb-huge"] = tableBomb(hugeTable, 1)
	if len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
	os.Exit(m.Run())
}
