// Command origin-confusion tries to reach another origin, or another path,
// through a net capability for http://granted.example:PORT/api: userinfo,
// other ports, look-alike and suffix hosts, IDNA, case, trailing dots,
// network-path references, dot segments plain and encoded, and redirects
// (an open redirect on the granted server pointing at the evil one, at a
// path out of scope, in a loop). Origins and paths are canonicalised and
// redirects followed only in scope (caps/net): the evil server never hears
// a thing.
package main

import (
	"net/url"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.ReadInput()
	web := attack.Must(mandate.Lookup("web"))
	P, E := in.GrantedPort, in.EvilPort
	try := func(k, u string) {
		r, err := mnet.Fetch(web, abi.HTTPRequest{Method: "GET", URL: u})
		attack.Rec(k, err)
		if err == nil {
			attack.Note(k, string(r.Body))
		}
	}
	try("evil_absolute", in.Evil+"/api")
	try("userinfo", "http://granted.example:"+P+"@evil.example:"+E+"/api")
	try("userinfo_same", "http://user:pw@granted.example:"+P+"/api")
	try("evil_port", "http://granted.example:"+E+"/api")
	try("default_port", "http://granted.example/api")
	try("suffix_host", "http://granted.example.evil.example:"+P+"/api")
	try("prefix_host", "http://evilgranted.example:"+P+"/api")
	try("subdomain", "http://x.granted.example:"+P+"/api")
	try("idna_lookalike", "http://grаnted.example:"+P+"/api") // Cyrillic a
	try("punycode", "http://xn--grnted-4ya.example:"+P+"/api")
	try("ip_literal", "http://127.0.0.1:"+P+"/api")
	try("network_path", "//evil.example:"+E+"/api")
	try("backslash_authority", "http://granted.example:"+P+"\\@evil.example:"+E+"/api")
	try("https_scheme", "https://granted.example:"+P+"/api")
	try("case", "HTTP://GRANTED.EXAMPLE:"+P+"/api/case")
	try("trailing_dot", "http://granted.example.:"+P+"/api/dot")
	try("dotdot", "/api/../admin")
	try("dotdot_encoded", "/api/%2e%2e/admin")
	try("dotdot_mixed", "/api/.%2E/admin")
	try("encoded_slash", "/api%2f..%2fadmin")
	try("dotdot_semicolon", "/api/..;/admin")
	try("no_boundary", "/apix")
	try("redirect_evil", "/api/redirect?to="+url.QueryEscape(in.Evil+"/stolen"))
	try("redirect_evil_userinfo", "/api/redirect?to="+url.QueryEscape("http://granted.example:"+P+"@evil.example:"+E+"/"))
	try("redirect_protocol_relative", "/api/redirect?to="+url.QueryEscape("//evil.example:"+E+"/"))
	try("redirect_out_of_paths", "/api/redirect?to="+url.QueryEscape("/admin"))
	try("redirect_dotdot", "/api/redirect?to="+url.QueryEscape("/api/../admin"))
	try("redirect_loop", "/api/redirect?to="+url.QueryEscape("/api/redirect?to=/api/redirect%3Fto%3D/api/redirect%253Fto%253D/api/redirect"))
	try("redirect_in_scope", "/api/redirect?to="+url.QueryEscape("/api/landed"))
	attack.Finish()
}
