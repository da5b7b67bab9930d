package guestbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/sdkembed"
)

// asUser gives the test a fresh "user": HOME, XDG_CACHE_HOME and a module
// cache of its own under root (and, with freshGoCache, an empty GOCACHE;
// else the go tool's present one), offline, and returns a cache directory
// of its own.
func asUser(t *testing.T, root string, freshGoCache bool) string {
	t.Helper()
	if !freshGoCache {
		out, err := exec.Command(GoBin(), "env", "GOCACHE").Output()
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("GOCACHE", strings.TrimSpace(string(out)))
	}
	for _, d := range []string{"home", "xdg", "modcache"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", filepath.Join(root, "home"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(root, "xdg"))
	t.Setenv("GOMODCACHE", filepath.Join(root, "modcache"))
	t.Setenv("GOFLAGS", "-modcacherw")
	if freshGoCache {
		t.Setenv("GOCACHE", filepath.Join(root, "gocache"))
	}
	return filepath.Join(root, "mandate-cache")
}

// sha is "sha256:<hex>" of s, computed here (not by the code under test).
func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

// sdkTreeDigest computes the digest of this repository's guest-sdk as
// the record documents it: sha256 of the lines "<hex>  <path>\n" of its
// files (those the embedded archive carries), sorted by path.
func sdkTreeDigest(t *testing.T) string {
	t.Helper()
	names, err := sdkembed.Files()
	if err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("..", "..", "guest-sdk", filepath.FromSlash(n)))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&lines, "%s  %s\n", strings.TrimPrefix(sha(string(b)), "sha256:"), n)
	}
	return sha(lines.String())
}

