package guestbuild

import (
	"context"
	"errors"
)

// buildC is Build for a C guest.
func buildC(ctx context.Context, dir string, opt Options, cacheDir string) ([]byte, string, error) {
	return nil, "", errors.New("guestbuild: C guests are not built yet")
}
