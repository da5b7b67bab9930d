// Command cli-reactor is a reactor guest for the CLI scripts: the task is
// _initialize followed by the manifest's entry ("run" by default).
package main

import mandate "github.com/mandatevm/mandate/guest-sdk"

// This guest is a reactor:
//
//mandate:reactor

func main() {}

//go:wasmexport run
func run() { mandate.SetResult([]byte("reactor ran run")) }

//go:wasmexport greet
func greet() { mandate.SetResult([]byte("reactor ran greet")) }
