//go:build wasmtime && !unix

package wasmtime

// poolFits reports false: New uses the on-demand allocator where it can
// not try the pool's reservation first (pool_unix.go).
func poolFits(uint32) bool { return false }
