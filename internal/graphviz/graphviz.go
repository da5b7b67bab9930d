package graphviz

import (
	"context"
	"io"
	"io/fs"

	"github.com/mandatevm/mandate/internal/graphviz/cgraph"
	"github.com/mandatevm/mandate/internal/graphviz/gvc"
	"github.com/mandatevm/mandate/internal/graphviz/internal/wasm"
)

type Graphviz struct {
	ctx    *gvc.Context
	name   string
	dir    *GraphDescriptor
	layout Layout
}

type Layout string

const (
	CIRCO     Layout = "circo"
	DOT       Layout = "dot"
	FDP       Layout = "fdp"
	NEATO     Layout = "neato"
	NOP       Layout = "nop"
	NOP1      Layout = "nop1"
	NOP2      Layout = "nop2"
	OSAGE     Layout = "osage"
	PATCHWORK Layout = "patchwork"
	SFDP      Layout = "sfdp"
	TWOPI     Layout = "twopi"
)

type Format string

const (
	XDOT Format = "dot"
	SVG  Format = "svg"
)

// Init compiles and instantiates Graphviz's WebAssembly module, keeping the
// compiled code in cacheDir (created 0700; "" for no cache). Nothing is
// done before the first Init or New: only the first call does the work,
// later ones return its error. New without Init first uses no cache.
func Init(ctx context.Context, cacheDir string) error {
	return wasm.Init(ctx, cacheDir)
}

// Reset replaces Graphviz's instance by a new one, freeing its memory:
// see wasm.Reset. Every Graphviz and Graph made before is invalid after.
func Reset(ctx context.Context) error {
	return wasm.Reset(ctx)
}

// MemorySize is the size of Graphviz's memory in bytes, which each
// drawing grows (see Reset).
func MemorySize() uint64 {
	return wasm.MemorySize()
}

func New(ctx context.Context) (*Graphviz, error) {
	if err := wasm.Init(ctx, ""); err != nil {
		return nil, err
	}
	c, err := gvc.New(ctx)
	if err != nil {
		return nil, err
	}
	return &Graphviz{
		ctx:    c,
		dir:    Directed,
		layout: DOT,
	}, nil
}

func NewWithPlugins(ctx context.Context, plugins ...Plugin) (*Graphviz, error) {
	if err := wasm.Init(ctx, ""); err != nil {
		return nil, err
	}
	c, err := gvc.NewWithPlugins(ctx, plugins...)
	if err != nil {
		return nil, err
	}
	return &Graphviz{
		ctx:    c,
		dir:    Directed,
		layout: DOT,
	}, nil
}

func (g *Graphviz) Close() error {
	return g.ctx.Close()
}

func (g *Graphviz) SetLayout(layout Layout) *Graphviz {
	g.layout = layout
	return g
}

func (g *Graphviz) Render(ctx context.Context, graph *Graph, format Format, w io.Writer) (e error) {
	defer func() {
		if err := g.ctx.FreeLayout(ctx, graph); err != nil {
			e = err
		}
	}()

	if err := g.ctx.Layout(ctx, graph, string(g.layout)); err != nil {
		return err
	}
	if err := g.ctx.RenderData(ctx, graph, string(format), w); err != nil {
		return err
	}
	return nil
}

func (g *Graphviz) RenderFilename(ctx context.Context, graph *Graph, format Format, path string) (e error) {
	defer func() {
		if err := g.ctx.FreeLayout(ctx, graph); err != nil {
			e = err
		}
	}()

	if err := g.ctx.Layout(ctx, graph, string(g.layout)); err != nil {
		return err
	}
	if err := g.ctx.RenderFilename(ctx, graph, string(format), path); err != nil {
		return err
	}
	return nil
}

func (g *Graphviz) Graph(option ...GraphOption) (*Graph, error) {
	for _, opt := range option {
		opt(g)
	}
	graph, err := cgraph.Open(g.name, g.dir, nil)
	if err != nil {
		return nil, err
	}
	return graph, nil
}

func SetFileSystem(fs fs.FS) {
	wasm.SetWasmFileSystem(fs)
}
