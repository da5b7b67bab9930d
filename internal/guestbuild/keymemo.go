package guestbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/mandatevm/mandate/internal/sdkembed"
)

// A Go guest's key without go list (issue 31: a guest folder cost a run
// 45 ms more than its .wasm, the go env and go list processes of its key).
//
// When a build is cached, what its key was computed from is remembered,
// in CacheDir/keys: the key, and a stamp (device, inode, size, mtime,
// ctime, file type; or "absent") of every path whose change could change
// the key:
//
//   - every file in the directory of each package hashed by content (the
//     package's own files and the ones its build ignores, which a changed
//     build constraint would bring in), that directory and each directory
//     above it up to its module's root (a file added or removed, or a
//     go.mod that moves a package to another module, changes one of
//     them), and for embedded files each directory from theirs up;
//   - each such module's go.mod, go.sum and vendor/modules.txt;
//   - go.work and go.mod in the guest's directory and every directory
//     above it, the workspace's go.work, go.work.sum and
//     vendor/modules.txt, the go env file (GOENV), a -pgo profile, the go
//     command and GOROOT/go.env.
//
// The record is found by the guest's directory, the build mode, the go
// command and every environment variable the go tool reads (GO*, CGO_*,
// HOME, XDG_CONFIG_HOME, PATH), so any change to those is another record.
// A build whose record's stamps all still hold uses the key in it and runs
// no go command; any difference, a damaged record or none, and go env and
// go list run as before. Packages from the module cache are not stamped:
// they are pinned by the versions and sums of the go.mod and go.sum files
// that are.
//
// As git's index does, a record is not written when any stamp it would
// hold changed within racyWindow before the key was computed: a file
// changed again within the file system's timestamp granularity could keep
// its stamp. The stamps are taken after go list and before the files are
// read for the key, so a change between them makes the record a miss, never
// a stale key. Where stamps are not available (statStamp, not Linux), no
// record is kept.

// racyWindow is how long after a path's last change a record holding it
// is not written.
var racyWindow = 2 * time.Second

// now is the clock of the racy check (tests move it).
var now = time.Now

// keyMemoVersion changes whenever what a record holds changes.
const keyMemoVersion = "guestbuild keymemo v1"

// stamp is a path's identity and times, or its absence.
type stamp struct {
	Path   string `json:"p"`
	Absent bool   `json:"a,omitempty"`
	Dev    uint64 `json:"d,omitempty"`
	Ino    uint64 `json:"i,omitempty"`
	Size   int64  `json:"s,omitempty"`
	Mtime  int64  `json:"m,omitempty"`
	Ctime  int64  `json:"c,omitempty"`
	Mode   uint32 `json:"t,omitempty"`
}

// keyMemo is a record: the key and the stamps it holds for.
type keyMemo struct {
	Version string  `json:"version"`
	Key     string  `json:"key"`
	Stamps  []stamp `json:"stamps"`
}

// stampPath stamps path (following symlinks); ok is false when stamps are
// not available.
func stampPath(path string) (stamp, bool, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return stamp{Path: path, Absent: true}, true, nil
	}
	if err != nil {
		return stamp{}, false, err
	}
	st, ok := statStamp(fi)
	st.Path = path
	return st, ok, nil
}

// memoEnv are the environment variables, other than those with a GO or
// CGO_ prefix, that select what the go tool does.
var memoEnv = []string{"HOME", "XDG_CONFIG_HOME", "PATH"}

// memoPath is the record's file for a build of dir.
func memoPath(cacheDir, dir string, reactor, mainEntry bool, goBin string) string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GO") || strings.HasPrefix(name, "CGO_") || slices.Contains(memoEnv, name) {
			env = append(env, kv)
		}
	}
	sort.Strings(env)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00reactor=%t\x00main=%t\x00%s\x00", keyVersion, keyMemoVersion, dir, reactor, mainEntry, goBin)
	for _, kv := range env {
		fmt.Fprintf(h, "%s\x00", kv)
	}
	return filepath.Join(cacheDir, "keys", hex.EncodeToString(h.Sum(nil))[:32]+".json")
}

// memoKey returns the key the record at path holds when every stamp in it
// still holds.
func memoKey(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	var m keyMemo
	if json.Unmarshal(b, &m) != nil || m.Version != keyMemoVersion || len(m.Key) != 64 || len(m.Stamps) == 0 {
		return "", false
	}
	for _, want := range m.Stamps {
		got, ok, err := stampPath(want.Path)
		if err != nil || !ok || got != want {
			return "", false
		}
	}
	return m.Key, true
}

// writeMemo writes the record of key, unless a stamp is racy (changed
// within racyWindow before since, when the key's computation began).
func writeMemo(path, key string, stamps []stamp, since time.Time) {
	limit := since.Add(-racyWindow).UnixNano()
	for _, s := range stamps {
		if !s.Absent && (s.Mtime >= limit || s.Ctime >= limit) {
			return
		}
	}
	b, err := json.Marshal(keyMemo{Version: keyMemoVersion, Key: key, Stamps: stamps})
	if err != nil {
		return
	}
	if os.MkdirAll(filepath.Dir(path), 0o755) != nil {
		return
	}
	writeIfChanged(path, b) // a record not written is a miss next time
}

