package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

const cacheHelp = `Usage: mandate cache [--cache-dir DIR]
       mandate cache prune [--older-than DURATION] [--all] [--dry-run] [--cache-dir DIR]

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
not written for --older-than (default 720h, 30 days); --all removes every
file in them; --dry-run says what it would remove and removes nothing.
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
	pos, code, ok := e.parse(c, flags, args)
	if !ok {
		return code
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
	for _, d := range dirs {
		for _, f := range d.files {
			if !*all && !d.superseded[f.path] && !f.mod.Before(cutoff) {
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
