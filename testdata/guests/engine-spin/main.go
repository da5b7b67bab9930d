// Command engine-spin loops forever without calling the host.
package main

var n int

func main() {
	for {
		n++
	}
}
