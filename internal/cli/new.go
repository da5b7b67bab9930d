package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/scaffold"
)

const newHelp = `Usage: mandate new NAME [--lang go|rust|c] [--cap net|data|pay]

Writes a new tool in the folder NAME (which must not exist): the guest, its
build file, a manifest granting the one capability asked for with a comment
on each field, a README, and a test that runs the tool with "mandate run"
against a loopback fixture. NAME's base name is the tool's name.

	go     main.go, go.mod requiring the guest SDK (mandate build supplies
	       the SDK from its own copy when the go tool cannot fetch it)
	rust   Cargo.toml and src/main.rs on the mandate crate, built for
	       wasm32-wasip1 (wasm32-wasi with a rustc older than 1.78, such as
	       Debian 12's); Cargo.toml names the crate's copy mandate carries,
	       unpacked into its cache, so cargo builds it offline too (mandate
	       sdk --work rewrites that path if the copy is gone)
	c      main.c and a Makefile on mandate.h (built with clang and
	       wasi-libc for wasm32-wasi; make asks mandate sdk --dir)

	net    GET under one path of one origin (--var origin=URL)
	data   the principal's own records of a collection seeded from a file
	pay    charges to one payee, at most 50 USD each (--var provider=URL)

Then, in the folder:

	mandate build .
	mandate run NAME.hcl [--var ...]
	cd tooltest && go test

Flags:

	--lang LANG    the guest's language (default go)
	--cap KIND     the capability kind (default net)

Examples:

	mandate new weather
	mandate new notes --cap data
	mandate new checkout --lang rust --cap pay
`

func runNew(e *env, args []string) int {
	c := lookupCommand("new")
	fs := flagSet("new")
	lang := fs.String("lang", "go", "")
	kind := fs.String("cap", "net", "")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	dir, code, ok := e.oneArg(c, pos, "the tool's name")
	if !ok {
		return code
	}
	opts := scaffold.Options{Dir: dir, Lang: *lang, Cap: *kind}
	if *lang == "rust" {
		// Cargo.toml names the crate mandate carries (the checkout's, in
		// one), so that cargo builds the folder offline.
		cache, err := e.cacheDir("")
		if err == nil {
			note := func(msg string) { fmt.Fprintf(e.stderr, "mandate new: note: %s\n", msg) }
			opts.RustSDK, err = guestbuild.RustCrate(dir, guestbuild.Options{CacheDir: filepath.Join(cache, "guests"), Note: note})
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "mandate new: the guest SDK for Cargo.toml: %v\n", err)
			return exitUsage
		}
	}
	files, err := scaffold.New(opts)
	if err != nil {
		if strings.HasPrefix(err.Error(), "unknown ") {
			return e.usageError(c, "%v", err)
		}
		fmt.Fprintf(e.stderr, "mandate new: %v\n", err)
		return exitUsage
	}
	name := filepath.Base(filepath.Clean(dir))
	fmt.Fprintf(e.stdout, "wrote %s/: %s\n\n", dir, strings.Join(files, ", "))
	run := "mandate run " + name + ".hcl"
	switch *kind {
	case "net":
		run += " --var origin=http://127.0.0.1:8080"
	case "pay":
		run = strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_CARD_TOKEN=tok_... " + run + " --var provider=http://127.0.0.1:8080"
	}
	fmt.Fprintf(e.stdout, "next:\n\n\tcd %s\n\tmandate build .\n\t%s\n\tcd tooltest && go test\n", dir, run)
	if *lang == "rust" {
		fmt.Fprintf(e.stdout, "\ncargo, offline too (Cargo.toml names %s):\n\n\t%s\n", opts.RustSDK, cargoCommand(context.Background()))
	}
	return exitOK
}
