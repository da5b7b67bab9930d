package sandboxtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
)

// testStaticLimits: a module is checked against the limits of each
// compile, bytes already compiled included: one task's tight limits refuse
// a module another task compiled, and do not stop the next task with
// looser ones.
func (s *suite) testStaticLimits(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
	ctx := context.Background()
	hello := Guest("hello")
	m := compileBytes(t, e, "hello", hello)
	runHello(t, m)

	tight := sandbox.CompileConfig{Limits: sandbox.StaticLimits{Functions: 10}}
	if m2, err := e.CompileWith(ctx, hello, tight); !errors.Is(err, sandbox.ErrStaticLimit) ||
		!strings.Contains(err.Error(), "(limits { functions }) is 10") {
		if err == nil {
			m2.Close(ctx)
		}
		t.Fatalf("CompileWith(compiled bytes, functions = 10) = %v, want ErrStaticLimit naming functions", err)
	}
	m3, err := e.CompileWith(ctx, hello, sandbox.CompileConfig{})
	if err != nil {
		t.Fatalf("CompileWith(compiled bytes, defaults) after a refusal: %v", err)
	}
	defer m3.Close(ctx)
	runHello(t, m3)

	// Bytes never compiled, past a limit the defaults allow.
	e2, _ := s.engine(t, sandbox.Config{})
	if _, err := e2.CompileWith(ctx, hello, sandbox.CompileConfig{Limits: sandbox.StaticLimits{Nesting: 3}}); !errors.Is(err, sandbox.ErrStaticLimit) ||
		!strings.Contains(err.Error(), "(limits { nesting }) is 3") {
		t.Fatalf("CompileWith(nesting = 3) = %v, want ErrStaticLimit naming nesting", err)
	}
	m4 := compileBytes(t, e2, "hello", hello)
	runHello(t, m4)
}

// testCompileBombs: each compile bomb of issue 24 is refused by the
// default limits, naming the limit, before any compiler sees it.
func (s *suite) testCompileBombs(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
	ctx := context.Background()
	for _, b := range wasmasm.Bombs {
		wasm := b.Wasm()
		start := time.Now()
		m, err := e.Compile(ctx, wasm)
		elapsed := time.Since(start)
		if err == nil {
			m.Close(ctx)
		}
		if !errors.Is(err, sandbox.ErrStaticLimit) || !strings.Contains(err.Error(), "(limits { "+b.Limit+" })") {
			t.Errorf("%s: Compile = %v, want ErrStaticLimit naming %s", b.Name, err, b.Limit)
			continue
		}
		// ErrStaticLimit: refused before any compiler saw it.
		t.Logf("%s (%d bytes): refused in %v: %v", b.Name, len(wasm), elapsed, err)
	}
}
