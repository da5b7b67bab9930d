package guestbuild

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/mandatevm/mandate/internal/sdkembed"
)

// How a build makes its record (record.go): each language's build
// collects the record's fields as it computes its cache key, which covers
// every one of them but the VCS revision (so a cached module's record is
// the one a build would write); the module is cached with its section;
// the revision is read again at each use of a cached module, and the
// cached file rewritten when it changed (a commit that changed no source
// file).

// sourceFile is the record of one source file: its path relative to dir
// (slash-separated) and the digest of b.
func sourceFile(dir, path string, b []byte) (RecordFile, error) {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return RecordFile{}, fmt.Errorf("guestbuild: %w", err)
	}
	return RecordFile{Path: filepath.ToSlash(rel), Digest: digestOf(b)}, nil
}

// sourceRecord sorts files and returns them with their digest.
func sourceRecord(files []RecordFile) RecordSource {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	files = compactFiles(files)
	return RecordSource{Digest: TreeDigest(files), Files: files}
}

func compactFiles(fs []RecordFile) []RecordFile {
	out := fs[:0]
	for i, f := range fs {
		if i == 0 || f.Path != fs[i-1].Path {
			out = append(out, f)
		}
	}
	return out
}

// sdkVersionRE finds the SDK's version in its abi/abi.go.
var sdkVersionRE = regexp.MustCompile(`(?m)^const SDKVersion = "([^"\n]+)"`)

// sdkRecord is the record of the guest SDK at root: its version (the
// SDKVersion its abi package declares, when version is empty) and the
// TreeDigest of its files, the ones sdkembed.Include keeps (no tests,
// testdata, dot files or build output): for the copy embedded in mandate,
// exactly the archive's files.
func sdkRecord(root, version string) (RecordSDK, error) {
	var files []RecordFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !sdkembed.Include(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "abi/abi.go" && version == "" {
			if m := sdkVersionRE.FindSubmatch(b); m != nil {
				version = string(m[1])
			}
		}
		files = append(files, RecordFile{Path: rel, Digest: digestOf(b)})
		return nil
	})
	if err != nil {
		return RecordSDK{}, fmt.Errorf("guestbuild: the guest SDK in %s: %w", root, err)
	}
	return RecordSDK{Version: version, Digest: TreeDigest(files)}, nil
}

// withRecord returns wasm (as the compiler wrote it) with r's section,
// r's VCS set from dir.
func withRecord(wasm []byte, r Record, dir string) ([]byte, error) {
	r.Version = RecordVersion
	r.Source.VCS = gitRevision(dir)
	if r.Flags == nil {
		r.Flags = []string{}
	}
	if r.Source.Files == nil {
		r.Source.Files = []RecordFile{}
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("guestbuild: the build record of %s: %w", dir, err)
	}
	plain := wasm
	if _, found, err := recordSection(wasm); err != nil {
		return nil, err
	} else if found {
		if plain, err = StripRecord(wasm); err != nil {
			return nil, err
		}
	}
	return appendRecord(plain, r)
}

// currentVCS returns a cached module b (at path) with the VCS revision of
// dir in its record, rewriting path when the revision changed since it was
// written. A module without a readable record is returned as it is.
func currentVCS(path string, b []byte, dir string) []byte {
	r, ok, err := ReadRecord(b)
	if err != nil || !ok {
		return b
	}
	v := gitRevision(dir)
	if vcsString(v) == vcsString(r.Source.VCS) {
		return b
	}
	nb, err := withRecord(b, r, dir)
	if err != nil || bytes.Equal(nb, b) {
		return b
	}
	// Best effort: another build may be replacing the file too; each
	// writes a whole module.
	if tmp, err := os.CreateTemp(filepath.Dir(path), ".build-*.wasm"); err == nil {
		_, werr := tmp.Write(nb)
		if cerr := tmp.Close(); werr == nil && cerr == nil && os.Rename(tmp.Name(), path) == nil {
			return nb
		}
		os.Remove(tmp.Name())
	}
	return nb
}

// dirSource is a Go guest's record of its source when go list could not
// say what the build reads: every regular file under dir but tests,
// hidden files and folders, and testdata, and the toolchain go env
// reports; no SDK.
func dirSource(ctx context.Context, dir, goBin string, bEnv []string) (*goSource, error) {
	env, err := goEnv(ctx, goBin, dir, bEnv)
	if err != nil {
		return nil, err
	}
	src := &goSource{toolchain: map[string]string{"go": env["GOVERSION"]}, goflags: recordedGOFLAGS(env["GOFLAGS"])}
	for _, v := range []string{"GOEXPERIMENT", "GOWASM"} {
		if env[v] != "" {
			src.toolchain[v] = env[v]
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n := d.Name()
		if p != dir && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || (d.IsDir() && n == "testdata")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(n, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := sourceFile(dir, p, b)
		if err == nil {
			src.files = append(src.files, f)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("guestbuild: %w", err)
	}
	return src, nil
}

// firstLineOf is the first line of a tool's version output.
func firstLineOf(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(s)
}
