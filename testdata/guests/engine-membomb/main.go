// Command engine-membomb allocates and touches memory until it dies.
package main

import (
	"fmt"
	"os"
)

var keep [][]byte

func main() {
	for i := 0; ; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = byte(i)
		}
		keep = append(keep, b)
		if i%16 == 0 {
			fmt.Fprintf(os.Stderr, "allocated %d MiB\n", i+1)
		}
	}
}
