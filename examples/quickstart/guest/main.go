// Command guest is the quickstart's tool: it holds one net capability,
// "flights", and tries five things. The kernel allows the first and
// refuses the rest; the guest reports what happened to each, one line per
// attempt, as its result.
package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

var report strings.Builder

func say(format string, args ...any) { fmt.Fprintf(&report, format+"\n", args...) }

func outcome(what string, err error) {
	if err == nil {
		say("allowed  %s", what)
		return
	}
	var e *mandate.Error
	if errors.As(err, &e) {
		say("denied   %s: %s (%s)", what, e.Errno, e.Reason)
		return
	}
	say("failed   %s: %v", what, err)
}

func main() {
	// Where the ungranted origin lives comes in as input: the guest knows
	// the address, it just has no capability for it.
	evil, _ := mandate.InputBytes()

	flights, err := mandate.Lookup("flights")
	if err != nil {
		panic(err)
	}
	// Plain net/http, through the capability.
	client := &http.Client{Transport: &mnet.Transport{Cap: flights}}

	// 1. Allowed: GET /search on the granted origin.
	resp, err := client.Get("/search?from=SFO&to=LIS")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		say("allowed  GET /search -> %d %q", resp.StatusCode, strings.TrimSpace(string(body)))
	} else {
		outcome("GET /search", err)
	}

	// 2. Denied: the same capability, another origin.
	_, err = mnet.Fetch(flights, abi.HTTPRequest{Method: "GET", URL: string(evil) + "/collect?passport=X123"})
	outcome("GET "+string(evil)+"/collect (an origin never granted)", err)

	// 3. Denied: a path outside the granted prefix, even when dressed up.
	_, err = mnet.Fetch(flights, abi.HTTPRequest{Method: "GET", URL: "/search/../admin"})
	outcome("GET /search/../admin (outside the granted paths)", err)

	// 4. Denied: asking for a wider capability (POST was never granted).
	_, err = flights.Derive(map[string]any{"methods": []string{"GET", "POST"}})
	outcome("derive methods [GET POST] (a widening)", err)

	// 5. A narrower capability works until it is revoked.
	oneway, err := flights.Derive(map[string]any{"paths": []string{"/search/oneway"}})
	outcome("derive paths [/search/oneway] (a narrowing)", err)
	if err == nil {
		_, err = mnet.Fetch(oneway, abi.HTTPRequest{Method: "GET", URL: "/search/oneway?to=LIS"})
		outcome("GET /search/oneway with the narrowed capability", err)
		outcome("revoke the narrowed capability", oneway.Revoke())
		_, err = mnet.Fetch(oneway, abi.HTTPRequest{Method: "GET", URL: "/search/oneway?to=LIS"})
		outcome("GET /search/oneway after revocation", err)
	}
	mandate.SetResult([]byte(report.String()))
}
