// Command hostile-flood writes 100 MiB to stdout and stderr: the kernel
// keeps a bounded amount and marks the truncation.
package main

import (
	"bytes"
	"os"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	line := bytes.Repeat([]byte("flood "), 1<<14)
	line = append(line, '\n')
	for n := 0; n < 100<<20; n += len(line) {
		os.Stdout.Write(line)
	}
	os.Stderr.Write(line)
	mandate.SetResult([]byte("survived"))
}
