package guestbuild

import (
	"context"
	"errors"
)

// buildRust is Build for a Rust guest.
func buildRust(ctx context.Context, dir string, opt Options, cacheDir string) ([]byte, string, error) {
	return nil, "", errors.New("guestbuild: Rust guests are not built yet")
}
