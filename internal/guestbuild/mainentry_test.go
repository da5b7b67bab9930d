package guestbuild_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/sandbox"
)

// TestMainEntryEndsAsCommand: a command built with MainEntry is a reactor
// (it exports run and _initialize, no _start) whose tasks end exactly as
// those of the same command built as a command: the same result, stdout,
// stderr and error (exit code) for a return, os.Exit(0), os.Exit(3), a
// panic, a deadlock, input read and output written, and main returning
// while a goroutine waits.
func TestMainEntryEndsAsCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest twice and runs it")
	}
	ctx := context.Background()
	dir := filepath.Join("..", "..", "testdata", "guests", "main-entry")
	cache := filepath.Join(filepath.Dir(guestbuild.DefaultCacheDir()), "guests")
	cmdWasm, _, err := guestbuild.Build(ctx, dir, guestbuild.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	mainWasm, _, err := guestbuild.Build(ctx, dir, guestbuild.Options{CacheDir: cache, MainEntry: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := testengine.New(t)
	if err := kernel.RegisterHost(eng); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		wasm []byte
		want sandbox.ModuleKind
	}{{cmdWasm, sandbox.Command}, {mainWasm, sandbox.Reactor}} {
		m, err := eng.Compile(ctx, c.wasm)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind() != c.want {
			t.Fatalf("module is a %s, want a %s", m.Kind(), c.want)
		}
		m.Close(ctx)
	}

	h, err := host.Open(ctx, host.Options{StateDir: t.TempDir(), CacheDir: filepath.Dir(cache)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	mdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(mdir, "guest.wasm"), cmdWasm, 0o644); err != nil {
		t.Fatal(err)
	}
	man, err := manifest.Parse([]byte(`task "main-entry" {
  module    = "guest.wasm"
  principal = "alice"
  limits {
    timeout = "1m"
  }
}
`), filepath.Join(mdir, "main-entry.hcl"), mdir, nil)
	if err != nil {
		t.Fatal(err)
	}
	type ending struct {
		result, stdout, stderr string
		hasResult              bool
		code                   int64 // -1: no ExitError
		err                    string
	}
	run := func(wasm []byte, input string) ending {
		r, err := h.Start(ctx, host.RunSpec{Manifest: man, Module: wasm, Input: []byte(input)})
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e := ending{result: string(out.Result), hasResult: out.HasResult, code: -1,
			stdout: string(r.Task().Stdout().Data), stderr: string(r.Task().Stderr().Data)}
		var ee *sandbox.ExitError
		if errors.As(out.Err, &ee) {
			e.code = int64(ee.Code)
		} else if out.Err != nil {
			e.err = out.Err.Error()
		}
		return e
	}
	for _, c := range []struct {
		input string
		code  int64
	}{{"ok", -1}, {"exit0", -1}, {"exit3", 3}, {"panic", 2}, {"deadlock", 2}, {"echo:hello", -1}, {"goexit", -1}} {
		// Twice: the second task of the reactor may start from its
		// snapshot.
		for i := range 2 {
			want, got := run(cmdWasm, c.input), run(mainWasm, c.input)
			if got.code != c.code {
				t.Errorf("%s #%d: exit code %d, want %d (%+v)", c.input, i, got.code, c.code, got)
			}
			// A panic's or fatal error's message is the same; its trace
			// has one more frame, the entry's.
			if strings.Contains(want.stderr, "\ngoroutine ") {
				got.stderr, _, _ = strings.Cut(got.stderr, "\ngoroutine ")
				want.stderr, _, _ = strings.Cut(want.stderr, "\ngoroutine ")
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s #%d: built with MainEntry\n\t%+v\nas a command\n\t%+v", c.input, i, got, want)
			}
		}
	}
	if got := run(mainWasm, "ok"); got.result != "ok init ran" {
		t.Errorf("ok: result %q", got.result)
	}
	if got := run(mainWasm, "echo:hi"); got.stdout != "out:hi" || got.stderr != "err:hi" || got.result != "hi" {
		t.Errorf("echo: %+v", got)
	}
	// A module built elsewhere (a plain command) runs as before: it is
	// the comparison above, and its build is not changed by MainEntry's
	// existence.
	if _, err := os.Stat(filepath.Join(dir, guestbuild.MainEntryFile)); err == nil {
		t.Errorf("%s was written into the guest's folder", guestbuild.MainEntryFile)
	}
}
