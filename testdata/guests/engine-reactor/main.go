// Package main is a reactor guest (built with -buildmode=c-shared) that
// calls the host functions of the test import module "mandate_test".
//
//mandate:reactor
package main

import "unsafe"

//go:wasmimport mandate_test echo
func echo(ptr, n uint32) uint32

//go:wasmimport mandate_test boom
func boom() uint32

var msg = []byte("hello from reactor")

func main() {}

// run sends msg to the host and returns 0 when the host echoed its length.
//
//go:wasmexport run
func run() int32 {
	if echo(uint32(uintptr(unsafe.Pointer(&msg[0]))), uint32(len(msg))) != uint32(len(msg)) {
		return 1
	}
	return 0
}

// noop does nothing: it measures instantiation and runtime start.
//
//go:wasmexport noop
func noop() {}

// fail returns a non-zero status.
//
//go:wasmexport fail
func fail() int32 { return 5 }

// panicky calls a host function that panics.
//
//go:wasmexport panicky
func panicky() { boom() }
