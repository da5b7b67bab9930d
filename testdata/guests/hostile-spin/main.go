// Command hostile-spin never yields: the kernel must stop it at its
// deadline.
package main

func main() {
	for {
	}
}
