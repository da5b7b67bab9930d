//go:build wasmtime && !linux

package wasmtime

// pagemapScan reports false: PAGEMAP_SCAN is Linux's (pagemap_linux.go).
func pagemapScan() bool { return false }
