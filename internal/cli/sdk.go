package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/sdkembed"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

const sdkHelp = `Usage: mandate sdk [--dir | --work] [--cache-dir DIR]

The guest SDK this binary carries, for the plain tools of a tool's folder
(go build, go vet, gopls, cargo, make), offline: unpacked once into the
cache (DIR/sdk), checked by its hash at each use.

	(no flag)  the SDK's module, version and folder, and how each
	           language's tools use it
	--dir      the folder alone (for scripts and Makefiles: the C scaffold's
	           Makefile runs it)
	--work     writes go.work in the current folder (a Go tool's, holding
	           its go.mod): the folder and the SDK copy, so that go build,
	           go vet, go test and gopls find the SDK without a go.sum entry
	           or the network. It never writes over a go.work. mandate
	           build needs none of this: it supplies the SDK by itself.
	--cache-dir DIR
	           the cache root (default $MANDATE_CACHE_DIR, else the user
	           cache directory + /mandate)

Examples:

	mandate sdk
	cd mytool && mandate sdk --work && go vet ./...
	clang --target=wasm32-wasi -I"$(mandate sdk --dir)/c" -o tool.wasm main.c
`

func runSDK(e *env, args []string) int {
	c := lookupCommand("sdk")
	fs := flagSet("sdk")
	dirOnly := fs.Bool("dir", false, "")
	work := fs.Bool("work", false, "")
	cacheFlag := fs.String("cache-dir", "", "")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return e.usageError(c, "unexpected argument %q", pos[0])
	}
	if *dirOnly && *work {
		return e.usageError(c, "--dir and --work: one at a time")
	}
	cache, err := e.cacheDir(*cacheFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate sdk: %v\n", err)
		return exitUsage
	}
	note := func(msg string) { fmt.Fprintf(e.stderr, "mandate sdk: note: %s\n", msg) }
	dir, err := guestbuild.UnpackSDK(guestbuild.Options{CacheDir: filepath.Join(cache, "guests"), Note: note})
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate sdk: %v\n", err)
		return exitUsage
	}
	switch {
	case *dirOnly:
		fmt.Fprintln(e.stdout, dir)
		return exitOK
	case *work:
		return writeSDKWork(e, dir)
	}
	d, _ := sdkembed.Digest()
	fmt.Fprintf(e.stdout, "%s %s %s\n", sdkembed.Module, sdkembed.Version, d)
	fmt.Fprintf(e.stdout, "folder  %s\n", kindapi.Printable(dir))
	fmt.Fprintf(e.stdout, "go      mandate sdk --work in the tool's folder writes a go.work using it\n")
	fmt.Fprintf(e.stdout, "rust    in Cargo.toml: mandate = { path = %s }\n", strconv.Quote(filepath.Join(dir, "rust")))
	fmt.Fprintf(e.stdout, "c       clang --target=wasm32-wasi -I%s ...\n", kindapi.Printable(filepath.Join(dir, "c")))
	return exitOK
}

// writeSDKWork writes ./go.work: this folder and the SDK copy at sdk.
func writeSDKWork(e *env, sdk string) int {
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate sdk: no go.mod here: run --work in a Go tool's folder (mandate new NAME writes one)\n")
		return exitUsage
	}
	// The workspace's go line: the SDK's (1.26.0), or the tool's if later.
	goVersion := "1.26.0"
	if f, err := modfile.ParseLax("go.mod", gomod, nil); err == nil && f.Go != nil && semver.Compare("v"+f.Go.Version, "v"+goVersion) > 0 {
		goVersion = f.Go.Version
	}
	// The folder's own modules (the scaffold's tooltest/ is one): a go
	// command run in them must find them in the workspace too.
	uses := "\t.\n"
	if ents, err := os.ReadDir("."); err == nil {
		for _, ent := range ents {
			if _, err := os.Stat(filepath.Join(ent.Name(), "go.mod")); ent.IsDir() && err == nil {
				uses += "\t" + strconv.Quote("./"+ent.Name()) + "\n"
			}
		}
	}
	work := fmt.Sprintf("// Written by mandate sdk --work: this tool and the guest SDK mandate\n"+
		"// carries (%s %s), so that go build, go vet and gopls work offline.\n"+
		"go %s\n\nuse (\n%s\t%s\n)\n", sdkembed.Module, sdkembed.Version, goVersion, uses, strconv.Quote(sdk))
	f, err := os.OpenFile("go.work", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		fmt.Fprintf(e.stderr, "mandate sdk: go.work exists; mandate sdk never writes over one (add the SDK's folder to it: mandate sdk --dir)\n")
		return exitUsage
	}
	if err == nil {
		_, err = f.WriteString(work)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.Remove("go.work")
		fmt.Fprintf(e.stderr, "mandate sdk: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, "wrote go.work (this folder and %s)\n", kindapi.Printable(sdk))
	return exitOK
}
