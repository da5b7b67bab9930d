package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

const cacheHelp = `Usage: mandate cache [--cache-dir DIR]
       mandate cache prune [--older-than DURATION] [--max-size SIZE] [--all] [--dry-run] [--cache-dir DIR]

Shows the caches mandate keeps, and prunes them. The cache root is
--cache-dir, else $MANDATE_CACHE_DIR, else the user cache directory +
/mandate. In it:

	guests/          Go guests built to WebAssembly, one file per build
	                 (NAME-KEY.wasm; the key covers everything the build
	                 read), so a guest is rebuilt only when something changed
	wazero/, wasmtime/
	                 each engine's compiled modules, and under snapshots/
	                 the reactors' pre-initialised snapshots (one file per
	                 module, checked by its SHA-256 on every read)
	graphviz/        the compiled Graphviz that draws "mandate graph
	                 --format svg" and the pictures of "mandate ui"
	*-test/          the same, for the test suites (go test)

"mandate cache" lists each with its size and files, and how many guest
builds are superseded (an older build of a guest that has a newer one).

"mandate cache prune" removes the superseded guest builds and every file
not written for --older-than (default 720h, 30 days); then, with
--max-size (1.5GiB, 500MiB, ...), the least recently written files (a
guest build counts as written each time a run uses it) until the rest
fits in SIZE; --all removes every file in them; --dry-run says what it
would remove and removes nothing.

The cache is also capped by itself: after "mandate run" and "mandate
build", at most once an hour, a cache larger than $MANDATE_CACHE_MAX
(default 2GiB; "off" for no cap) is pruned to three quarters of it, the
least recently written files first (never one written in the last day:
what runs now keeps what it just built), and mandate says so.
Entries it does not know are left alone. A cache entry is only ever a
copy: removing one costs a rebuild or a recompile, nothing else.

Examples:

	mandate cache
	mandate cache prune --dry-run
	mandate cache prune --older-than 24h
`

// cacheDirRE is a directory of the cache root mandate knows: prune
// touches nothing else.
var cacheDirRE = regexp.MustCompile(`^(guests|wazero|wasmtime|graphviz)(-test)?$`)

// guestBuildRE is a built guest in guests/: NAME-KEY.wasm.
var guestBuildRE = regexp.MustCompile(`^(.+)-[0-9a-f]{32}\.wasm$`)

type cacheFile struct {
	path string
	size int64
	mod  time.Time
}

type cacheDir struct {
	name  string
	files []cacheFile
	size  int64
	// superseded are the guest builds with a newer build of the same
	// guest name.
	superseded map[string]bool
}

func runCache(e *env, args []string) int {
	c := lookupCommand("cache")
	flags := flagSet("cache")
	cacheFlag := flags.String("cache-dir", "", "")
	olderThan := flags.Duration("older-than", 720*time.Hour, "")
	all := flags.Bool("all", false, "")
	dry := flags.Bool("dry-run", false, "")
	maxFlag := flags.String("max-size", "", "")
	pos, code, ok := e.parse(c, flags, args)
	if !ok {
		return code
	}
	var maxSize int64 = -1
	if *maxFlag != "" {
		n, err := parseSize(*maxFlag)
		if err != nil {
			return e.usageError(c, "--max-size: %v", err)
		}
		maxSize = n
	}
	prune := false
	switch {
	case len(pos) == 1 && pos[0] == "prune":
		prune = true
	case len(pos) > 0:
		return e.usageError(c, "unexpected argument %q", pos[0])
	}
	if *olderThan < 0 {
		return e.usageError(c, "--older-than %v is negative", *olderThan)
	}
	root, err := e.cacheDir(*cacheFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate cache: %v\n", err)
		return exitUsage
	}
	dirs, others, err := scanCache(root)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate cache: %v\n", err)
		return exitUsage
	}
	if !prune {
		printCache(e, root, dirs, others)
		return exitOK
	}
	cutoff := time.Now().Add(-*olderThan)
	var removed, freed int64
	failed := 0
	// Past the age and the superseded builds, what a --max-size still
	// needs: the least recently written files of what is left.
	over := map[string]bool{}
	if maxSize >= 0 && !*all {
		var left []cacheFile
		var total int64
		for _, d := range dirs {
			for _, f := range d.files {
				if !d.superseded[f.path] && !f.mod.Before(cutoff) {
					left = append(left, f)
					total += f.size
				}
			}
		}
		for _, f := range oldestFirst(left, total-maxSize) {
			over[f.path] = true
		}
	}
	for _, d := range dirs {
		for _, f := range d.files {
			if !*all && !d.superseded[f.path] && !f.mod.Before(cutoff) && !over[f.path] {
				continue
			}
			if *dry {
				fmt.Fprintf(e.stdout, "would remove %s (%s)\n", kindapi.Printable(f.path), humanBytes(f.size))
			} else if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(e.stderr, "mandate cache prune: %v\n", err)
				failed++
				continue
			}
			removed++
			freed += f.size
		}
		if !*dry {
			removeEmptyDirs(filepath.Join(root, d.name))
		}
	}
	verb := "removed"
	if *dry {
		verb = "would remove"
	}
	fmt.Fprintf(e.stdout, "%s %d files, %s, from %s\n", verb, removed, humanBytes(freed), kindapi.Printable(root))
	if failed > 0 {
		return exitTaskFailed
	}
	return exitOK
}

