//go:build wasmtime

package wasmtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/isolate"
)

// Compiling out of process (see "Compiling" in the package documentation).

// compileJob is the isolate job that compiles a module and serializes it
// into the disk cache (or onto its output).
const compileJob = "wasmtime-compile"

func init() { isolate.Register(compileJob, runCompileJob) }

// compileReport, when set (tests), is called with what each child did.
var compileReport func(isolate.Result, error)

// compileRequest is the header of a compile job's request; the module's
// bytes are its body.
type compileRequest struct {
	// Preempt is the engine's preemption: the settings of the wasmtime
	// Config that change the code (wasmtimeConfig).
	Preempt preemption `json:"preempt"`
	// CacheDir is the engine's disk cache directory (diskCache.dir), and
	// Digest the name to store the module under there. Without them the
	// child writes the serialized module to its output.
	CacheDir string `json:"cache_dir,omitempty"`
	Digest   string `json:"digest,omitempty"`
}

// wasmtimeConfig is the wasmtime Config of an engine: the parent's, with
// a pool of poolInstances instances (pool.go) or none (0), and, without a
// pool, a compile job's. The pool changes how instances are allocated, not
// the code (and it reserves its address space up front, which a child
// bounded in address space can not afford).
func wasmtimeConfig(p preemption, poolInstances uint32) *wt.Config {
	wc := wt.NewConfig()
	switch p {
	case preemptEpoch:
		wc.SetEpochInterruption(true)
	case preemptFuel:
		wc.SetConsumeFuel(true)
	}
	if poolInstances > 0 {
		setPooling(wc, poolInstances)
	}
	return wc
}

// compileBounded compiles src (a module ready to compile) within cfg's
// timeout and memory, in a child process (sandbox/internal/isolate) with
// the engine's wasmtime settings, and returns it loaded in the engine.
// With a digest and the disk cache, the child stores the module there
// under digest and the parent loads it from there (e.cache.load);
// otherwise the child hands the serialized module over on its output.
// Errors wrap sandbox.ErrTimeout, ErrMemoryLimit or ErrCanceled when the
// compile was stopped.
func (e *Engine) compileBounded(ctx context.Context, digest string, src []byte, cfg sandbox.CompileConfig) (*wt.Module, error) {
	if !isolate.Supported || e.opt.compileInProcess {
		mod, err := wt.NewModule(e.wt, src)
		if err != nil {
			return nil, fmt.Errorf("sandbox/wasmtime: compile: %w", err)
		}
		if digest != "" {
			e.cache.store(digest, mod)
		}
		return mod, nil
	}
	req := compileRequest{Preempt: e.opt.preempt}
	if e.cache != nil && digest != "" {
		req.CacheDir, req.Digest = e.cache.dir, digest
	}
	hdr, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	mem := cfg.MemoryLimit
	if mem == 0 {
		mem = sandbox.DefaultCompileMemory
	}
	res, err := isolate.Run(ctx, compileJob, isolate.Pack(hdr, src), isolate.Limits{Memory: mem, Timeout: cfg.Timeout})
	if compileReport != nil {
		compileReport(res, err)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox/wasmtime: compile: %w", err)
	}
	if len(res.Output) > 0 {
		// Not stored (no cache, or it could not be written).
		mod, err := wt.NewModuleDeserialize(e.wt, res.Output)
		if err != nil {
			return nil, fmt.Errorf("sandbox/wasmtime: loading the module compiled out of process: %w", err)
		}
		return mod, nil
	}
	if mod := e.cache.load(digest, e.wt); mod != nil {
		return mod, nil
	}
	return nil, errors.New("sandbox/wasmtime: the module compiled out of process does not load from the cache")
}

// runCompileJob is the child's side: compile, serialize, store in the
// cache (diskCache.write), or write the serialized module to out when
// there is no cache or it could not be written.
func runCompileJob(req []byte, out *bytes.Buffer) error {
	hdr, src, err := isolate.Unpack(req)
	if err != nil {
		return err
	}
	var r compileRequest
	if err := json.Unmarshal(hdr, &r); err != nil {
		return fmt.Errorf("compile request: %w", err)
	}
	eng := wt.NewEngineWithConfig(wasmtimeConfig(r.Preempt, 0))
	mod, err := wt.NewModule(eng, src)
	if err != nil {
		return err
	}
	payload, err := mod.Serialize()
	if err != nil {
		return fmt.Errorf("serializing: %w", err)
	}
	if r.CacheDir != "" {
		c := &diskCache{dir: r.CacheDir}
		if c.write(r.Digest, payload) == nil {
			return nil
		}
	}
	out.Write(payload)
	return nil
}