// stamper collects the stamps of a key's computation.
type stamper struct {
	seen   map[string]bool
	stamps []stamp
	ok     bool // false once a stamp was not available
}

func newStamper() *stamper { return &stamper{seen: map[string]bool{}, ok: true} }

func (s *stamper) add(path string) error {
	if !s.ok || path == "" || s.seen[path] {
		return nil
	}
	s.seen[path] = true
	st, ok, err := stampPath(path)
	if err != nil {
		return err
	}
	if !ok {
		s.ok = false
		return nil
	}
	s.stamps = append(s.stamps, st)
	return nil
}

// addDirFiles stamps dir and every entry in it that is not a directory.
func (s *stamper) addDirFiles(dir string) error {
	if !s.ok || s.seen[dir+"/*"] {
		return nil
	}
	s.seen[dir+"/*"] = true
	if err := s.add(dir); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			if err := s.add(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// addTree stamps every directory and file under root that sdkRecord
// reads (and the directories it skips, whose change it does not see).
func (s *stamper) addTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := s.add(p); err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		if d.IsDir() && !sdkembed.Include(filepath.ToSlash(rel), true) {
			return filepath.SkipDir
		}
		return nil
	})
}

// addUp stamps each directory from dir up to top (when top is above dir;
// else dir alone).
func (s *stamper) addUp(dir, top string) error {
	for d := dir; ; {
		if err := s.add(d); err != nil {
			return err
		}
		rel, err := filepath.Rel(top, d)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			return nil
		}
		up := filepath.Dir(d)
		if up == d {
			return nil
		}
		d = up
	}
}

// addAncestors stamps go.work and go.mod in dir and every directory above.
func (s *stamper) addAncestors(dir string) error {
	for d := dir; ; {
		if err := s.add(filepath.Join(d, "go.work")); err != nil {
			return err
		}
		if err := s.add(filepath.Join(d, "go.mod")); err != nil {
			return err
		}
		up := filepath.Dir(d)
		if up == d {
			return nil
		}
		d = up
	}
}

// stampKey stamps what key reads and what decides what it reads (see the
// comment at the top of this file).
func stampKey(st *stamper, dir, goBin string, env map[string]string, pkgs []*listPackage) error {
	if p, err := filepath.Abs(goBin); err == nil {
		goBin = p
	}
	for _, p := range []string{goBin, env["GOENV"]} {
		if err := st.add(p); err != nil {
			return err
		}
	}
	if r := env["GOROOT"]; r != "" {
		if err := st.add(filepath.Join(r, "go.env")); err != nil {
			return err
		}
	}
	if err := st.addAncestors(dir); err != nil {
		return err
	}
	if w := env["GOWORK"]; w != "" && w != "off" {
		for _, p := range []string{w, w + ".sum", filepath.Join(filepath.Dir(w), "vendor", "modules.txt")} {
			if err := st.add(p); err != nil {
				return err
			}
		}
	}
	for _, f := range strings.Fields(env["GOFLAGS"]) {
		name, val, _ := strings.Cut(strings.TrimLeft(strings.Trim(f, `"'`), "-"), "=")
		if name == "pgo" && val != "auto" && val != "off" {
			if !filepath.IsAbs(val) {
				val = filepath.Join(dir, val)
			}
			if err := st.add(val); err != nil {
				return err
			}
		}
	}
	modCache := env["GOMODCACHE"]
	sdkDone := false
	for _, p := range pkgs {
		if p.Standard || p.Dir == "" {
			continue
		}
		m := p.Module
		if m != nil && fromModCache(p, modCache) {
			continue
		}
		if m != nil && m.Path == SDKModule && m.Dir != "" && !sdkDone {
			// The record holds the digest of the SDK's whole tree.
			sdkDone = true
			if err := st.addTree(m.Dir); err != nil {
				return err
			}
		}
		if err := st.addDirFiles(p.Dir); err != nil {
			return err
		}
		top := p.Dir
		if m != nil && m.Dir != "" {
			top = m.Dir
		}
		if err := st.addUp(p.Dir, top); err != nil {
			return err
		}
		for _, f := range p.EmbedFiles {
			if err := st.addUp(filepath.Dir(filepath.Join(p.Dir, f)), p.Dir); err != nil {
				return err
			}
		}
		if m == nil {
			continue
		}
		if m.GoMod != "" {
			for _, f := range []string{m.GoMod, strings.TrimSuffix(m.GoMod, ".mod") + ".sum"} {
				if err := st.add(f); err != nil {
					return err
				}
			}
		}
		if m.Dir != "" {
			if err := st.add(filepath.Join(m.Dir, "vendor", "modules.txt")); err != nil {
				return err
			}
		}
	}
	return nil
}
