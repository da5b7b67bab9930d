package net_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	gonet "net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// This file attacks the net capability end to end, through a real guest:
// testdata/guests/net-attacker runs under the kernel with four net grants
// on a loopback "granted" origin and tries to reach a loopback "evil"
// origin, escape its paths, smuggle headers, follow redirects out of
// scope, overflow limits, widen its capabilities and read the injected
// secret. The servers record everything they receive; the test checks the
// guest's errno for each attack AND what actually reached the wire.
// TestGuestEchoBypass and TestGuestAttackGaps hold attacks that currently
// succeed against caps/net; they are skipped with a "BUG:" reason.

const (
	attackerSecret  = "mandate-e2e-secret-Zq7vX3kP"
	attackerEnvVar  = "NET_ATTACKER_TOKEN"
	attackerMaxResp = 4096
)

// attackerPattern is the body the guest splices by blob (same as the
// guest's pattern).
func attackerPattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// Attacks in the order the guest performs them (revoke_root last: it
// revokes the root grant every other attack uses).
var attackOrder = []string{
	"baseline",
	// 1. origins
	"abs_evil", "userinfo", "userinfo_same_host", "backslash_authority", "fragment_authority",
	"query_authority", "scheme_https", "port_change", "port_default", "ip_literal",
	"host_upper", "scheme_upper", "trailing_dot", "double_dot", "suffix_host", "prefix_host",
	"percent_host", "no_scheme", "file_scheme", "proto_relative", "proto_backslash", "space_in_url",
	// 2. paths
	"path_dotdot", "path_enc_dotdot", "path_enc_dotdot_uc", "path_mixed_dot", "path_enc_slash",
	"path_enc_slash_uc", "path_enc_backslash", "path_backslash", "path_network", "path_no_boundary",
	"path_dotdot_semi", "path_dotdot_nul", "path_double_enc", "path_deep_dotdot", "path_dotdot_end",
	"path_case", "path_abs_dotdot", "path_bad_escape", "path_normalised", "path_query_dotdot",
	"path_fragment", "path_unicode_dots", "path_fullwidth_dots",
	"path_iis_unicode", "path_semicolon_seg", "port_leading_zero", "port_plus",
	// 3. methods
	"method_post", "method_lower", "method_mixed", "method_head", "method_connect", "method_trace",
	"method_track", "method_space", "method_crlf",
	// 4. headers
	"hdr_injected", "hdr_injected_lower", "hdr_host", "hdr_te", "hdr_cl", "hdr_connection",
	"hdr_cookie", "hdr_proxy_auth", "hdr_crlf_value", "hdr_lf_value", "hdr_nul_value",
	"hdr_crlf_name", "hdr_too_many", "hdr_pseudo", "hdr_benign", "echo_headers", "echo_body", "echo_location", "echo_trailer", "cookie_stripped",
	// 5. redirects
	"redir_evil", "redir_evil_proto", "redir_userinfo", "redir_https", "redir_admin",
	"redir_dotdot", "redir_loop", "redir_ok", "redir_307_evil", "redir_303_get",
	// 6. sizes and blobs
	"resp_big", "resp_big_chunked", "resp_many_headers", "resp_huge_header", "req_big_inline", "req_big_blob", "blob_invented",
	"blob_is_cap", "blob_and_body", "blob_ok",
	// 7. timeout
	"hang", "hang_body", "after_hang",
	// 8. narrowing
	"derive_widen_paths", "derive_widen_response", "derive_widen_methods", "derive_widen_timeout",
	"derive_widen_private", "derive_widen_request", "derive_widen_redirects", "derive_other_origin", "derive_drop_unknown", "dropped_header",
	"narrow_path", "narrow_private", "revoke_parent",
	// 9. private addresses
	"private_dial",
	"describe",
	"revoke_root",
}

