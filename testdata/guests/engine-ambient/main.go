// Command engine-ambient probes for ambient authority and prints one
// "probe: result" line per attempt. Every probe should fail or be empty.
package main

import (
	"fmt"
	"net"
	"os"
	"strings"
)

func main() {
	_, err := os.ReadDir("/")
	fmt.Printf("readdir_root: %v\n", err != nil)
	_, err = os.ReadDir(".")
	fmt.Printf("readdir_dot: %v\n", err != nil)
	_, err = os.ReadFile("/etc/passwd")
	fmt.Printf("readfile: %v\n", err != nil)
	_, err = os.Create("/tmp/mandate-ambient-probe")
	fmt.Printf("create: %v\n", err != nil)
	fmt.Printf("environ: %d\n", len(os.Environ()))
	fmt.Printf("getenv_home: %q\n", os.Getenv("HOME"))
	fmt.Printf("getenv_path: %q\n", os.Getenv("PATH"))
	fmt.Printf("args: %s\n", strings.Join(os.Args, ","))
	_, err = net.Dial("tcp", "127.0.0.1:80")
	fmt.Printf("dial: %v\n", err != nil)
	// net.Listen succeeds on wasip1, but only on the Go runtime's
	// in-process fake network. A real socket would be a preopened fd.
	for fd := uintptr(3); fd < 16; fd++ {
		if _, err = net.FileListener(os.NewFile(fd, "sock")); err == nil {
			break
		}
	}
	fmt.Printf("filelistener: %v\n", err != nil)
	buf := make([]byte, 16)
	n, _ := os.Stdin.Read(buf)
	fmt.Printf("stdin: %d\n", n)
}
