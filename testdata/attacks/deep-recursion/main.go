// Command deep-recursion recurses without end, each frame holding a
// kilobyte, until the Go runtime's stack cannot grow: the stack lives in
// linear memory, so it is bounded by the task's memory limit (law 10).
// The task dies (out_of_memory or failed); the kernel is unaffected.
package main

import (
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

//go:noinline
func down(n int) int {
	var frame [1024]byte
	frame[n%1024] = byte(n)
	return down(n+1) + int(frame[(n+1)%1024])
}

func main() {
	attack.ReadInput()
	attack.Set("depth", "ERECURSION")
	down(0)
	attack.Finish()
}
