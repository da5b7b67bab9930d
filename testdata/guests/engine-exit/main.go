// Command engine-exit exits with code 3.
package main

import "os"

func main() {
	os.Exit(3)
}
