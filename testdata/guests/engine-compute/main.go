// Command engine-compute hashes a 1 MiB buffer 32 times (a compute-bound
// loop, to measure what stopping at a deadline costs) and prints the digest.
package main

import (
	"crypto/sha256"
	"fmt"
)

func main() {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	var sum [32]byte
	for i := 0; i < 32; i++ {
		copy(buf, sum[:])
		sum = sha256.Sum256(buf)
	}
	fmt.Printf("%x\n", sum)
}