// attackWant is the errno each result key must have (and the status, for
// successful fetches).
var attackWant = map[string]struct {
	errno  string
	status int
}{
	"baseline": {"ESUCCESS", 200},

	"abs_evil":            {"EDENIED", 0},
	"userinfo":            {"EDENIED", 0},
	"userinfo_same_host":  {"EDENIED", 0},
	"backslash_authority": {"EDENIED", 0},
	"fragment_authority":  {"EDENIED", 0},
	"query_authority":     {"EDENIED", 0},
	"scheme_https":        {"EDENIED", 0},
	"port_change":         {"EDENIED", 0},
	"port_default":        {"EDENIED", 0},
	"ip_literal":          {"EDENIED", 0},
	"host_upper":          {"ESUCCESS", 200}, // same origin, other spelling
	"scheme_upper":        {"ESUCCESS", 200},
	"trailing_dot":        {"ESUCCESS", 200},
	"double_dot":          {"EDENIED", 0},
	"suffix_host":         {"EDENIED", 0},
	"prefix_host":         {"EDENIED", 0},
	"percent_host":        {"EDENIED", 0},
	"no_scheme":           {"EINVAL", 0},
	"file_scheme":         {"EDENIED", 0},
	"proto_relative":      {"EDENIED", 0},
	"proto_backslash":     {"EDENIED", 0},
	"space_in_url":        {"EINVAL", 0},

	"path_dotdot":         {"EDENIED", 0},
	"path_enc_dotdot":     {"EDENIED", 0},
	"path_enc_dotdot_uc":  {"EDENIED", 0},
	"path_mixed_dot":      {"EDENIED", 0},
	"path_enc_slash":      {"EDENIED", 0},
	"path_enc_slash_uc":   {"EDENIED", 0},
	"path_enc_backslash":  {"EDENIED", 0},
	"path_backslash":      {"EDENIED", 0},
	"path_network":        {"EDENIED", 0},
	"path_no_boundary":    {"EDENIED", 0},
	"path_dotdot_semi":    {"EDENIED", 0},
	"path_dotdot_nul":     {"EDENIED", 0},
	"path_double_enc":     {"EDENIED", 0},
	"path_deep_dotdot":    {"EDENIED", 0},
	"path_dotdot_end":     {"EDENIED", 0},
	"path_case":           {"EDENIED", 0},
	"path_abs_dotdot":     {"EDENIED", 0},
	"path_bad_escape":     {"EINVAL", 0},
	"path_normalised":     {"ESUCCESS", 200}, // sent as /search/b/c
	"path_query_dotdot":   {"ESUCCESS", 200}, // queries are not paths
	"path_fragment":       {"ESUCCESS", 200}, // the fragment is dropped
	"path_unicode_dots":   {"ESUCCESS", 200}, // "‥" is not a dot segment; sent escaped
	"path_fullwidth_dots": {"ESUCCESS", 200},

	"method_post":    {"EDENIED", 0},
	"method_lower":   {"ESUCCESS", 200},
	"method_mixed":   {"ESUCCESS", 200},
	"method_head":    {"EDENIED", 0},
	"method_connect": {"EDENIED", 0},
	"method_trace":   {"EDENIED", 0},
	"method_track":   {"EDENIED", 0},
	"method_space":   {"EINVAL", 0},
	"method_crlf":    {"EINVAL", 0},

	"hdr_injected":       {"EDENIED", 0},
	"hdr_injected_lower": {"EDENIED", 0},
	"hdr_host":           {"EDENIED", 0},
	"hdr_te":             {"EDENIED", 0},
	"hdr_cl":             {"EDENIED", 0},
	"hdr_connection":     {"EDENIED", 0},
	"hdr_cookie":         {"EDENIED", 0},
	"hdr_proxy_auth":     {"EDENIED", 0},
	"hdr_crlf_value":     {"EINVAL", 0},
	"hdr_lf_value":       {"EINVAL", 0},
	"hdr_nul_value":      {"EINVAL", 0},
	"hdr_crlf_name":      {"EINVAL", 0},
	"hdr_pseudo":         {"EINVAL", 0},
	"hdr_too_many":       {"ELIMIT", 0},
	"echo_trailer":       {"ESUCCESS", 200}, // trailers never reach the guest
	"resp_huge_header":   {"ELIMIT", 0},
	"path_iis_unicode":   {"EINVAL", 0},
	"path_semicolon_seg": {"EDENIED", 0},
	"port_leading_zero":  {"EDENIED", 0},
	"port_plus":          {"EDENIED", 0},
	"hdr_benign":         {"ESUCCESS", 200},
	"echo_headers":       {"EDENIED", 0},
	"echo_body":          {"EDENIED", 0},
	"echo_location":      {"EDENIED", 0},
	"cookie_stripped":    {"ESUCCESS", 200},

	"redir_evil":       {"EDENIED", 0},
	"redir_evil_proto": {"EDENIED", 0},
	"redir_userinfo":   {"EDENIED", 0},
	"redir_https":      {"EDENIED", 0},
	"redir_admin":      {"EDENIED", 0},
	"redir_dotdot":     {"EDENIED", 0},
	"redir_loop":       {"ELIMIT", 0},
	"redir_ok":         {"ESUCCESS", 200},
	"redir_307_evil":   {"EDENIED", 0},
	"redir_303_get":    {"EDENIED", 0},

	"resp_big":          {"ELIMIT", 0},
	"resp_big_chunked":  {"ELIMIT", 0},
	"resp_many_headers": {"ELIMIT", 0},
	"req_big_inline":    {"ELIMIT", 0},
	"req_big_blob":      {"ELIMIT", 0},
	"blob_invented":     {"EBADHANDLE", 0},
	"blob_is_cap":       {"EWRONGTYPE", 0},
	"blob_and_body":     {"EINVAL", 0},
	"blob_ok":           {"ESUCCESS", 200},

	"hang":       {"ETIMEDOUT", 0},
	"hang_body":  {"ETIMEDOUT", 0},
	"after_hang": {"ESUCCESS", 200},

	"derive_widen_paths":             {"EDENIED", 0},
	"derive_widen_response":          {"EDENIED", 0},
	"derive_widen_methods":           {"EDENIED", 0},
	"derive_widen_timeout":           {"EDENIED", 0},
	"derive_widen_private":           {"EDENIED", 0},
	"derive_other_origin":            {"EDENIED", 0},
	"derive_drop_unknown":            {"EINVAL", 0},
	"dropped_header.derive":          {"ESUCCESS", 0},
	"dropped_header.set":             {"EDENIED", 0},
	"dropped_header.set_lower":       {"EDENIED", 0},
	"dropped_header.plain":           {"ESUCCESS", 200},
	"dropped_header.rederive":        {"ESUCCESS", 0}, // drops nothing more; brings nothing back
	"dropped_header.rederived_fetch": {"ESUCCESS", 200},
	"dropped_header.rederived_set":   {"EDENIED", 0},
	"derive_widen_request":           {"EDENIED", 0},
	"derive_widen_redirects":         {"EDENIED", 0},
	"narrow_path.derive":             {"ESUCCESS", 0},
	"narrow_path.outside":            {"EDENIED", 0},
	"narrow_path.no_boundary":        {"EDENIED", 0},
	"narrow_path.dotdot":             {"EDENIED", 0},
	"narrow_path.inside":             {"ESUCCESS", 200},
	"narrow_path.rewiden":            {"EDENIED", 0},
	"narrow_private.derive":          {"ESUCCESS", 0},
	"narrow_private.fetch":           {"EDENIED", 0},
	"revoke_parent.parent":           {"ESUCCESS", 0},
	"revoke_parent.child":            {"ESUCCESS", 0},
	"revoke_parent.before":           {"ESUCCESS", 200},
	"revoke_parent.revoke":           {"ESUCCESS", 0},
	"revoke_parent.child_fetch":      {"EREVOKED", 0},
	"revoke_parent.child_derive":     {"EREVOKED", 0},
	"revoke_parent.root_fetch":       {"ESUCCESS", 200},

	"private_dial": {"EDENIED", 0},
	"describe":     {"ESUCCESS", 0},

	"revoke_root.child":       {"ESUCCESS", 0},
	"revoke_root.revoke":      {"ESUCCESS", 0},
	"revoke_root.child_fetch": {"EREVOKED", 0},
	"revoke_root.root_fetch":  {"EREVOKED", 0},
}

