// Command mandate builds Mandate guests, runs tasks described by HCL
// manifests, and shows the capability graph of recorded runs.
//
//	mandate build ./guest -o guest.wasm
//	mandate run quickstart.hcl --var origin=https://flights.example --input query.json
//	mandate graph --format dot | dot -Tsvg > graph.svg
//
// Run "mandate help" for the commands, their flags and exit codes. The
// implementation lives in internal/cli, so examples can drive it in-process.
package main

import (
	"os"

	"github.com/mandatevm/mandate/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
