// Package main is a reactor guest that calls a host function during its
// package initialisation: an engine must not snapshot it (its init would
// then be run with, and keep, what one task's host call returned).
//
//mandate:reactor
package main

import "unsafe"

//go:wasmimport mandate_test echo
func echo(ptr, n uint32) uint32

var msg = []byte("init")

// echoed is what the host answered during init.
var echoed = echo(uint32(uintptr(unsafe.Pointer(&msg[0]))), uint32(len(msg)))

func main() {}

// run returns 0 when init's host call was answered.
//
//go:wasmexport run
func run() int32 {
	if echoed != uint32(len(msg)) {
		return 1
	}
	return 0
}