// Paths the granted server must never see: every request for them was
// refused before it was sent.
var neverSent = []string{
	"/search/private", "/search/narrow-private", "/search/dropped-set", "/search/rev/after",
	"/search/late", "/search/other", "/search/narrowx", "/search/landing-https",
}

type attackResult struct {
	Errno  string `json:"errno"`
	Status int    `json:"status"`
	Body   string `json:"body"`
	Detail string `json:"detail"`
}

func buildAttacker(t *testing.T) []byte {
	t.Helper()
	wasm, _, err := guestbuild.Build(context.Background(), filepath.Join("..", "..", "testdata", "guests", "net-attacker"), guestbuild.Options{})
	if err != nil {
		t.Fatalf("building net-attacker: %v", err)
	}
	return wasm
}

// attackEnv is a kernel with the net kind, the two servers and the
// attacker's grants.
type attackEnv struct {
	k             *kernel.Kernel
	mod           sandbox.Module
	grants        []kernel.GrantSpec
	granted, evil *kerneltest.Recorder
	grantedOrigin string
	evilOrigin    string
	grantedHost   string
	hangHeld      *atomic.Int64 // nanoseconds the hanging request was held
	logs          *kerneltest.Buffer
}

func newAttackEnv(t *testing.T) *attackEnv {
	t.Helper()
	ctx := context.Background()

	// The evil origin: anything that reaches it is a failure.
	evil := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		fmt.Fprint(w, "evil")
	})
	t.Cleanup(evil.Close)
	evilOrigin := "http://evil.example:" + evil.Port()

	// The granted origin.
	quit := make(chan struct{})
	var hangHeld atomic.Int64 // nanoseconds the hanging request was held
	var grantedOrigin string
	granted := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, seen kerneltest.Request) {
		switch p := r.URL.Path; p {
		case "/search/echo-headers":
			for name, vs := range r.Header {
				w.Header()["X-Echo-"+name] = vs
			}
		case "/search/echo-body":
			_ = r.Header.Write(w)
			return
		case "/search/echo-location":
			http.Redirect(w, r, "/search/landing?tok="+r.Header.Get("Authorization"), http.StatusFound)
			return
		case "/search/echo-header-name":
			tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			w.Header()["X-Token-"+tok] = []string{"1"}
		case "/search/echo-gzip":
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				_ = r.Header.Write(w)
				return
			}
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_ = r.Header.Write(zw)
			_ = zw.Close()
			return
		case "/search/echo-range":
			h := r.Header.Clone()
			h.Del("Range")
			var dump bytes.Buffer
			_ = h.Write(&dump)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(dump.Bytes()))
			return
		case "/search/many-headers":
			for i := 0; i < 200; i++ {
				w.Header().Set(fmt.Sprintf("X-H-%d", i), "v")
			}
		case "/search/hang-body":
			w.Header().Set("Content-Length", "100")
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-quit:
			}
			return
		case "/search/echo-trailer":
			w.Header().Set("Trailer", "X-Echo")
			_, _ = io.WriteString(w, "body")
			w.Header().Set("X-Echo", r.Header.Get("Authorization"))
			return
		case "/search/huge-header":
			w.Header().Set("X-Huge", strings.Repeat("h", 100<<10))
		case "/search/giant-header":
			w.Header().Set("X-Giant", strings.Repeat("g", 200<<10))
		case "/search/cookie":
			w.Header().Set("Set-Cookie", "session=minted-from-the-credential")
		case "/search/r-evil":
			http.Redirect(w, r, evilOrigin+"/x", http.StatusFound)
			return
		case "/search/r-evil-proto":
			w.Header().Set("Location", "//evil.example:"+evil.Port()+"/search")
			w.WriteHeader(http.StatusFound)
			return
		case "/search/r-userinfo":
			w.Header().Set("Location", grantedOrigin+"@evil.example:"+evil.Port()+"/search")
			w.WriteHeader(http.StatusFound)
			return
		case "/search/r-https":
			w.Header().Set("Location", "https://"+strings.TrimPrefix(grantedOrigin, "http://")+"/search/landing-https")
			w.WriteHeader(http.StatusFound)
			return
		case "/search/r-admin":
			w.Header().Set("Location", "/admin")
			w.WriteHeader(http.StatusFound)
			return
		case "/search/r-dotdot":
			w.Header().Set("Location", "/search/../admin")
			w.WriteHeader(http.StatusFound)
			return
		case "/search/r-loop":
			w.Header().Set("Location", "/search/r-loop")
			w.WriteHeader(http.StatusFound)
			return
		case "/search/r-ok":
			w.Header().Set("Location", "/search/landing")
			w.WriteHeader(http.StatusFound)
			return
		case "/search/upload/r307-evil":
			w.Header().Set("Location", evilOrigin+"/upload")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		case "/search/upload/r303":
			w.Header().Set("Location", "/search/upload/landing")
			w.WriteHeader(http.StatusSeeOther)
			return
		case "/search/big":
			w.Header().Set("Content-Length", fmt.Sprint(2*attackerMaxResp))
			_, _ = w.Write(bytes.Repeat([]byte("A"), 2*attackerMaxResp))
			return
		case "/search/big-chunked":
			for i := 0; i < 8; i++ {
				_, _ = w.Write(bytes.Repeat([]byte("B"), attackerMaxResp/4))
				w.(http.Flusher).Flush()
			}
			return
		case "/search/hang":
			t0 := time.Now()
			select {
			case <-r.Context().Done():
			case <-quit:
			}
			hangHeld.Store(int64(time.Since(t0)))
			return
		case "/search/upload":
			fmt.Fprintf(w, "got %d bytes", len(seen.Body))
			return
		}
		fmt.Fprintf(w, "ok %s %s", r.Method, r.URL.Path)
	})
	t.Cleanup(granted.Close)
	t.Cleanup(func() { close(quit) }) // runs before Close: release a hanging handler
	grantedOrigin = "http://granted.example:" + granted.Port()
	grantedHost := "granted.example:" + granted.Port()

	// Both names resolve to loopback; only grants with allow_private may
	// dial them.
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "granted.example", "evil.example":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, &gonet.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	kind := net.New(net.WithLookup(lookup))
	t.Cleanup(kind.CloseIdleConnections)

	logs := &kerneltest.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})
	eng := testengine.New(t)
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{kind}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}

	gc := kindapi.GrantContext{LookupEnv: func(name string) (string, bool) {
		if name == attackerEnvVar {
			return attackerSecret, true
		}
		return "", false
	}}
	inject := `"headers":[{"name":"Authorization","env":"` + attackerEnvVar + `","prefix":"Bearer "}]`
	grant := func(name, extra string) kernel.GrantSpec {
		t.Helper()
		spec := `{"origin":"` + grantedOrigin + `",` + inject + extra + `}`
		scope, err := k.Grant("net", gc, []byte(spec))
		if err != nil {
			t.Fatalf("grant %s %s: %v", name, spec, err)
		}
		return kernel.GrantSpec{Name: name, Kind: "net", Scope: scope}
	}
	grants := []kernel.GrantSpec{
		grant("web", `,"methods":["GET"],"paths":["/search"],"max_response_bytes":4096,"max_redirects":3,"timeout":"10s","allow_private":true`),
		grant("upload", `,"methods":["POST"],"paths":["/search/upload"],"max_request_bytes":1024,"timeout":"10s","allow_private":true`),
		grant("slow", `,"methods":["GET"],"paths":["/search"],"timeout":"500ms","allow_private":true`),
		grant("public", `,"methods":["GET"],"paths":["/search"],"timeout":"10s","allow_private":false`),
	}

	mod, err := eng.Compile(ctx, buildAttacker(t))
	if err != nil {
		t.Fatal(err)
	}
	return &attackEnv{
		k: k, mod: mod, grants: grants, granted: granted, evil: evil,
		grantedOrigin: grantedOrigin, evilOrigin: evilOrigin, grantedHost: grantedHost,
		hangHeld: &hangHeld, logs: logs,
	}
}

