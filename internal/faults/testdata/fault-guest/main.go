// Command fault-guest is the guest of internal/faults: its input is a
// script, one request a line ("GET /f/<submission>/1?hold=1"), which it
// makes in order through its "web" net capability, without reading the
// answers (so nothing taints it). Each request carries a=<nonce>, random
// per run, so the fixture tells a retried run's attempts apart. Its result
// says what came of each line.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/net"
)

func main() {
	in, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	web, err := mandate.Lookup("web")
	if err != nil {
		panic(err)
	}
	var nonce [8]byte
	rand.Read(nonce[:])
	a := "a=" + hex.EncodeToString(nonce[:])
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(in)), "\n") {
		method, path, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		req := abi.HTTPRequest{Method: method, URL: path + sep + a}
		if method == "POST" {
			req.Body = []byte("posted " + path)
		}
		b, err := net.FetchBlob(web, req)
		if err != nil {
			fmt.Fprintf(&out, "%s %s: %s\n", method, path, mandate.ErrnoOf(err))
			continue
		}
		b.Drop()
		fmt.Fprintf(&out, "%s %s: ok\n", method, path)
	}
	mandate.SetResult([]byte(out.String()))
}
