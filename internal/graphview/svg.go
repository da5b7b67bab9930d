package graphview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/mandatevm/mandate/internal/graphviz"
	"github.com/mandatevm/mandate/runstore"
)

// Options configure SVG.
type Options struct {
	// CacheDir keeps Graphviz's compiled code between processes (mandate
	// uses <cache root>/graphviz). It is created 0700 and must not be
	// writable by others; "" keeps none (each process then compiles the
	// module again, about a second). Only the first SVG of a process
	// compiles: later calls' CacheDir is not used.
	CacheDir string
}

// MaxSVGNodes bounds the tasks and capabilities SVG lays out: the layout
// takes time that grows faster than the graph, and a record can be made
// large by a guest. The DOT form has no bound.
const MaxSVGNodes = 2000

// ErrTooLarge is returned by SVG for a record of more than MaxSVGNodes
// tasks and capabilities.
var ErrTooLarge = errors.New("graphview: graph too large to lay out")

// mu serializes drawing: Graphviz is one WebAssembly instance per
// process, not safe for concurrent use.
var mu sync.Mutex

// SVG draws rec's capability graph (the picture DOT describes) as an SVG
// document, with Graphviz compiled to WebAssembly: nothing to install. The
// first call in a process compiles Graphviz (about a second; tens of
// milliseconds with a warm opts.CacheDir); later calls take a few
// milliseconds for a small run, one to two seconds for 200 tasks (the
// layout grows faster than the graph; BENCHMARKS.md). ctx is looked at
// before the drawing, not during it. Safe for concurrent use (calls are
// serialized).
//
// Each task's node is a group with id TaskElementID(task) and a class
// starting "node task", each capability's CapElementID(cap) and "node
// cap"; the document holds no script, no link and no event attribute.
func SVG(ctx context.Context, rec *runstore.Record, opts Options) ([]byte, error) {
	if n := len(rec.Tasks) + len(rec.Caps); n > MaxSVGNodes {
		return nil, fmt.Errorf("%w: %d tasks and capabilities (at most %d; the DOT and JSON forms have them all)", ErrTooLarge, n, MaxSVGNodes)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dot := buildDOT(rec)
	mu.Lock()
	defer mu.Unlock()
	if broken != nil {
		return nil, broken
	}
	if err := initGraphviz(ctx, opts.CacheDir); err != nil {
		return nil, err
	}
	if gv == nil {
		g, err := graphviz.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("graphviz: %w", err)
		}
		gv = g
	}
	graph, err := graphviz.ParseBytes([]byte(dot))
	if err != nil {
		return nil, fmt.Errorf("graphviz: parsing the graph: %w", err)
	}
	var b bytes.Buffer
	err = gv.Render(ctx, graph, graphviz.SVG, &b)
	graph.Close()
	if err != nil {
		gv.Close()
		gv = nil
		return nil, fmt.Errorf("graphviz: %w", err)
	}
	// Graphviz's memory only grows (its Go glue frees nothing): past
	// resetAbove it starts afresh, in about a millisecond.
	if graphviz.MemorySize() > resetAbove {
		gv.Close()
		gv = nil
		resets++
		if err := graphviz.Reset(ctx); err != nil {
			broken = fmt.Errorf("graphviz: a new instance: %w", err)
		}
	}
	return b.Bytes(), nil
}

// What SVG keeps between calls, protected by mu.
var (
	// gv is the Graphviz context drawings share; nil after a reset or an
	// error.
	gv *graphviz.Graphviz
	// broken is the error of a failed reset: Graphviz cannot draw again
	// in this process.
	broken error
	// resets counts the new instances (tests).
	resets int
)

// resetAbove is the size of Graphviz's memory past which SVG replaces its
// instance after drawing (a variable for tests).
var resetAbove uint64 = 32 << 20

// compiled is set once Graphviz was compiled, well or not (its error is
// graphviz.Init's from then on). Protected by mu.
var compiled bool

// initGraphviz compiles Graphviz once, with its compiled code in dir,
// checked first: code loaded from it runs in this process. A directory
// refused is an error of that call only.
//
// Preconditions: mu is held.
func initGraphviz(ctx context.Context, dir string) error {
	if !compiled && dir != "" {
		if err := checkCacheDir(dir); err != nil {
			return err
		}
	}
	compiled = true
	if err := graphviz.Init(ctx, dir); err != nil {
		return fmt.Errorf("graphviz: compiling: %w", err)
	}
	return nil
}

// checkCacheDir creates dir 0700 if missing, and refuses a directory
// that is not one or that others may write to.
func checkCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("graphviz cache: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("graphviz cache: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("graphviz cache %s: not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("graphviz cache %s: writable by others (mode %v): compiled code there would run in this process; chmod go-w it or remove it", dir, fi.Mode().Perm())
	}
	return nil
}
