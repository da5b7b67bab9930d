package guestbuild

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/sdkembed"
)

const embeddedGuestMain = `package main

import (
	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

var version = "sdk version " + abi.SDKVersion // a string in the module's data

func main() { mandate.SetResult([]byte(version)) }
`

// A tool outside any checkout, requiring the SDK at its version, with the
// go tool unable to fetch it (GOPROXY=off, an empty module cache): Build
// uses the embedded copy, says so, and writes nothing into the tool's
// folder. A changed unpacked copy is never built from. The person's own
// edited copy, through a replace, is built from and rebuilds.
func TestBuildEmbeddedSDK(t *testing.T) {
	offline(t)
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOFLAGS", "-modcacherw")
	guest := t.TempDir()
	gomod := "module example.com/tool\n\ngo 1.26.0\n\nrequire " + SDKModule + " " + sdkembed.Version + "\n"
	writeFiles(t, guest, map[string]string{"go.mod": gomod, "main.go": embeddedGuestMain})
	cache := t.TempDir()
	ctx := context.Background()
	var notes []string
	opt := Options{CacheDir: cache, Note: func(m string) { notes = append(notes, m) }}

	wasm1, path1, err := Build(ctx, guest, opt)
	if err != nil {
		t.Fatal(err)
	}
	if path1 == "" || !bytes.Contains(wasm1, []byte(sdkembed.Version)) {
		t.Fatalf("built %d bytes at %q", len(wasm1), path1)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "building with the copy embedded in mandate") {
		t.Fatalf("notes: %q", notes)
	}
	ents, _ := os.ReadDir(guest)
	if len(ents) != 2 {
		t.Errorf("the tool's folder holds %d entries, want go.mod and main.go", len(ents))
	}
	if b, _ := os.ReadFile(filepath.Join(guest, "go.mod")); string(b) != gomod {
		t.Errorf("go.mod was written:\n%s", b)
	}

	// A change to the unpacked copy: unpacked afresh, the same module.
	sdk, err := SDKDir(guest, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sdk, filepath.Join(cache, "sdk")) {
		t.Fatalf("SDKDir %s, want the copy under the cache", sdk)
	}
	abiGo := filepath.Join(sdk, "abi", "abi.go")
	os.Chmod(abiGo, 0o644)
	edit(t, abiGo, `const SDKVersion = "`+sdkembed.Version+`"`, `const SDKVersion = "tampered"`)
	notes = nil
	wasm2, path2, err := Build(ctx, guest, opt)
	if err != nil {
		t.Fatal(err)
	}
	if path2 != path1 || !bytes.Equal(wasm1, wasm2) {
		t.Errorf("after tampering: %s, want the module at %s", path2, path1)
	}
	if len(notes) == 0 || !strings.Contains(notes[0], "had been changed; it was unpacked afresh") {
		t.Errorf("notes after tampering: %q", notes)
	}

	// The person's own copy, edited, through a replace: built from.
	mine := filepath.Join(t.TempDir(), "sdk")
	copyTree(t, sdk, mine)
	edit(t, filepath.Join(mine, "abi", "abi.go"), `const SDKVersion = "`+sdkembed.Version+`"`, `const SDKVersion = "edited-by-me"`)
	writeFiles(t, guest, map[string]string{"go.mod": gomod + "\nreplace " + SDKModule + " => " + mine + "\n"})
	notes = nil
	wasm3, path3, err := Build(ctx, guest, opt)
	if err != nil {
		t.Fatal(err)
	}
	if path3 == path1 || !bytes.Contains(wasm3, []byte("edited-by-me")) {
		t.Errorf("with the edited copy: %s, module holds the edit: %v", path3, bytes.Contains(wasm3, []byte("edited-by-me")))
	}
	if len(notes) != 0 {
		t.Errorf("notes with the person's own SDK: %q", notes)
	}
}

// edit replaces old with new in the file at p, which must hold old.
func edit(t *testing.T, p, old, new string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s does not hold %q", p, old)
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the files under src to dst, writable.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