// oldestFirst returns the least recently written of files whose sizes add
// up to at least need (none when need <= 0).
func oldestFirst(files []cacheFile, need int64) []cacheFile {
	if need <= 0 {
		return nil
	}
	files = append([]cacheFile(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].mod.Before(files[j].mod) })
	var out []cacheFile
	for _, f := range files {
		if need <= 0 {
			break
		}
		out = append(out, f)
		need -= f.size
	}
	return out
}

// parseSize reads a size: a number with an optional unit, B, KiB, MiB,
// GiB, TiB (or K, M, G, T, KB, MB, GB, TB, all powers of 1024).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToUpper(strings.TrimSpace(t[i:]))
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("%q is not a size (say 500MiB, 2GiB)", s)
	}
	mult := map[string]float64{"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
		"G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("%q is not a size: unknown unit %q (say 500MiB, 2GiB)", s, t[i:])
	}
	if v*mult > 1<<62 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(v * mult), nil
}

// cacheCapDefault is the cache's cap when $MANDATE_CACHE_MAX is unset.
const cacheCapDefault = 2 << 30

// capStamp, in the cache root, is touched at each check of the cap.
const capStamp = ".capped"

// capCache prunes the cache root to three quarters of $MANDATE_CACHE_MAX
// (default 2 GiB; "off": no cap) when it is larger, at most once an hour,
// the least recently written files first but never one written in the
// last day, and says what it removed. It is
// best effort: a cache entry is only ever a copy, and a failure changes
// nothing for the command that ran.
func (e *env) capCache(root string) {
	max := int64(cacheCapDefault)
	if v := e.getenv("MANDATE_CACHE_MAX"); v != "" {
		if strings.EqualFold(v, "off") {
			return
		}
		n, err := parseSize(v)
		if err != nil {
			fmt.Fprintf(e.stderr, "mandate: MANDATE_CACHE_MAX: %v; the cache is not capped\n", err)
			return
		}
		max = n
	}
	stamp := filepath.Join(root, capStamp)
	if fi, err := os.Stat(stamp); err == nil && time.Since(fi.ModTime()) < time.Hour && time.Since(fi.ModTime()) >= 0 {
		return
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return
	}
	if err := os.WriteFile(stamp, nil, 0o644); err != nil {
		return
	}
	dirs, _, err := scanCache(root)
	if err != nil {
		return
	}
	// Candidates are the files not written for a day: what runs now (a
	// suite, another mandate) keeps what it just built or compiled.
	var files []cacheFile
	var total int64
	dayAgo := time.Now().Add(-24 * time.Hour)
	for _, d := range dirs {
		for _, f := range d.files {
			if f.mod.Before(dayAgo) {
				files = append(files, f)
			}
		}
		total += d.size
	}
	if total <= max || len(files) == 0 {
		return
	}
	var removed int
	var freed int64
	for _, f := range oldestFirst(files, total-max*3/4) {
		if os.Remove(f.path) == nil {
			removed++
			freed += f.size
		}
	}
	for _, d := range dirs {
		removeEmptyDirs(filepath.Join(root, d.name))
	}
	fmt.Fprintf(e.stderr, "mandate: the cache %s was %s, over its cap of %s (MANDATE_CACHE_MAX): removed the %d least recently written files (%s)\n",
		kindapi.Printable(root), humanBytes(total), humanBytes(max), removed, humanBytes(freed))
}

