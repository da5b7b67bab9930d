package guestbuild

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSysroot is a sysroot holding a standard library for each of
// targets, as rustup and Debian lay them out.
func fakeSysroot(t *testing.T, targets ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, target := range targets {
		writeFiles(t, filepath.Join(root, "lib", "rustlib", target, "lib"),
			map[string]string{"libstd-0123abcd.rlib": "!<arch>\n", "libcore-0123abcd.rlib": "!<arch>\n"})
	}
	return root
}

// TestPickRustTarget: wasm32-wasip1 where its std is installed, else
// wasm32-wasi; with neither, the error names the one to install.
func TestPickRustTarget(t *testing.T) {
	newList := []string{"wasm32-unknown-unknown", "wasm32-wasip1", "wasm32-wasip2", "x86_64-unknown-linux-gnu"}
	bothList := append([]string{"wasm32-wasi"}, newList...) // Rust 1.78 to 1.83
	oldList := []string{"wasm32-unknown-unknown", "wasm32-wasi", "x86_64-unknown-linux-gnu"}
	for _, tc := range []struct {
		name      string
		installed []string // targets with a std in the sysroot
		known     []string // rustc --print target-list
		want      string   // the target picked, or "" for an error
		err       string   // what the error says
	}{
		{"rustup, wasip1 added", []string{"x86_64-unknown-linux-gnu", "wasm32-wasip1"}, newList, "wasm32-wasip1", ""},
		{"Debian 12", []string{"wasm32-wasi"}, oldList, "wasm32-wasi", ""},
		{"both installed", []string{"wasm32-wasi", "wasm32-wasip1"}, bothList, "wasm32-wasip1", ""},
		{"old name only, both known", []string{"wasm32-wasi"}, bothList, "wasm32-wasi", ""},
		{"rustup, no wasm std", []string{"x86_64-unknown-linux-gnu"}, newList, "", "no wasm32-wasip1 standard library in %s (rustup target add wasm32-wasip1)"},
		{"rustup 1.80, no wasm std", nil, bothList, "", "rustup target add wasm32-wasip1"},
		{"old rustc, no wasm std", []string{"x86_64-unknown-linux-gnu"}, oldList, "", "no wasm32-wasi standard library in %s (apt-get install libstd-rust-dev-wasm32"},
		{"target list unknown", nil, nil, "", "rustup target add wasm32-wasip1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeSysroot(t, tc.installed...)
			// Another target's std, or a folder without one, is not enough.
			if err := os.MkdirAll(filepath.Join(root, "lib", "rustlib", "wasm32-wasip2", "lib"), 0o755); err != nil {
				t.Fatal(err)
			}
			target, dir, err := pickRustTarget(root, tc.known)
			if tc.want != "" {
				wantDir := filepath.Join(root, "lib", "rustlib", tc.want, "lib")
				if err != nil || target != tc.want || dir != wantDir {
					t.Fatalf("pickRustTarget = %q, %q, %v; want %q, %q", target, dir, err, tc.want, wantDir)
				}
				return
			}
			want := strings.Replace(tc.err, "%s", filepath.Join(root, "lib", "rustlib"), 1)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("pickRustTarget = %q, %v; want an error containing %q", target, err, want)
			}
		})
	}
}

// fakeRustcAt is a rustc script whose sysroot is root and whose target
// list is known.
func fakeRustcAt(t *testing.T, root string, known ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rustc")
	script := "#!/bin/sh\ncase \"$2\" in\nsysroot) echo '" + root + "' ;;\ntarget-list) printf '%s\\n' " +
		strings.Join(known, " ") + " ;;\n*) exit 1 ;;\nesac\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFindRustTarget: FindRust asks the compiler for its sysroot and
// reports the target it picked; the flags of the build carry it.
func TestFindRustTarget(t *testing.T) {
	ctx := context.Background()
	for _, target := range RustTargets() {
		root := fakeSysroot(t, target)
		rustc := fakeRustcAt(t, root, target, "x86_64-unknown-linux-gnu")
		t.Setenv("MANDATE_RUSTC", rustc)
		r, err := FindRust(ctx)
		if err != nil || r.Rustc != rustc || r.Target != target || r.Libdir != filepath.Join(root, "lib", "rustlib", target, "lib") {
			t.Errorf("FindRust = %+v, %v; want %s for %s", r, err, rustc, target)
		}
		if f := RustFlags(r.Target); len(f) < 2 || f[0] != "--target" || f[1] != target {
			t.Errorf("RustFlags(%q) = %q", r.Target, f)
		}
	}
	// A rustup rustc without the target: the error says what to add.
	rustc := fakeRustcAt(t, fakeSysroot(t, "x86_64-unknown-linux-gnu"), "wasm32-wasip1", "x86_64-unknown-linux-gnu")
	t.Setenv("MANDATE_RUSTC", rustc)
	_, err := FindRust(ctx)
	if !errors.Is(err, ErrNoRustToolchain) || !strings.Contains(err.Error(), "(rustup target add wasm32-wasip1)") ||
		!strings.Contains(err.Error(), "apt-get install "+RustPackages) {
		t.Errorf("FindRust = %v; want ErrNoRustToolchain naming rustup target add wasm32-wasip1 and the Debian packages", err)
	}
}
