// Command hostile-membomb allocates and touches memory until it dies: the
// kernel must refuse growth past the task's memory limit.
package main

var keep [][]byte

func main() {
	for {
		b := make([]byte, 4<<20)
		for i := range b {
			b[i] = byte(i)
		}
		keep = append(keep, b)
	}
}
