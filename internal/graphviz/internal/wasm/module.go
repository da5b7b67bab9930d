package wasm

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

// The Graphviz module is kept gzipped (graphviz.wasm.gz, 0.64 MB instead
// of 1.5 MB in the repository and the binary) and decompressed on first
// use only. It cannot be built here: its build (upstream's
// internal/wasm/build, wasi-sdk 24 and binaryen 119 on Graphviz 12.1.2's
// source) needs a toolchain and a source tarball no registry this project
// uses serves. So the bytes are pinned instead: they must be exactly
// upstream's graphviz.wasm of go-graphviz v0.2.10, whose SHA-256 is
// wasmSHA256.
const wasmSHA256 = "7cc5b0a5f176aeaa69760ed5dc3282ceda2b1b04229b22de77bb0a5eab45578e"

// maxWasm bounds the decompressed module.
const maxWasm = 8 << 20

// wasmModule returns the decompressed module, checked against its digest.
func wasmModule() ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(graphvizWasm))
	if err != nil {
		return nil, fmt.Errorf("graphviz: the embedded module: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, maxWasm+1))
	if err != nil {
		return nil, fmt.Errorf("graphviz: the embedded module: %w", err)
	}
	if len(b) > maxWasm {
		return nil, fmt.Errorf("graphviz: the embedded module is larger than %d bytes", maxWasm)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != wasmSHA256 {
		return nil, fmt.Errorf("graphviz: the embedded module's SHA-256 is %x, not upstream's %s", sum, wasmSHA256)
	}
	return b, nil
}
