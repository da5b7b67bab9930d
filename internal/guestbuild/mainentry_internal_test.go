package guestbuild

import "testing"

// TestCanAddMainEntry: a command gets the entry unless its package
// exports run itself, has a file of the added file's name, or GOFLAGS has
// a flag the build's own would replace.
func TestCanAddMainEntry(t *testing.T) {
	for _, c := range []struct {
		name    string
		files   map[string]string
		goflags string
		want    bool
	}{
		{"command", map[string]string{"main.go": "package main\n\nfunc main() {}\n"}, "", true},
		{"exports run", map[string]string{"main.go": "package main\n\nfunc main() {}\n\n//go:wasmexport run\nfunc r() {}\n"}, "", false},
		{"exports another", map[string]string{"main.go": "package main\n\nfunc main() {}\n\n//go:wasmexport runner\nfunc r() {}\n"}, "", true},
		{"has the file", map[string]string{"main.go": "package main\n\nfunc main() {}\n", MainEntryFile: "package main\n"}, "", false},
		{"test file exports run", map[string]string{"main.go": "package main\n\nfunc main() {}\n", "x_test.go": "package main\n\n//go:wasmexport run\nfunc r() {}\n"}, "", true},
		{"GOFLAGS -ldflags", map[string]string{"main.go": "package main\n\nfunc main() {}\n"}, "-ldflags=-s", false},
		{"GOFLAGS -overlay", map[string]string{"main.go": "package main\n\nfunc main() {}\n"}, "-overlay=/x.json", false},
		{"GOFLAGS other", map[string]string{"main.go": "package main\n\nfunc main() {}\n"}, "-trimpath", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOFLAGS", c.goflags)
			dir := t.TempDir()
			writeFiles(t, dir, c.files)
			got, err := canAddMainEntry(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("canAddMainEntry = %v, want %v", got, c.want)
			}
		})
	}
}
