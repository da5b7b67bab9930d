// Package exampledir finds a runnable example's own directory, so
// `go run ./examples/NAME` works from the repository root and from the
// example's directory alike:
//
//	dir, err := exampledir.Find("planner.hcl", "examples/tripplanner")
package exampledir

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Find returns the directory holding marker: the calling file's directory
// when the source is available (go run, go test), else "." or rel under
// the working directory.
func Find(marker, rel string) (string, error) {
	if _, file, _, ok := runtime.Caller(1); ok {
		if d := filepath.Dir(file); exists(filepath.Join(d, marker)) {
			return d, nil
		}
	}
	for _, d := range []string{".", filepath.FromSlash(rel)} {
		if exists(filepath.Join(d, marker)) {
			return filepath.Abs(d)
		}
	}
	return "", fmt.Errorf("cannot find %s: run from the repository root", marker)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