// run runs the attacker once with attacks and returns its task, raw
// result and decoded result.
func (e *attackEnv) run(t *testing.T, attacks []string) (*kernel.Task, []byte, map[string]attackResult) {
	t.Helper()
	input, _ := json.Marshal(map[string]any{"granted": e.grantedOrigin, "evil": e.evilOrigin, "attacks": attacks})
	task, err := e.k.Run(context.Background(), kernel.TaskSpec{
		Module: e.mod, Principal: "mallory", Grants: e.grants, Input: input,
		Limits: kernel.Limits{Timeout: time.Minute},
	})
	if err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, task.Stderr().String())
	}
	raw, ok := task.Result()
	if !ok {
		t.Fatalf("no result; stderr: %s", task.Stderr().String())
	}
	var got map[string]attackResult
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	return task, raw, got
}

func TestGuestAttacks(t *testing.T) {
	start := time.Now()
	e := newAttackEnv(t)
	evil, granted, k, logs := e.evil, e.granted, e.k, e.logs
	grantedOrigin, grantedHost := e.grantedOrigin, e.grantedHost
	runStart := time.Now()
	task, raw, got := e.run(t, attackOrder)
	runTime := time.Since(runStart)

	// Each attack's errno (and status for what was allowed).
	for key, w := range attackWant {
		g, ok := got[key]
		if !ok {
			t.Errorf("%s: no result", key)
			continue
		}
		if g.Errno != w.errno || (w.status != 0 && g.Status != w.status) {
			t.Errorf("%s: got %s status %d (body %q), want %s status %d", key, g.Errno, g.Status, g.Body, w.errno, w.status)
		}
	}
	for key, g := range got {
		if _, ok := attackWant[key]; !ok {
			t.Errorf("%s: unexpected result %+v", key, g)
		}
	}
	if t.Failed() {
		t.Logf("guest stdout:\n%s", redactSecret(task.Stdout().String()))
	}

	// Details the guest saw.
	if d := got["cookie_stripped"].Detail; d != "set-cookie=false" {
		t.Errorf("cookie_stripped: %s; Set-Cookie must be removed before the guest sees the response", d)
	}
	for key, body := range map[string]string{
		"method_lower":    "ok GET /search/method", // sent upper-cased
		"method_mixed":    "ok GET /search/method",
		"path_normalised": "ok GET /search/b/c",
		"path_fragment":   "ok GET /search",
		"redir_ok":        "ok GET /search/landing",
		"blob_ok":         "got 700 bytes",
		"host_upper":      "ok GET /search/host-upper",
		"trailing_dot":    "ok GET /search/trailing-dot",
	} {
		if got[key].Body != body {
			t.Errorf("%s: body %q, want %q", key, got[key].Body, body)
		}
	}
	if d := got["describe"].Detail; !strings.Contains(d, `"Authorization"`) || !strings.Contains(d, grantedOrigin) {
		t.Errorf("describe: %s; want the origin and the injected header's name", d)
	}

	// Nothing ever reached the evil origin.
	if n := len(evil.Requests()); n != 0 {
		t.Errorf("the evil origin received %d requests: %+v", n, evil.Requests())
	}

	// What reached the granted origin stayed within the scope.
	seen := map[string]int{}
	var uploads [][]byte
	for _, r := range granted.Requests() {
		seen[r.Path]++
		if r.Path != "/search" && !strings.HasPrefix(r.Path, "/search/") {
			t.Errorf("the granted server saw a path outside /search: %q (request URI %q)", r.Path, r.RequestURI)
		}
		if !strings.HasPrefix(r.RequestURI, "/search") {
			t.Errorf("the granted server saw request URI %q", r.RequestURI)
		}
		for _, seg := range strings.Split(r.Path, "/") {
			if seg == ".." || seg == "." || strings.Contains(seg, "\\") {
				t.Errorf("the granted server saw a dot segment or backslash: %q", r.Path)
			}
		}
		if r.Host != grantedHost {
			t.Errorf("%s: Host %q, want %q", r.RequestURI, r.Host, grantedHost)
		}
		if _, ok := r.Header["X-Evil"]; ok {
			t.Errorf("%s: the server received a smuggled X-Evil header", r.RequestURI)
		}
		for _, h := range []string{"Cookie", "Proxy-Authorization", "Transfer-Encoding", "X-Test"} {
			if _, ok := r.Header[h]; ok {
				t.Errorf("%s: the server received header %s the guest was refused", r.RequestURI, h)
			}
		}
		auth := r.Header.Values("Authorization")
		switch r.Path {
		case "/search/dropped":
			if len(auth) != 0 {
				t.Errorf("%s: a capability that dropped Authorization sent %d values of it", r.RequestURI, len(auth))
			}
		default:
			if len(auth) != 1 || auth[0] != "Bearer "+attackerSecret {
				t.Errorf("%s: Authorization is not exactly the injected value (%d values)", r.RequestURI, len(auth))
			}
		}
		switch r.Path {
		case "/search/hdr":
			if r.Header.Get("X-Custom") != "fine" {
				t.Errorf("/search/hdr without X-Custom: only the benign header request may reach it")
			}
		case "/search/method":
			if r.Method != http.MethodGet {
				t.Errorf("/search/method with method %q", r.Method)
			}
		case "/search/upload":
			uploads = append(uploads, r.Body)
		}
	}
	for _, p := range neverSent {
		if seen[p] != 0 {
			t.Errorf("the granted server saw %s %d times; every request for it was refused", p, seen[p])
		}
	}
	for p, n := range map[string]int{
		"/search/hdr": 1, "/search/method": 2, "/search/dropped": 2, "/search/landing": 1,
		"/search/narrow/ok": 1, "/search/rev/before": 1, "/search/after-hang": 1, "/search/hang": 1,
		"/search/r-loop": 4, // the first request and max_redirects (3) hops
	} {
		if seen[p] != n {
			t.Errorf("the granted server saw %s %d times, want %d", p, seen[p], n)
		}
	}
	if len(uploads) != 1 || !bytes.Equal(uploads[0], attackerPattern(700)) {
		t.Errorf("uploads received: %d; want exactly the spliced blob's 700 bytes", len(uploads))
	}
	if held := time.Duration(e.hangHeld.Load()); held < 400*time.Millisecond || held >= net.DefaultTimeout {
		t.Errorf("the hanging request was held %v; want the grant's 500ms timeout, not the default", held)
	}

	// The secret never reached the guest, nor the logs or the graph.
	g, _ := json.Marshal(k.Graph())
	for what, s := range map[string]string{
		"result": string(raw), "stdout": task.Stdout().String(), "stderr": task.Stderr().String(),
		"last_error": task.LastError(), "logs": logs.String(), "graph": string(g),
	} {
		if containsSecret(s) {
			t.Errorf("the secret appears in the guest's %s", what)
		}
	}
	if task.Stdout().Truncated {
		t.Error("the guest's stdout was truncated: the secret check did not see everything")
	}
	if d := task.Denials(); d < 60 {
		t.Errorf("task recorded %d denials, want every refusal counted", d)
	}
	t.Logf("%d results, %d requests reached the granted server; guest run %v, test %v", len(got), len(granted.Requests()), runTime, time.Since(start))
}

