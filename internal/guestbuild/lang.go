package guestbuild

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A guest's language, as Lang tells it from the files in its directory.
const (
	LangGo   = "go"
	LangC    = "c"
	LangRust = "rust"
)

// Lang tells a guest directory's language: Rust when it has a Cargo.toml,
// Go when it has a non-test .go file, C when it has a .c file and neither.
func Lang(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("guestbuild: %w", err)
	}
	var goFiles, cFiles bool
	for _, e := range ents {
		n := e.Name()
		switch {
		case e.IsDir():
		case n == "Cargo.toml":
			return LangRust, nil
		case strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go"):
			goFiles = true
		case strings.HasSuffix(n, ".c"):
			cFiles = true
		}
	}
	switch {
	case goFiles:
		return LangGo, nil
	case cFiles:
		return LangC, nil
	}
	return LangGo, nil // the go tool says what is missing
}

// SDKDir is the guest SDK a C or Rust guest in dir builds against: the
// guest-sdk directory of the Mandate checkout dir is in, if any (so the
// repository's own guests build against its tree), else the copy embedded
// in this binary, extracted into the cache.
func SDKDir(dir string, opt Options) (string, error) {
	for d := dir; ; {
		sdk := filepath.Join(d, "guest-sdk")
		if b, err := os.ReadFile(filepath.Join(sdk, "go.mod")); err == nil &&
			strings.HasPrefix(string(b), "module "+SDKModule+"\n") {
			return sdk, nil
		}
		up := filepath.Dir(d)
		if up == d {
			break
		}
		d = up
	}
	return "", fmt.Errorf("guestbuild: no guest SDK found for %s (the embedded copy is not wired in yet)", dir)
}

// SDKModule is the guest SDK's module path.
const SDKModule = MandateModule + "/guest-sdk"
