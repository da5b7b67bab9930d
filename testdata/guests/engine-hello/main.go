// Command engine-hello prints one line to stdout and one to stderr.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("hello, stdout")
	fmt.Fprintln(os.Stderr, "hello, stderr")
}
