// Command stdout-flood writes 64 MiB to stdout and 64 MiB to stderr, in
// big writes, small writes and one giant line. The kernel keeps at most the
// task's output limit of each stream and counts the rest (law 10); the
// task goes on and finishes.
package main

import (
	"os"

	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	attack.ReadInput()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = 'A' + byte(i%26)
	}
	for i := 0; i < 48; i++ {
		os.Stdout.Write(chunk)
		os.Stderr.Write(chunk)
	}
	line := []byte("flood\n")
	for i := 0; i < 100000; i++ {
		os.Stdout.Write(line)
	}
	big := make([]byte, 16<<20)
	os.Stderr.Write(big)
	attack.Set("survived", "ESUCCESS")
	attack.Finish()
}
