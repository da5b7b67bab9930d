// Command engine-flood writes 100 MB to stdout.
package main

import "os"

func main() {
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = 'x'
	}
	const total = 100 << 20
	for n := 0; n < total; n += len(buf) {
		if _, err := os.Stdout.Write(buf); err != nil {
			os.Exit(1)
		}
	}
}
