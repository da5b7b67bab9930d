// Command memory-bomb exhausts linear memory: in mode "slices" it keeps
// allocating 1 MiB slices; in mode "huge" it asks for 1 GiB at once; in
// mode "grow" it grows memory by hand (memory.grow through append of an
// ever larger slice). memory.grow fails past the task's memory limit and
// the task dies out_of_memory (law 10); the kernel and the next task are
// fine.
package main

import (
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

var keep [][]byte

func main() {
	in := attack.ReadInput()
	switch in.Mode {
	case "huge":
		b := make([]byte, 1<<30)
		b[len(b)-1] = 1
		keep = append(keep, b)
	case "grow":
		var b []byte
		for {
			b = append(b, make([]byte, len(b)+1<<20)...)
			b[len(b)-1] = 1
		}
	default:
		for {
			b := make([]byte, 1<<20)
			b[0] = 1
			keep = append(keep, b)
		}
	}
	attack.Set("survived", "EBOMB")
	attack.Finish()
}
