// Command ui-xss is the hostile guest of the mandate ui tests: it puts
// markup (<img src=x onerror=alert(1)>, <script>alert(1)</script>,
// <svg/onload=alert(1)>) and
// terminal escapes into everything it can make the kernel record: a
// derived capability's scope, an operation name, a request path, a
// capability it looks up, the name of a capability it passes to a child
// it spawns, both tasks' stdout, stderr and results, and the denials
// each of those earns. Run as the root task (empty input) it spawns
// itself as the child (input "child"), which then uses what it was
// passed. It exits 0; the page must show every string as text.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/net"
)

const (
	img    = `<img src=x onerror=alert(1)>`
	script = `<script>alert(1)</script>`
	svg    = `<svg/onload=alert(1)>`
	term   = "\x1b[31mRED\x1b]8;;http://evil.example\x07link\x1b]8;;\x07\u009b2J"
)

func main() {
	in, _ := mandate.InputBytes()
	if string(in) == "child" {
		child()
		return
	}
	web, err := mandate.Lookup("web")
	must(err)
	// A narrowing whose path carries markup (with a space: refused, the
	// denial quotes it; without: the derived capability's scope holds it).
	_, err = web.Derive(map[string]any{"paths": []string{"/search/" + img}})
	report("derive", err)
	narrowed, err := web.Derive(map[string]any{"paths": []string{"/search/" + svg}})
	report("derive", err)
	// Denied: an operation named with markup, a path outside the grant,
	// a capability that is not there.
	_, err = web.Call("fetch"+script, []byte(`{}`))
	report("op", err)
	_, err = net.Fetch(web, abi.HTTPRequest{Method: "GET", URL: "/admin/" + img + term})
	report("path", err)
	_, err = mandate.Lookup(script + term)
	report("lookup", err)

	kids, err := mandate.Lookup("kids")
	must(err)
	var desc struct {
		Scope struct{ Modules []string } `json:"scope"`
	}
	b, err := kids.Describe()
	must(err)
	must(json.Unmarshal(b, &desc))
	pass := web
	if narrowed.Handle() != 0 {
		pass = narrowed
	}
	input, err := mandate.NewBlob([]byte("child"))
	must(err)
	c, err := mandate.Spawn(kids, abi.SpawnRequest{Module: desc.Scope.Modules[0], Input: input.Handle(), Timeout: "20s",
		Caps: []abi.SpawnCap{{Handle: pass.Handle(), Name: img, Narrow: json.RawMessage(`{}`)}}})
	must(err)
	res, err := c.Wait()
	report("wait", err)
	if !res.IsZero() {
		r, _ := res.Bytes()
		fmt.Printf("the child said: %s\n", r)
	}
	fmt.Println("stdout " + img + script + term)
	fmt.Fprintln(os.Stderr, "stderr "+script+term)
	must(mandate.SetResult([]byte("result " + img + script + term)))
}

// child uses the capability its parent passed under a hostile name.
func child() {
	c, err := mandate.Lookup(img)
	must(err)
	_, err = net.Fetch(c, abi.HTTPRequest{Method: "GET", URL: "/admin/" + svg})
	report("child path", err)
	fmt.Println("child stdout " + script + term)
	must(mandate.SetResult([]byte("child result " + img + term)))
}

func report(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "ui-xss:", err)
		os.Exit(1)
	}
}
