package guestbuild

import (
	"fmt"
	"os"
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