// goEnvVersion is what `go env GOVERSION` says here.
func goEnvVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(GoBin(), "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

const toolGoMod = "module example.com/tool\n\ngo 1.26.0\n\nrequire " + SDKModule + " " + sdkembed.Version + "\n"

// TestReproducibleGo: the same Go tool (using the SDK, which the go tool
// cannot fetch, so each build unpacks the embedded copy into its own cache)
// built in two folders by two "users" (HOME, module cache, mandate cache
// and, once unless -short, an empty GOCACHE) is the same module, byte for
// byte, as a command and as a main entry; its record says how it was
// built.
func TestReproducibleGo(t *testing.T) {
	for _, mainEntry := range []bool{false, true} {
		t.Run(fmt.Sprintf("mainEntry=%t", mainEntry), func(t *testing.T) {
			offline(t)
			ctx := context.Background()
			files := map[string]string{"go.mod": toolGoMod, "main.go": embeddedGuestMain}
			var mods [][]byte
			for i, sub := range []string{"tool", filepath.Join("some", "deeper", "other-name")} {
				root := t.TempDir()
				// A second user with an empty GOCACHE compiles the
				// standard library again (half a minute): once.
				cache := asUser(t, root, i == 1 && !mainEntry && !testing.Short())
				if i == 1 {
					t.Setenv("GOFLAGS", "-modcacherw -p=1") // no change to the module
				}
				dir := filepath.Join(root, sub)
				writeFiles(t, dir, files)
				wasm, path, err := Build(ctx, dir, Options{CacheDir: cache, MainEntry: mainEntry})
				if err != nil {
					t.Fatal(err)
				}
				if path == "" {
					t.Fatal("not cached")
				}
				mods = append(mods, wasm)
			}
			if !bytes.Equal(mods[0], mods[1]) {
				t.Fatalf("two builds of the same source differ: %s, %s", sha(string(mods[0])), sha(string(mods[1])))
			}
			if bytes.Contains(mods[0], []byte("Go build ID")) {
				t.Errorf("the module has a Go build ID")
			}
			r, ok, err := ReadRecord(mods[0])
			if err != nil || !ok {
				t.Fatalf("ReadRecord: %v, %v", ok, err)
			}
			wantMode := ModeCommand
			if mainEntry {
				wantMode = ModeMainEntry
			}
			if r.Lang != LangGo || r.Mode != wantMode || r.Version != RecordVersion {
				t.Errorf("lang %q mode %q version %d, want go %s 1", r.Lang, r.Mode, r.Version, wantMode)
			}
			if got, want := r.Toolchain["go"], goEnvVersion(t); got != want {
				t.Errorf("toolchain go = %q, want %q", got, want)
			}
			if got, want := r.SDK, (RecordSDK{Version: sdkembed.Version, Digest: sdkTreeDigest(t)}); got != want {
				t.Errorf("sdk = %+v, want %+v", got, want)
			}
			wantFiles := []RecordFile{{"go.mod", sha(toolGoMod)}, {"main.go", sha(embeddedGuestMain)}}
			if !slices.Equal(r.Source.Files, wantFiles) || r.Source.Digest != TreeDigest(wantFiles) || r.Source.VCS != nil {
				t.Errorf("source = %+v, want %+v", r.Source, wantFiles)
			}
			if !slices.Contains(r.Flags, "-trimpath") || !slices.Contains(r.Flags, "-buildvcs=false") {
				t.Errorf("flags = %q", r.Flags)
			}
			for _, f := range r.Flags {
				if strings.Contains(f, string(filepath.Separator)+"tmp") || strings.Contains(f, os.TempDir()) {
					t.Errorf("flag %q names a folder of this machine", f)
				}
			}
		})
	}
}

// TestReproducibleRust: the same Rust guest in two checkouts (each with
// its own guest-sdk) built by two users is the same module.
func TestReproducibleRust(t *testing.T) {
	needRust(t)
	ctx := context.Background()
	var mods [][]byte
	var paths, guests []string
	for i := range 2 {
		guest, _ := rustGuest(t, rustMain)
		guests = append(guests, guest)
		if i == 1 {
			// An editor's swap file is not source.
			writeFiles(t, guest, map[string]string{"src/.main.rs.swp": "x"})
		}
		cache := asUser(t, t.TempDir(), false)
		wasm, path, err := Build(ctx, guest, Options{CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		mods, paths = append(mods, wasm), append(paths, path)
	}
	if !bytes.Equal(mods[0], mods[1]) {
		t.Fatalf("two builds of the same source differ")
	}
	if filepath.Base(paths[0]) != filepath.Base(paths[1]) {
		t.Errorf("keys differ across checkouts: %s, %s", paths[0], paths[1])
	}
	r, ok, err := ReadRecord(mods[0])
	if err != nil || !ok {
		t.Fatalf("ReadRecord: %v, %v", ok, err)
	}
	tc, err := FindRust(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tc.Rustc, "-V").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Toolchain["rustc"], strings.TrimSpace(string(out)); r.Lang != LangRust || r.Mode != ModeCommand || got != want {
		t.Errorf("lang %q mode %q rustc %q, want rust command %q", r.Lang, r.Mode, got, want)
	}
	var paths2 []string
	for _, f := range r.Source.Files {
		paths2 = append(paths2, f.Path)
	}
	if want := []string{"Cargo.toml", "src/main.rs"}; !slices.Equal(paths2, want) || r.Source.Files[1].Digest != sha(rustMain) {
		t.Errorf("source files %q (%+v), want %q", paths2, r.Source.Files, want)
	}
	if !strings.HasPrefix(r.SDK.Digest, "sha256:") { // rustGuest's SDK has no abi package: no version
		t.Errorf("sdk = %+v", r.SDK)
	}
	checkRebuild(t, guests[1], r, mods[0])
}

// cWhere is a C guest whose result is the __FILE__ of a header in the
// SDK's folder (which differs from checkout to checkout).
const cWhere = `#include "mandate.h"
#include "where.h"
int main(void) {
	const char *w = where();
	int n = 0;
	while (w[n]) n++;
	return mandate_set_result(w, n) == MANDATE_ESUCCESS ? 0 : 1;
}
`

// TestReproducibleC: the same C guest in two checkouts built by two users
// is the same module, even when the SDK's header names its own file, and
// its record names its files.
func TestReproducibleC(t *testing.T) {
	needC(t)
	ctx := context.Background()
	var mods [][]byte
	var dirs []string
	for range 2 {
		dir, sdk := cTree(t, map[string]string{"main.c": cWhere, "util.h": "#define X 1\n"})
		dirs = append(dirs, dir)
		writeFiles(t, sdk, map[string]string{"c/where.h": "static const char *where(void) { return __FILE__; }\n"})
		cache := asUser(t, t.TempDir(), false)
		wasm, _, err := Build(ctx, dir, Options{CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		mods = append(mods, wasm)
	}
	if !bytes.Equal(mods[0], mods[1]) {
		t.Fatalf("two builds of the same source differ")
	}
	r, ok, err := ReadRecord(mods[0])
	if err != nil || !ok {
		t.Fatalf("ReadRecord: %v, %v", ok, err)
	}
	if !bytes.Contains(mods[0], []byte("mandate-sdk/c/where.h")) {
		t.Errorf("the SDK header's __FILE__ is not remapped to mandate-sdk/c")
	}
	want := []RecordFile{{"main.c", sha(cWhere)}, {"util.h", sha("#define X 1\n")}}
	if r.Lang != LangC || r.Mode != ModeCommand || !slices.Equal(r.Source.Files, want) {
		t.Errorf("record %+v, want c command with %+v", r, want)
	}
	if !strings.Contains(r.Toolchain["clang"], "clang version") || !strings.HasPrefix(r.Toolchain["wasi-libc"], "sha256:") {
		t.Errorf("toolchain %q", r.Toolchain)
	}
	checkRebuild(t, dirs[0], r, mods[0])
}

// checkRebuild does what verify --source does: dir rebuilt as r says, in
// a fresh cache, is want, byte for byte, and its record agrees.
func checkRebuild(t *testing.T, dir string, r Record, want []byte) {
	t.Helper()
	again, got, err := Rebuild(context.Background(), dir, r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Diff(got); len(d) != 0 || !bytes.Equal(again, want) {
		t.Fatalf("Rebuild: diff %q, same bytes %t", d, bytes.Equal(again, want))
	}
}

// TestRebuildDiff: a rebuild of an unchanged folder agrees with the
// module's record and gives the same bytes; a one-byte change to one file
// is named, alone, by Diff; so is a toolchain version that differs.
func TestRebuildDiff(t *testing.T) {
	ctx := context.Background()
	dir := guestDir(t)
	writeFiles(t, dir, map[string]string{"util.go": "package main\n\nconst n = 1\n"})
	writeGuest(t, dir, "package main\n\nfunc main() { println(n) }\n")
	wasm, _, err := Build(ctx, dir, Options{CacheDir: t.TempDir(), MainEntry: true})
	if err != nil {
		t.Fatal(err)
	}
	r, ok, err := ReadRecord(wasm)
	if err != nil || !ok {
		t.Fatalf("ReadRecord: %v, %v", ok, err)
	}
	again, got, err := Rebuild(ctx, dir, r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Diff(got); len(d) != 0 || !bytes.Equal(again, wasm) {
		t.Fatalf("a rebuild of the same folder: diff %q, same bytes %t", d, bytes.Equal(again, wasm))
	}

	writeFiles(t, dir, map[string]string{"util.go": "package main\n\nconst n = 2\n"})
	_, got, err = Rebuild(ctx, dir, r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := r.Diff(got)
	if len(d) != 1 || !strings.HasPrefix(d[0], "util.go: changed") {
		t.Errorf("after a one-byte change to util.go, Diff = %q, want one line for util.go", d)
	}

	old := r
	old.Toolchain = map[string]string{"go": "go1.0"}
	want := "go: go1.0 in the module, " + got.Toolchain["go"] + " here"
	if d := old.Diff(r); !slices.Equal(d, []string{want}) {
		t.Errorf("Diff of another toolchain = %q, want %q", d, want)
	}
}

// TestRebuildIgnoresRecordedFlags: Rebuild refuses a language or mode it
// does not know, and builds with its own flags whatever the record says
// (a -toolexec there does not run).
func TestRebuildIgnoresRecordedFlags(t *testing.T) {
	ctx := context.Background()
	dir := guestDir(t)
	writeGuest(t, dir, "package main\n\nfunc main() { println(7) }\n")
	cache := t.TempDir()
	wasm, _, err := Build(ctx, dir, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := ReadRecord(wasm)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	hostile := r
	hostile.Flags = []string{"-toolexec=/bin/sh -c 'touch " + marker + "; exit 1'", "-toolexec=/bin/false"}
	again, got, err := Rebuild(ctx, dir, hostile, Options{})
	if err != nil {
		t.Fatalf("Rebuild with recorded -toolexec flags: %v", err)
	}
	if !bytes.Equal(again, wasm) {
		t.Errorf("the rebuild differs from the build")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the recorded -toolexec ran")
	}
	if d := hostile.Diff(got); len(d) != 1 || !strings.HasPrefix(d[0], "flags: ") {
		t.Errorf("Diff = %q, want the flags named", d)
	}
	for _, tc := range []struct{ lang, mode string }{
		{"cobol", ModeCommand}, {LangGo, "daemon"}, {LangRust, ModeReactor}, {"", ""}, {LangC, ModeCommand},
	} {
		bad := r
		bad.Lang, bad.Mode = tc.lang, tc.mode
		if _, _, err := Rebuild(ctx, dir, bad, Options{}); err == nil {
			t.Errorf("Rebuild of a %q %q record in a Go folder: no error", tc.lang, tc.mode)
		}
	}
}

// TestRecordVCS: in a git checkout the record holds HEAD's commit (a
// branch's loose ref, then packed-refs; a detached HEAD); a commit that
// changes no source file changes the cached module's record without a
// go command.
func TestRecordVCS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("key records are kept on Linux")
	}
	offline(t)
	now = func() time.Time { return time.Now().Add(time.Hour) }
	t.Cleanup(func() { now = time.Now })
	goBin, runs := countingGo(t)
	root := t.TempDir()
	rev1, rev2, rev3 := strings.Repeat("a1", 20), strings.Repeat("b2", 20), strings.Repeat("c3", 20)
	writeFiles(t, root, map[string]string{
		".git/HEAD":            "ref: refs/heads/main\n",
		".git/packed-refs":     "# pack-refs with: peeled fully-peeled sorted\n" + rev1 + " refs/heads/main\n",
		"guests/g/go.mod":      "module example.com/g\n\ngo 1.24\n",
		"guests/g/main.go":     "package main\n\nfunc main() { println(5) }\n",
		"guests/g/README.md":   "not built\n",
		"guests/g/.hidden.go":  "package main\n",
		"guests/g/x_test.go":   "package main\n",
		"guests/g/sub/note.md": "not built\n",
	})
	dir := filepath.Join(root, "guests", "g")
	cache := t.TempDir()
	opt := Options{CacheDir: cache, GoBin: goBin}
	rev := func() string {
		t.Helper()
		wasm, path, err := Build(context.Background(), dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, wasm) {
			t.Errorf("the cached file is not the module returned")
		}
		r, ok, err := ReadRecord(wasm)
		if err != nil || !ok {
			t.Fatalf("ReadRecord: %v %v", ok, err)
		}
		var names []string
		for _, f := range r.Source.Files {
			names = append(names, f.Path)
		}
		if want := []string{"go.mod", "main.go"}; !slices.Equal(names, want) {
			t.Errorf("source files %q, want %q", names, want)
		}
		if r.Source.VCS == nil {
			return ""
		}
		return r.Source.VCS.System + " " + r.Source.VCS.Revision
	}
	if got := rev(); got != "git "+rev1 {
		t.Fatalf("revision %q, want git %s (packed-refs)", got, rev1)
	}
	warm := runs()
	writeFiles(t, root, map[string]string{".git/refs/heads/main": rev2 + "\n"})
	if got := rev(); got != "git "+rev2 {
		t.Errorf("revision %q, want git %s (loose ref)", got, rev2)
	}
	writeFiles(t, root, map[string]string{".git/HEAD": rev3 + "\n"})
	if got := rev(); got != "git "+rev3 {
		t.Errorf("revision %q, want git %s (detached)", got, rev3)
	}
	if n := runs() - warm; n != 0 {
		t.Errorf("%d go commands ran for a new revision of an unchanged guest, want 0", n)
	}
	os.RemoveAll(filepath.Join(root, ".git"))
	if got := rev(); got != "" {
		t.Errorf("revision %q outside a checkout, want none", got)
	}
}

// TestReadRecordHostile: what ReadRecord says of modules anyone may hand
// over.
func TestReadRecordHostile(t *testing.T) {
	good, err := appendRecord(minimalModule, testRecord())
	if err != nil {
		t.Fatal(err)
	}
	section := func(name, body string) []byte {
		b := append([]byte{0}, uvarint(len(name)+len(body)+len(uvarint(len(name))))...)
		b = append(b, uvarint(len(name))...)
		return append(append(b, name...), body...)
	}
	mod := func(secs ...[]byte) []byte {
		b := append([]byte(nil), minimalModule...)
		for _, s := range secs {
			b = append(b, s...)
		}
		return b
	}
	js, _ := json.Marshal(testRecord())
	body := string(js)
	rec := func(edit func(r *Record)) []byte {
		r := testRecord()
		edit(&r)
		b, _ := appendRecord(minimalModule, r)
		return b
	}
	for _, tc := range []struct {
		name string
		wasm []byte
		want string // in the error; "" for none
		ok   bool
	}{
		{"good", good, "", true},
		{"none", minimalModule, "", false},
		{"other custom section", mod(section("name", "x")), "", false},
		{"empty", nil, "not a WebAssembly module", false},
		{"truncated", good[:len(good)-5], "past the end", false},
		{"truncated header", good[:len(minimalModule)+2], "bad size", false},
		{"bad json", mod(section(SectionName, "{not json")), "invalid character", false},
		{"two sections", mod(section(SectionName, body), section(SectionName, body)), "two mandate.build sections", false},
		{"huge length", mod([]byte{0, 0xff, 0xff, 0xff, 0xff, 0x0f}), "past the end", false},
		{"long varint", mod([]byte{0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}), "bad size", false},
		{"bad name length", mod([]byte{0, 2, 0x7f, 'm'}), "bad name", false},
		{"trailing data", mod(section(SectionName, body+"{}")), "data after the record", false},
		{"unknown field", mod(section(SectionName, `{"version":1,"extra":1}`)), "unknown field", false},
		{"unknown version", rec(func(r *Record) { r.Version = 2 }), "version 2", false},
		{"unknown lang", rec(func(r *Record) { r.Lang = "cobol" }), "unknown language", false},
		{"absolute path", rec(func(r *Record) { r.Source.Files[0].Path = "/etc/passwd" }), "not a clean relative path", false},
		{"control characters", rec(func(r *Record) { r.Source.Files[1].Path = "main.go\x1b[2J" }), "not a clean", false},
		{"bad digest", rec(func(r *Record) { r.Source.Files[0].Digest = "md5:00" }), "digest", false},
		{"unsorted", rec(func(r *Record) { r.Source.Files[0], r.Source.Files[1] = r.Source.Files[1], r.Source.Files[0] }), "not sorted", false},
		{"control in flags", rec(func(r *Record) { r.Flags = []string{"a\nb"} }), "not printable", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok, err := ReadRecord(tc.wasm)
			if ok != tc.ok || (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("ReadRecord = %v, %v; want %v, an error with %q", ok, err, tc.ok, tc.want)
			}
		})
	}
}

func uvarint(n int) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// FuzzReadRecord: ReadRecord never panics; a record it accepts is
// written again to the same section, and StripRecord of a module with one
// leaves none. Run it with -fuzzminimizetime 50x: minimizing an input
// otherwise stalls the run for its whole minute.
func FuzzReadRecord(f *testing.F) {
	good, _ := appendRecord(minimalModule, testRecord())
	f.Add(good)
	f.Add(minimalModule)
	f.Add(good[:len(good)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		r, ok, err := ReadRecord(b)
		if err != nil || !ok {
			return
		}
		plain, err := StripRecord(b)
		if err != nil {
			t.Fatalf("StripRecord of a module ReadRecord read: %v", err)
		}
		if _, ok, err := ReadRecord(plain); ok || err != nil {
			t.Fatalf("after StripRecord: %v, %v", ok, err)
		}
		again, err := appendRecord(plain, r)
		if err != nil {
			t.Fatal(err)
		}
		r2, ok, err := ReadRecord(again)
		if err != nil || !ok || len(r.Diff(r2)) != 0 {
			t.Fatalf("round trip: %v %v %q", ok, err, r.Diff(r2))
		}
	})
}

// TestSourceDirSkips: the fallback source of a Go guest (dirSource) is a
// folder's files but tests, hidden files and testdata.
func TestSourceDirSkips(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod": "module x\n", "main.go": "package main\n", "a/b.go": "package a\n",
		"x_test.go": "", ".git/HEAD": "", "testdata/t.txt": "", ".env": "",
	})
	src, err := dirSource(context.Background(), dir, GoBin(), buildEnv())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range src.files {
		got = append(got, f.Path)
	}
	sort.Strings(got)
	if want := []string{"a/b.go", "go.mod", "main.go"}; !slices.Equal(got, want) {
		t.Errorf("files %q, want %q", got, want)
	}
}

// benchGuest builds a Go guest inside this checkout (so its record has a
// git revision and the SDK of the checkout) and returns its folder, the
// options that find it cached, and the module.
func benchGuest(b *testing.B) (string, Options, []byte) {
	b.Helper()
	now = func() time.Time { return time.Now().Add(time.Hour) }
	b.Cleanup(func() { now = time.Now })
	dir := filepath.Join("..", "..", "testdata", "guests", "engine-hello")
	opt := Options{CacheDir: b.TempDir(), MainEntry: true}
	wasm, path, err := Build(context.Background(), dir, opt)
	if err != nil || path == "" {
		b.Fatalf("%q %v", path, err)
	}
	return dir, opt, wasm
}

// BenchmarkBuildWarm is a cached build of an unchanged Go guest: its key
// from the record of stamps (no go command), the module read, and its
// record's git revision checked (BenchmarkRecordWarm).
func BenchmarkBuildWarm(b *testing.B) {
	dir, opt, _ := benchGuest(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Build(context.Background(), dir, opt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordWarm is what the record adds to a cached build: reading
// the section and the checkout's revision (currentVCS).
func BenchmarkRecordWarm(b *testing.B) {
	dir, _, wasm := benchGuest(b)
	abs, _ := filepath.Abs(dir)
	b.ReportAllocs()
	for b.Loop() {
		currentVCS("", wasm, abs)
	}
}

// BenchmarkRecordCold is what the record adds to a build that compiles: the
// digest of the SDK's tree and the section appended to the module (the
// source files' digests are taken from the bytes the key reads anyway).
func BenchmarkRecordCold(b *testing.B) {
	dir, _, wasm := benchGuest(b)
	abs, _ := filepath.Abs(dir)
	r, _, err := ReadRecord(wasm)
	if err != nil {
		b.Fatal(err)
	}
	sdk := filepath.Join("..", "..", "guest-sdk")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sdkRecord(sdk, ""); err != nil {
			b.Fatal(err)
		}
		if _, err := withRecord(wasm, r, abs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildCold is a build that compiles (the go tool's own cache
// warm): go env, go list, go build and the record, into an empty cache.
func BenchmarkBuildCold(b *testing.B) {
	dir := filepath.Join("..", "..", "testdata", "guests", "engine-hello")
	for b.Loop() {
		if _, _, err := Build(context.Background(), dir, Options{CacheDir: b.TempDir(), MainEntry: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRecordedGOFLAGS(t *testing.T) {
	for _, tc := range [][2]string{
		{"", ""},
		{"-modcacherw -mod=mod -p=4 -x", ""},
		{"-modcacherw -tags=netgo -gcflags=-N", "-tags=netgo -gcflags=-N"},
		{"--ldflags=-s", "--ldflags=-s"},
	} {
		if got := recordedGOFLAGS(tc[0]); got != tc[1] {
			t.Errorf("recordedGOFLAGS(%q) = %q, want %q", tc[0], got, tc[1])
		}
	}
}

// TestRecordSDKTree: a Go guest's record holds the digest of the SDK's
// whole tree, so a change to a file the Go build does not read (the C
// header) is a new record, not a cached module with the old one; once
// cached, the new record needs no go command.
func TestRecordSDKTree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("key records are kept on Linux")
	}
	offline(t)
	now = func() time.Time { return time.Now().Add(time.Hour) }
	t.Cleanup(func() { now = time.Now })
	goBin, runs := countingGo(t)
	sdk, guest := replacedSDKGuest(t, nil)
	opt := Options{CacheDir: t.TempDir(), GoBin: goBin}
	digest := func() string {
		t.Helper()
		wasm, _, err := Build(context.Background(), guest, opt)
		if err != nil {
			t.Fatal(err)
		}
		r, ok, err := ReadRecord(wasm)
		if err != nil || !ok {
			t.Fatalf("ReadRecord: %v %v", ok, err)
		}
		return r.SDK.Digest
	}
	d1 := digest()
	writeFiles(t, sdk, map[string]string{"c/mandate.h": "/* a header */\n"})
	d2 := digest()
	if d1 == d2 || d2 == "" {
		t.Fatalf("the SDK's digest %s did not change with its tree", d1)
	}
	before := runs()
	if d3 := digest(); d3 != d2 || runs() != before {
		t.Errorf("again: digest %s (want %s), %d go commands (want 0)", d3, d2, runs()-before)
	}
}

// TestGoBuildArgs: what go build runs with is what the record's flags
// say, the overlay's path for $OVERLAY and the environment apart.
func TestGoBuildArgs(t *testing.T) {
	t.Setenv("GOFLAGS", "")
	for _, tc := range []struct {
		reactor, mainEntry bool
		want               []string
	}{
		{false, false, []string{"-trimpath", "-buildvcs=false", "-ldflags=-buildid="}},
		{true, false, []string{"-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-ldflags=-buildid="}},
		{false, true, []string{"-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-overlay=/c/o.json", "-ldflags=-checklinkname=0 -buildid="}},
	} {
		flags := goFlags(tc.reactor, tc.mainEntry)
		if got := goBuildArgs(flags, "/c/o.json"); !slices.Equal(got, tc.want) {
			t.Errorf("reactor=%t mainEntry=%t: go build %q, want %q", tc.reactor, tc.mainEntry, got, tc.want)
		}
		if !slices.Equal(flags[:3], goTarget) {
			t.Errorf("flags %q do not start with the target's environment %q", flags, goTarget)
		}
	}
	t.Setenv("GOFLAGS", "-ldflags=-s")
	if got := goBuildArgs(goFlags(false, false), ""); slices.ContainsFunc(got, func(f string) bool { return strings.HasPrefix(f, "-ldflags") }) {
		t.Errorf("with GOFLAGS=-ldflags=-s, go build %q replaces the person's -ldflags", got)
	}
}
