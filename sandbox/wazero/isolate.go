package wazero

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tetratelabs/wazero"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/isolate"
)

// Compiling out of process (see "# Compiling" in the package
// documentation).

// compileJob is the isolate job that compiles a module into a compilation
// cache directory.
const compileJob = "wazero-compile"

func init() { isolate.Register(compileJob, runCompileJob) }

// markerDir is the directory, under the cache directory, of the markers
// of modules a child compiled.
const markerDir = "mandate-compiled"

// compileReport, when set (tests), is called with what each child did.
var compileReport func(isolate.Result, error)

// compileRequest is the header of a compile job's request; the module's
// bytes are its body.
type compileRequest struct {
	// CloseOnDone is the runtime's WithCloseOnContextDone: part of
	// wazero's cache key (it changes the code).
	CloseOnDone bool `json:"close_on_done"`
	// Dir is an empty directory for the child's own compilation cache, in
	// the engine's cache directory.
	Dir string `json:"dir"`
	// CacheDir is the engine's cache directory, where the child moves the
	// file its compile wrote.
	CacheDir string `json:"cache_dir"`
}

// runtimeConfig is the configuration of every runtime of the engine
// (without its compilation cache): the engine's, a snapshot's, and a
// compile job's, so that the child's compile is under the key the parent
// looks for.
func runtimeConfig(closeOnDone bool) wazero.RuntimeConfig {
	return wazero.NewRuntimeConfig(). // the compiler where supported
						WithCloseOnContextDone(closeOnDone)
}

// isolated reports whether an engine with opt compiles out of process.
func (o options) isolated() bool { return isolate.Supported && !o.compileInProcess }

// privateCache gives cfg a temporary cache directory when it has none and
// the engine compiles out of process (the parent loads what the child
// compiled from it). The engine removes it at Close.
func privateCache(cfg sandbox.Config, opt options) (sandbox.Config, string, error) {
	if cfg.CacheDir != "" || !opt.isolated() {
		return cfg, "", nil
	}
	dir, err := os.MkdirTemp("", "mandate-wazero-*")
	if err != nil {
		return cfg, "", fmt.Errorf("sandbox/wazero: private compilation cache: %w", err)
	}
	cfg.CacheDir = dir
	return cfg, dir, nil
}

// compileBounded compiles wasm with rt, a runtime made from
// runtimeConfig(closeOnDone) with the engine's compilation cache (e.cache),
// within cfg's timeout and memory: a child process compiles it into the
// cache directory first (sandbox/internal/isolate), then rt loads it from
// there. Bytes a child compiled before (a marker says so, and wazero's
// file is there) start no child. Errors wrap sandbox.ErrTimeout,
// ErrMemoryLimit or ErrCanceled when the compile was stopped.
func (e *Engine) compileBounded(ctx context.Context, rt wazero.Runtime, closeOnDone bool, wasm []byte, cfg sandbox.CompileConfig) (wazero.CompiledModule, error) {
	if !e.opt.isolated() || e.cacheDir == "" {
		return rt.CompileModule(ctx, wasm)
	}
	marker := e.markerPath(wasm, closeOnDone)
	if e.compiledBefore(marker) {
		return rt.CompileModule(ctx, wasm)
	}
	cacheDir, err := filepath.Abs(e.cacheDir)
	if err != nil {
		return nil, err
	}
	// The child's own cache: the one file its compile writes there is
	// wazero's file for wasm. The parent removes it whatever happens.
	dir, err := os.MkdirTemp(cacheDir, ".compile-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	hdr, err := json.Marshal(compileRequest{CloseOnDone: closeOnDone, Dir: dir, CacheDir: cacheDir})
	if err != nil {
		return nil, err
	}
	mem := cfg.MemoryLimit
	if mem == 0 {
		mem = sandbox.DefaultCompileMemory
	}
	res, err := isolate.Run(ctx, compileJob, isolate.Pack(hdr, wasm), isolate.Limits{Memory: mem, Timeout: cfg.Timeout})
	if compileReport != nil {
		compileReport(res, err)
	}
	if err != nil {
		return nil, err
	}
	rel := string(res.Output)
	if !e.cacheFileOK(rel) {
		return nil, fmt.Errorf("the compile's cache file %q is not in %s", rel, e.cacheDir)
	}
	// Best effort: without the marker the next engine compiles again.
	_ = writeFileAtomic(marker, []byte(rel))
	return rt.CompileModule(ctx, wasm)
}

// markerPath is the marker of wasm compiled by a runtime with closeOnDone.
func (e *Engine) markerPath(wasm []byte, closeOnDone bool) string {
	h := sha256.New()
	h.Write(wasm)
	if closeOnDone {
		h.Write([]byte{1})
	} else {
		h.Write([]byte{0})
	}
	return filepath.Join(e.cacheDir, markerDir, hex.EncodeToString(h.Sum(nil)))
}

// compiledBefore reports whether marker names a cache file that is there.
func (e *Engine) compiledBefore(marker string) bool {
	b, err := os.ReadFile(marker)
	return err == nil && e.cacheFileOK(string(b))
}

// cacheFileOK reports whether rel is a file of wazero's, in its directory
// of the cache directory, that is there.
func (e *Engine) cacheFileOK(rel string) bool {
	sub, name, ok := strings.Cut(rel, string(filepath.Separator))
	if !ok || !strings.HasPrefix(sub, "wazero-") || !filepath.IsLocal(rel) || strings.ContainsRune(name, filepath.Separator) {
		return false
	}
	fi, err := os.Stat(filepath.Join(e.cacheDir, rel))
	return err == nil && fi.Mode().IsRegular() && fi.Size() > 0
}

// runCompileJob is the child's side: compile the module into the request's
// empty cache directory, move the file wazero wrote to the same place in
// the engine's cache directory, and write its name there.
func runCompileJob(req []byte, out *bytes.Buffer) error {
	hdr, wasm, err := isolate.Unpack(req)
	if err != nil {
		return err
	}
	var r compileRequest
	if err := json.Unmarshal(hdr, &r); err != nil {
		return fmt.Errorf("compile request: %w", err)
	}
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(r.Dir)
	if err != nil {
		return fmt.Errorf("compilation cache: %w", err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, runtimeConfig(r.CloseOnDone).WithCompilationCache(cache))
	if _, err := rt.CompileModule(ctx, wasm); err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(r.Dir, "wazero-*", "*"))
	if err != nil {
		return err
	}
	var written []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".tmp") {
			written = append(written, f)
		}
	}
	if len(written) != 1 {
		return fmt.Errorf("compile wrote %d cache files, want 1", len(written))
	}
	rel, err := filepath.Rel(r.Dir, written[0])
	if err != nil {
		return err
	}
	dst := filepath.Join(r.CacheDir, rel)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if err := os.Rename(written[0], dst); err != nil {
		return err
	}
	out.WriteString(rel)
	return nil
}

// writeFileAtomic writes data to path through a temporary file renamed
// into place, making path's directory.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// removePrivate removes a private cache directory, if any.
func removePrivate(dir string) {
	if dir != "" {
		os.RemoveAll(dir)
	}
}
