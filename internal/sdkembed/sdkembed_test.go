package sdkembed

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/sumdb/dirhash"
)

// TestArchiveIsTheTree: the embedded archive is what WriteArchive makes of
// guest-sdk/ now, byte for byte.
func TestArchiveIsTheTree(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteArchive(&buf, "../../guest-sdk"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), archive) {
		want, _ := readArchive(buf.Bytes())
		got, _ := readArchive(archive)
		for n := range want {
			if !bytes.Equal(want[n], got[n]) {
				t.Errorf("guest-sdk/%s differs from the embedded copy", n)
			}
		}
		for n := range got {
			if _, ok := want[n]; !ok {
				t.Errorf("the embedded copy has %s, guest-sdk/ does not", n)
			}
		}
		t.Fatal("the embedded SDK is stale: run go generate ./internal/sdkembed")
	}
	names, _ := Files()
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") || strings.Contains(n, "testdata/") {
			t.Errorf("the archive carries %s", n)
		}
	}
	for _, n := range []string{"go.mod", "ABI.md", "mandate.go", "abi/abi.go"} {
		if _, ok := files[n]; !ok {
			t.Errorf("the archive lacks %s", n)
		}
	}
}

// TestVersionIsRequired: the runtime's go.mod requires the SDK at the
// version the SDK says it is (what mandate new writes into a tool's go.mod).
func TestVersionIsRequired(t *testing.T) {
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax("go.mod", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == Module {
			if r.Mod.Version != Version {
				t.Errorf("go.mod requires %s %s, the SDK is %s", Module, r.Mod.Version, Version)
			}
			return
		}
	}
	t.Errorf("go.mod does not require %s", Module)
}

// TestExtract: the copy unpacks under its digest, read-only, hashing to
// it; a second call reuses it; a changed file or an added one is never
// used: the copy is unpacked afresh and the call says so.
func TestExtract(t *testing.T) {
	root := t.TempDir()
	t.Cleanup(func() { removeAll(root) })
	d, err := Digest()
	if err != nil {
		t.Fatal(err)
	}
	dir, repaired, err := Extract(root)
	if err != nil || repaired {
		t.Fatalf("Extract: %v, repaired %v", err, repaired)
	}
	if h, err := dirhash.HashDir(dir, "", dirhash.Hash1); err != nil || h != d {
		t.Fatalf("extracted %s, want %s (%v)", h, d, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "mandate.go"))
	if err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Errorf("mandate.go: %v %v, want read-only", fi.Mode(), err)
	}
	if !IsCopyName(filepath.Base(dir)) || IsCopyName("guest-sdk") || IsCopyName("rust") {
		t.Errorf("IsCopyName(%q) = false, or true for guest-sdk or rust", filepath.Base(dir))
	}
	if again, repaired, err := Extract(root); err != nil || repaired || again != dir {
		t.Errorf("second Extract: %s %v %v", again, repaired, err)
	}

	for _, damage := range []func(){
		func() {
			p := filepath.Join(dir, "mandate.go")
			os.Chmod(p, 0o644)
			os.WriteFile(p, []byte("package mandate // changed\n"), 0o644)
		},
		func() { os.WriteFile(filepath.Join(dir, "extra.go"), []byte("package mandate\n"), 0o644) },
		func() { os.Chmod(dir, 0o755); os.Remove(filepath.Join(dir, "go.mod")) },
	} {
		damage()
		again, repaired, err := Extract(root)
		if err != nil || !repaired || again != dir {
			t.Fatalf("Extract after damage: %s %v %v", again, repaired, err)
		}
		if h, err := dirhash.HashDir(dir, "", dirhash.Hash1); err != nil || h != d {
			t.Fatalf("after repair: %s, want %s (%v)", h, d, err)
		}
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != 1 {
		t.Errorf("root holds %d entries, want the one copy", len(ents))
	}
}
