// Command cli-guest is the guest the mandate CLI's scripts run. Its input
// picks what it does:
//
//	hello     sets the result "hello from a guest"
//	fetch     GETs /search?q=x and /admin through the "web" capability and
//	          returns what happened to each
//	redirect  GETs /search/redirect, which redirects to another origin
//	talk      GETs /search?q=x, prints what it read on stdout and stderr,
//	          tries to set it as the result, ignores the refusal and exits 0
//	fail      makes a denied call, then exits 1
//	spin      loops forever
//	membomb   allocates until its memory limit stops it
//	nocap     looks up a capability that was not granted
//	inject    puts terminal escapes (ESC, CSI, OSC 8, BEL, C1, NUL, invalid
//	          UTF-8) into everything it can: an operation name, a path, a
//	          capability name, a derive request, its output and its result,
//	          then exits 1 after a denied call
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/net"
)

func main() {
	in, err := mandate.InputBytes()
	if err != nil {
		fatal(err)
	}
	switch mode := strings.TrimSpace(string(in)); mode {
	case "", "hello":
		fmt.Println("hello on stdout")
		fmt.Fprintln(os.Stderr, "hello on stderr")
		result("hello from a guest\n")
	case "fetch":
		result(get("/search?q=x") + get("/admin"))
	case "redirect":
		result(get("/search/redirect"))
	case "talk":
		fmt.Println("hello before reading")
		answer := get("/search?q=x")
		fmt.Print("the answer: " + answer)
		fmt.Fprint(os.Stderr, "the answer: "+answer)
		mandate.SetResult([]byte(answer)) // refused when untrusted: talk anyway
	case "fail":
		fmt.Print(get("/admin"))
		os.Exit(1)
	case "spin":
		for {
		}
	case "membomb":
		var keep [][]byte
		for {
			keep = append(keep, make([]byte, 1<<20))
		}
	case "inject":
		const bad = "\x1b[31mRED\x1b]8;;http://evil.example\x07link\x1b]8;;\x07\u009b2J\xff\xfe\x07\x00end"
		const badJSON = `\u001b[31mRED\u001b]8;;http://evil.example\u0007link\u009b2J\u0000end`
		web, err := mandate.Lookup("web")
		if err != nil {
			fatal(err)
		}
		web.Call("fetch"+bad, []byte(`{}`))
		web.Call("fetch", []byte(`{"method":"GET","url":"/admin/`+badJSON+`"}`))
		web.Derive(`{"paths":["/x` + badJSON + `"]}`)
		mandate.Lookup("missing" + bad)
		fmt.Println("stdout " + bad)
		fmt.Fprintln(os.Stderr, "stderr "+bad)
		result("result " + bad)
		web.Call("fetch", []byte(`{"method":"GET","url":"/admin`+badJSON+`"}`))
		os.Exit(1)
	case "nocap":
		if _, err := mandate.Lookup("missing"); err != nil {
			fatal(err)
		}
	default:
		fatal(fmt.Errorf("unknown mode %q", mode))
	}
}

func get(path string) string {
	c, err := net.NewClient("web")
	if err != nil {
		return path + ": " + describe(err) + "\n"
	}
	resp, err := c.Get(path)
	if err != nil {
		return path + ": " + describe(err) + "\n"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%s: %d %s\n", path, resp.StatusCode, b)
}

func describe(err error) string {
	if errors.Is(err, abi.EDENIED) {
		return "denied: " + err.Error()
	}
	return "error: " + err.Error()
}

func result(s string) {
	if err := mandate.SetResult([]byte(s)); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "cli-guest:", err)
	os.Exit(1)
}
