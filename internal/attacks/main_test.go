package attacks_test

import (
	"context"
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