// redactSecret replaces every case-insensitive occurrence of the
// kindapi.Secret, so a failure message does not spread it.
func redactSecret(s string) string {
	low, sec := strings.ToLower(s), strings.ToLower(attackerSecret)
	var b strings.Builder
	for {
		i := strings.Index(low, sec)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString("[SECRET]")
		s, low = s[i+len(sec):], low[i+len(sec):]
	}
}

// containsSecret reports whether s holds the secret in any letter case (a
// header name echo comes back canonicalised).
func containsSecret(s string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(attackerSecret))
}

// TestGuestEchoBypass: a server that reflects the request's credential
// must never let the guest read it. The kind refuses a response whose
// headers, body or Location contain the injected secret verbatim; these
// attacks get the echo past that check with nothing but what the guest
// controls or what ordinary servers do. Each leaked the secret to the
// guest before caps/net refused them (regression tests).
func TestGuestEchoBypass(t *testing.T) {
	e := newAttackEnv(t)
	for _, tc := range []struct {
		attack string
		errno  string // "" = any, as long as nothing leaks
		was    string // what the attack got before the fix
	}{
		{"echo_header_name", "EDENIED", "was: caps/net/fetch.go readResponse checked response header values for an echoed secret but not header names; " +
			"a server reflecting the credential as a header name (X-Token-<secret>) hands it to the guest, only re-cased by MIME canonicalisation"},
		{"echo_gzip", "EDENIED", "was: a guest that set Accept-Encoding: gzip turns off the transport's transparent decompression, so the verbatim echo check " +
			"in caps/net/fetch.go readResponse runs on compressed bytes; the guest gunzips the echoed Authorization header"},
		{"echo_range", "EDENIED", "was: a guest could set Range, so a server that honours it (http.ServeContent) returns the echo in 16-byte slices, none of which " +
			"contains the whole secret; the guest reassembles the credential (caps/net/fetch.go readResponse checks each response alone)"},
	} {
		t.Run(tc.attack, func(t *testing.T) {
			task, raw, got := e.run(t, []string{tc.attack})
			r := got[tc.attack]
			if tc.errno != "" && r.Errno != tc.errno {
				t.Errorf("%s: errno %s status %d, want %s", tc.attack, r.Errno, r.Status, tc.errno)
			}
			if seen := string(raw) + task.Stdout().String() + task.Stderr().String(); containsSecret(seen) {
				t.Errorf("%s: the guest read the injected secret (errno %s, status %d):\n%s", tc.attack, r.Errno, r.Status, redactSecret(task.Stdout().String()))
			}
		})
	}
	if n := len(e.evil.Requests()); n != 0 {
		t.Errorf("the evil origin received %d requests", n)
	}
}

