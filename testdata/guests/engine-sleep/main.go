// Command engine-sleep sleeps for an hour: a guest blocked in the host
// (poll_oneoff) rather than spinning.
package main

import "time"

func main() {
	time.Sleep(time.Hour)
}
