package wasm

import "testing"

// TestEmbeddedModule: the embedded module decompresses to exactly
// upstream's graphviz.wasm (its pinned digest), and a damaged copy is an
// error, not a module.
func TestEmbeddedModule(t *testing.T) {
	b, err := wasmModule()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		t.Fatalf("not a wasm module: %d bytes", len(b))
	}
	saved := graphvizWasm
	defer func() { graphvizWasm = saved }()
	graphvizWasm = append([]byte(nil), saved...)
	graphvizWasm[len(graphvizWasm)/2] ^= 0xff
	if _, err := wasmModule(); err == nil {
		t.Error("a damaged module was accepted")
	}
}
