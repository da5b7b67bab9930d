// Package testfs makes the filesystem conditions tests need that a
// process cannot always make with chmod alone: a directory that cannot be
// written, even by root.
package testfs

import (
	"os"
	"testing"
)

// ReadOnly makes dir and everything under it unwritable by this process
// until the test ends. Without root, it removes the write bits; root
// ignores those, so as root it bind-mounts dir read-only over itself
// (Linux). Where neither works, the test is skipped with the reason.
func ReadOnly(t testing.TB, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		chmodReadOnly(t, dir)
		return
	}
	if err := mountReadOnly(dir); err != nil {
		t.Skipf("cannot make %s read-only as root (a read-only bind mount: %v)", dir, err)
	}
	t.Cleanup(func() {
		if err := unmount(dir); err != nil {
			t.Errorf("unmounting the read-only %s: %v", dir, err)
		}
	})
}

func chmodReadOnly(t testing.TB, dir string) {
	var dirs []string
	err := walk(dir, func(p string, fi os.FileInfo) error {
		if fi.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		return os.Chmod(p, fi.Mode().Perm()&^0o222)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Directories last, deepest first, so the walk could still see them.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i], 0o555); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range dirs {
			os.Chmod(d, 0o755)
		}
		walk(dir, func(p string, fi os.FileInfo) error {
			return os.Chmod(p, fi.Mode().Perm()|0o200)
		})
	})
}

func walk(dir string, fn func(string, os.FileInfo) error) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if err := fn(dir, fi); err != nil {
		return err
	}
	if !fi.IsDir() {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := walk(dir+string(os.PathSeparator)+e.Name(), fn); err != nil {
			return err
		}
	}
	return nil
}
