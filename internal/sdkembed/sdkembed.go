// Package sdkembed is the guest SDK (the github.com/mandatevm/mandate/guest-sdk
// module: Go packages, the C header and the Rust crate) as the mandate
// binary carries it, so a tool outside this repository builds where the
// SDK cannot be fetched.
//
// The SDK is its own module, which go:embed cannot reach, so the copy is
// an archive, sdk.zip, written by
//
//	go generate ./internal/sdkembed
//
// from guest-sdk/ (every file but tests, testdata and build output); a test
// fails when the archive and the tree differ. Extract unpacks it into a
// directory named by its digest, and checks an existing one before use: a
// changed or added file is not built from, the copy is unpacked afresh.
package sdkembed

import (
	"archive/zip"
	"bytes"
	_ "embed" // sdk.zip
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"golang.org/x/mod/sumdb/dirhash"
)

//go:generate go run ./gen

//go:embed sdk.zip
var archive []byte

// Module is the SDK's module path.
const Module = "github.com/mandatevm/mandate/guest-sdk"

// Version is the SDK's version.
const Version = abi.SDKVersion

var (
	loadOnce sync.Once
	files    map[string][]byte
	digest   string
	loadErr  error
)

// load reads the archive once.
func load() error {
	loadOnce.Do(func() {
		files, loadErr = readArchive(archive)
		if loadErr == nil {
			digest, loadErr = hashFiles(files)
		}
	})
	return loadErr
}

// readArchive returns the files of an archive WriteArchive wrote.
func readArchive(b []byte) (map[string][]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("sdkembed: the embedded SDK: %w", err)
	}
	out := map[string][]byte{}
	for _, f := range zr.File {
		if !fs.ValidPath(f.Name) || f.FileInfo().IsDir() {
			return nil, fmt.Errorf("sdkembed: the embedded SDK holds %q", f.Name)
		}
		r, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("sdkembed: the embedded SDK: %w", err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("sdkembed: the embedded SDK: %s: %w", f.Name, err)
		}
		out[f.Name] = data
	}
	return out, nil
}

// hashFiles is the Go checksum database's "h1:" hash of files.
func hashFiles(files map[string][]byte) (string, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	return dirhash.Hash1(names, func(n string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files[n])), nil
	})
}

// Digest is the embedded SDK's content hash, in go.sum's "h1:" form (the
// SHA-256 of the sorted list of its files' SHA-256 sums).
func Digest() (string, error) {
	if err := load(); err != nil {
		return "", err
	}
	return digest, nil
}

// Files returns the embedded SDK's file names, sorted.
func Files() ([]string, error) {
	if err := load(); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// dirName is the directory an SDK of digest d is unpacked into.
func dirName(d string) string {
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(d, "h1:"))
	return "guest-sdk-" + hex.EncodeToString(raw)[:24]
}

// IsCopyName tells whether name is one Extract gives the folder of a copy
// (of this SDK or of another mandate's).
func IsCopyName(name string) bool { return copyName.MatchString(name) }

var copyName = regexp.MustCompile(`^guest-sdk-[0-9a-f]{24}$`)

// Extract unpacks the embedded SDK under root (created 0700 when missing)
// and returns its directory, named by the SDK's digest, and whether a copy
// that was there had been changed (it is then replaced, never used). Files
// are written read-only.
func Extract(root string) (dir string, repaired bool, err error) {
	if err := load(); err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", false, fmt.Errorf("sdkembed: %w", err)
	}
	dir = filepath.Join(root, dirName(digest))
	if _, err := os.Stat(dir); err == nil {
		if h, err := dirhash.HashDir(dir, "", dirhash.Hash1); err == nil && h == digest {
			return dir, false, nil
		}
		repaired = true
	}
	tmp, err := os.MkdirTemp(root, ".extract-*")
	if err != nil {
		return "", false, fmt.Errorf("sdkembed: %w", err)
	}
	defer removeAll(tmp)
	for name, data := range files {
		p := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", false, fmt.Errorf("sdkembed: %w", err)
		}
		if err := os.WriteFile(p, data, 0o444); err != nil {
			return "", false, fmt.Errorf("sdkembed: %w", err)
		}
	}
	if repaired {
		old, err := os.MkdirTemp(root, ".damaged-*")
		if err != nil {
			return "", false, fmt.Errorf("sdkembed: %w", err)
		}
		if err := os.Rename(dir, filepath.Join(old, "sdk")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", false, fmt.Errorf("sdkembed: moving the changed copy aside: %w", err)
		}
		defer removeAll(old)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process unpacked it first: use theirs if it checks.
		if h, herr := dirhash.HashDir(dir, "", dirhash.Hash1); herr == nil && h == digest {
			return dir, repaired, nil
		}
		return "", false, fmt.Errorf("sdkembed: %w", err)
	}
	return dir, repaired, nil
}

// removeAll removes a tree whose files and folders may be read-only.
func removeAll(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	os.RemoveAll(dir)
}

// Include reports whether the archive carries the file at rel (a
// slash-separated path in guest-sdk/): not tests, testdata, dot files, or a
// Rust build's target folder.
func Include(rel string, isDir bool) bool {
	base := path.Base(rel)
	switch {
	case strings.HasPrefix(base, "."):
		return false
	case isDir:
		return base != "testdata" && base != "target"
	case strings.HasSuffix(base, "_test.go"), base == "Cargo.lock":
		return false
	}
	return true
}

// WriteArchive writes the archive of the SDK tree at dir: the files
// Include keeps, sorted, stored with no times or modes, so the same tree
// gives the same bytes.
func WriteArchive(w io.Writer, dir string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !Include(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			names = append(names, rel)
		} else if !d.IsDir() {
			return fmt.Errorf("sdkembed: %s is not a regular file", rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	zw := zip.NewWriter(w)
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(n)))
		if err != nil {
			return err
		}
		f, err := zw.CreateHeader(&zip.FileHeader{Name: n, Method: zip.Deflate})
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
	}
	return zw.Close()
}
