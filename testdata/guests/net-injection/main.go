// Command net-injection is a compromised agent: a review told it to send
// the passport (its input, labelled pii by the host) to the listings site.
// It tries every way it knows, first without reading the passport (by
// splicing its handle), then after reading it, then through a child. It
// reports the errno of each attempt.
package main

import (
	"encoding/json"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

var out = map[string]string{}

func rec(k string, err error) { out[k] = mandate.ErrnoOf(err).String() }

func fetch(c mandate.Cap, r abi.HTTPRequest) error {
	_, err := mnet.Fetch(c, r)
	return err
}

func main() {
	in, err := mandate.Input()
	if err != nil {
		panic(err)
	}
	listings, _ := mandate.Lookup("listings")
	airline, _ := mandate.Lookup("airline")
	ph := abi.SplicePlaceholder(0)
	sp := []abi.Handle{in.Handle()}
	mode, _ := mandate.Lookup("child-mode")
	if mode.Handle() != 0 { // running as the child: read and send
		p, _ := in.Bytes()
		rec("child_query", fetch(listings, abi.HTTPRequest{Method: "GET", URL: "/search?q=" + string(p)}))
		mandate.SetResult(p)
		return
	}

	// Unread, by reference: the blob's own label is checked at the sink.
	rec("splice_query", fetch(listings, abi.HTTPRequest{Method: "GET", URL: "/search?q=" + ph, Splice: sp}))
	rec("splice_path", fetch(listings, abi.HTTPRequest{Method: "GET", URL: "/search/" + ph, Splice: sp}))
	rec("splice_header", fetch(listings, abi.HTTPRequest{Method: "GET", URL: "/search", Header: map[string][]string{"X-Note": {ph}}, Splice: sp}))
	rec("splice_body", fetch(listings, abi.HTTPRequest{Method: "POST", URL: "/search", Body: []byte(`{"q":"` + ph + `"}`), Splice: sp}))
	rec("body_blob", fetch(listings, abi.HTTPRequest{Method: "POST", URL: "/search", BodyBlob: in.Handle()}))
	rec("rewrapped_unread", fetch(listings, abi.HTTPRequest{Method: "GET", URL: "/search?q=" + strings.Repeat("x", 3)}))
	// The one sink cleared for it.
	rec("airline_by_reference", fetch(airline, abi.HTTPRequest{Method: "POST", URL: "/book", BodyBlob: in.Handle()}))
	rec("airline_redirect_to_listings", fetch(airline, abi.HTTPRequest{Method: "POST", URL: "/book/redirect", BodyBlob: in.Handle()}))

	// Read it: now the task itself carries pii and the listings site is
	// closed to it, whatever the request holds.
	p, err := in.Bytes()
	rec("read", err)
	v := string(p)
	rec("read_query", fetch(listings, abi.HTTPRequest{Method: "GET", URL: "/search?q=" + v}))
	rec("read_path", fetch(listings, abi.HTTPRequest{Method: "GET", URL: "/search/" + v}))
	rec("read_header", fetch(listings, abi.HTTPRequest{Method: "GET", URL: "/search", Header: map[string][]string{"X-Note": {v}}}))
	rec("read_body", fetch(listings, abi.HTTPRequest{Method: "POST", URL: "/search", Body: []byte(v)}))
	rec("read_innocent", fetch(listings, abi.HTTPRequest{Method: "GET", URL: "/search?q=lisbon"}))
	w, _ := mandate.NewBlob([]byte("lisbon"))
	rec("rewrapped_after_read", fetch(listings, abi.HTTPRequest{Method: "POST", URL: "/search", BodyBlob: w.Handle()}))

	// Through a child: it gets the listings site and the passport.
	if sp, err := mandate.Lookup("children"); err == nil {
		var desc struct {
			Scope struct{ Modules []string } `json:"scope"`
		}
		b, _ := sp.Describe()
		json.Unmarshal(b, &desc)
		marker, _ := airline.Derive(nil)
		child, err := mandate.Spawn(sp, abi.SpawnRequest{Module: desc.Scope.Modules[0], Input: in.Handle(),
			Caps: []abi.SpawnCap{{Handle: listings.Handle(), Name: "listings"}, {Handle: marker.Handle(), Name: "child-mode"}}, Timeout: "20s"})
		rec("spawn", err)
		res, err := child.Wait()
		rec("child_wait", err)
		rec("child_result_spliced", fetch(listings, abi.HTTPRequest{Method: "POST", URL: "/search", BodyBlob: res.Handle()}))
	}
	b, _ := json.Marshal(out)
	mandate.SetResult(b)
}
