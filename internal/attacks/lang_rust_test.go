package attacks_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mandatevm/mandate/internal/guestbuild"
)

// The raw-pointer rows again with guests written in Rust
// (testdata/attacks/*-rust, through the Rust SDK's raw imports): the
// kernel's bounds checks do not depend on the guest's language, its
// allocator or where its compiler puts things in memory. Each guest
// reports the Go guest's attempts under the same keys, so each row is the
// Go row (its errnos, audit entries and side-effect checks) with the Rust
// guest.
var rustRows = map[string]string{
	"oob-pointers-rust":    "oob-pointers",
	"length-overflow-rust": "length-overflow",
}

func TestAttacksRust(t *testing.T) {
	for guest, row := range rustRows {
		a, ok := attackRow(row)
		if !ok {
			t.Fatalf("no row %q in the attack table", row)
		}
		a.name, a.guest = guest, guest
		t.Run(guest, func(t *testing.T) {
			rustGuest(t, guest)
			runAttack(t, a)
		})
	}
}

// attackRow is the row of the suite's table named name.
func attackRow(name string) (attack, bool) {
	for _, a := range attacks {
		if a.name == name {
			return a, true
		}
	}
	return attack{}, false
}

// rustGuest makes sure the Rust guest is in guests: TestMain builds every
// guest directory, but a build it could not make (no Rust toolchain) is
// made here again, to skip with the reason, or fail under CI=true (CI
// installs the toolchain: .ci/run).
func rustGuest(t *testing.T, name string) {
	t.Helper()
	if _, ok := guests[name]; ok {
		return
	}
	wasm, _, err := guestbuild.Build(context.Background(), filepath.Join(guestsDir, name), guestbuild.Options{})
	if errors.Is(err, guestbuild.ErrNoRustToolchain) && os.Getenv("CI") != "true" {
		t.Skipf("skipping the Rust attack guests: %v", err)
	}
	if err != nil {
		t.Fatalf("building %s: %v", name, err)
	}
	guests[name] = wasm
}
