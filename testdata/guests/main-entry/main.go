// Command main-entry ends as its input says, to show that a command built
// with guestbuild's MainEntry (a reactor whose export "run" calls main)
// ends exactly as the same command built as a command: "ok" returns after
// setting a result, "exit0" and "exit3" call os.Exit, "panic" panics,
// "echo:TEXT" writes TEXT to stdout and stderr and sets it as the result,
// "goexit" returns from main while another goroutine waits, and "deadlock"
// waits for nothing.
package main

import (
	"fmt"
	"os"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

// inited is set by init, which makes no host call and writes nothing (so
// a snapshot may keep it).
var inited string

func init() { inited = "init ran" }

func main() {
	in, _ := mandate.InputBytes()
	mode, text, _ := strings.Cut(string(in), ":")
	switch mode {
	case "ok":
		mandate.SetResult([]byte("ok " + inited))
	case "exit0":
		mandate.SetResult([]byte("before exit 0"))
		os.Exit(0)
		mandate.SetResult([]byte("after exit 0"))
	case "exit3":
		os.Exit(3)
	case "panic":
		panic("main-entry: asked to panic")
	case "echo":
		fmt.Fprint(os.Stdout, "out:"+text)
		fmt.Fprint(os.Stderr, "err:"+text)
		mandate.SetResult([]byte(text))
	case "goexit":
		block := make(chan int)
		go func() { <-block }()
		mandate.SetResult([]byte("returned"))
	case "deadlock":
		select {}
	default:
		os.Exit(9)
	}
}