// TestGuestAttackGaps: attacks whose outcome once differed from the
// package documentation (regression tests).
func TestGuestAttackGaps(t *testing.T) {
	e := newAttackEnv(t)
	for _, tc := range []struct {
		attack, errno, was string
	}{
		{"path_overlong_utf8", "EDENIED", "was (hardening): caps/net/path.go canonPath kept the overlong UTF-8 escape %C0%AE (\".\" in servers that " +
			"decode overlong UTF-8, e.g. CVE-2008-2938) so \"/search/%c0%ae%c0%ae/admin\" is allowed and sent; rule 4 refuses \"..;\" for the same reason"},
		{"resp_giant_header", "ELIMIT", "was: a response with more than 128 KiB of headers failed with EIO (the transport's MaxResponseHeaderBytes, " +
			"caps/net/kind.go New), not the ELIMIT caps/net/doc.go documents for headers over abi.MaxHeaderBytes"},
	} {
		t.Run(tc.attack, func(t *testing.T) {
			_, _, got := e.run(t, []string{tc.attack})
			if r := got[tc.attack]; r.Errno != tc.errno {
				t.Errorf("%s: errno %s status %d (body %q), want %s", tc.attack, r.Errno, r.Status, r.Body, tc.errno)
			}
		})
	}
}