// scanCache lists the known directories of the cache root and their
// files, and the names of the entries it does not know.
func scanCache(root string) ([]*cacheDir, []string, error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var dirs []*cacheDir
	var others []string
	for _, ent := range ents {
		if ent.Name() == capStamp {
			continue
		}
		if !ent.IsDir() || !cacheDirRE.MatchString(ent.Name()) {
			others = append(others, ent.Name())
			continue
		}
		d := &cacheDir{name: ent.Name(), superseded: map[string]bool{}}
		err := filepath.WalkDir(filepath.Join(root, ent.Name()), func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !de.Type().IsRegular() {
				return nil
			}
			fi, err := de.Info()
			if err != nil {
				return nil // removed meanwhile
			}
			d.files = append(d.files, cacheFile{path: p, size: fi.Size(), mod: fi.ModTime()})
			d.size += fi.Size()
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		if strings.HasPrefix(d.name, "guests") {
			newest := map[string]cacheFile{}
			for _, f := range d.files {
				m := guestBuildRE.FindStringSubmatch(filepath.Base(f.path))
				if m == nil || filepath.Dir(f.path) != filepath.Join(root, d.name) {
					continue
				}
				if n, ok := newest[m[1]]; !ok || f.mod.After(n.mod) {
					if ok {
						d.superseded[n.path] = true
					}
					newest[m[1]] = f
				} else {
					d.superseded[f.path] = true
				}
			}
		}
		dirs = append(dirs, d)
	}
	return dirs, others, nil
}

func printCache(e *env, root string, dirs []*cacheDir, others []string) {
	fmt.Fprintf(e.stdout, "cache %s\n", kindapi.Printable(root))
	if len(dirs) == 0 {
		fmt.Fprintln(e.stdout, "  empty")
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	var total int64
	for _, d := range dirs {
		note := ""
		if n := len(d.superseded); n > 0 {
			var sz int64
			for p := range d.superseded {
				for _, f := range d.files {
					if f.path == p {
						sz += f.size
					}
				}
			}
			note = fmt.Sprintf("\t%d superseded builds (%s)", n, humanBytes(sz))
		}
		fmt.Fprintf(w, "  %s\t%s\t%d files%s\n", d.name+"/", humanBytes(d.size), len(d.files), note)
		total += d.size
	}
	w.Flush()
	if len(dirs) > 0 {
		fmt.Fprintf(e.stdout, "  total %s\n", humanBytes(total))
	}
	if len(others) > 0 {
		sort.Strings(others)
		for i := range others {
			others[i] = kindapi.Printable(others[i])
		}
		fmt.Fprintf(e.stdout, "  not mandate's (left alone): %s\n", strings.Join(others, ", "))
	}
}

// removeEmptyDirs removes the empty directories under dir, deepest first,
// and dir itself when it ends up empty.
func removeEmptyDirs(dir string) {
	var ds []string
	filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err == nil && de.IsDir() {
			ds = append(ds, p)
		}
		return nil
	})
	for i := len(ds) - 1; i >= 0; i-- {
		os.Remove(ds[i]) // fails, harmlessly, when not empty
	}
}

// humanBytes is n in the largest binary unit that keeps it at least 1,
// with one decimal: 1.5 MiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}
