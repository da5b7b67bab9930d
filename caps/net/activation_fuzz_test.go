package net

import (
	"net/url"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

// FuzzActivation: whatever a guest's fetch arguments, the activation a
// `when` sees is built without panicking, and it describes the request the
// kernel sends: the same canonical path, the method upper-cased, the
// first value of each query parameter.
func FuzzActivation(f *testing.F) {
	for _, s := range []string{
		`{"method":"post","url":"/v1/transfers?dry=no","body":"eyJyZWNpcGllbnQiOiJHQjI5TldCSzYwMTYxMzMxOTI2ODE5IiwiYW1vdW50Ijo0MH0="}`,
		`{"method":"POST","url":"/v1/./x/../transfers?dry=no&dry=yes","body":"bm90IGpzb24="}`,
		`{"method":"GET","url":"https://bank.example/v1/a?q=%ZZ","header":{"content-type":["application/json"],"X":[]}}`,
		`{"method":"GET","url":"/v1/a?to=good&to=evil"}`, `{"method":"GET","url":"/v1/a?x=1;y=2"}`,
		`{"method":"POST","url":"/v1/a","body_blob":7}`, `{"method":"GET","url":"/admin"}`, `{"method":"GET","url":"//evil.example/v1"}`,
	} {
		f.Add([]byte(s), []byte(`{"amount":40}`))
	}
	k := New()
	gs, err := k.Grant(kindapi.GrantContext{}, []byte(`{"origin":"https://bank.example","methods":["GET","POST"],"paths":["/v1"],"max_request_bytes":1000}`))
	if err != nil {
		f.Fatal(err)
	}
	s := gs.(*Scope)
	f.Fuzz(func(t *testing.T, args, blob []byte) {
		call := kindtest.NewCall("fetch", args, s, kindapi.TaskInfo{}, nil, func(h abi.Handle) (*kindapi.Blob, error) {
			if h != 7 {
				return nil, kindapi.Errorf(abi.EBADHANDLE, "no blob %d", h)
			}
			return kindapi.NewBlob(blob, kindapi.Label{}), nil
		})
		act, err := kerneltest.Vars(k, call)
		if err != nil {
			return
		}
		req := act["request"].(map[string]any)
		r, err := abi.DecodeHTTPRequest(args)
		if err != nil {
			t.Fatalf("Activation(%q) accepted what DecodeHTTPRequest refuses: %v", args, err)
		}
		u, err := s.target(r.URL)
		if err != nil {
			t.Fatalf("Activation(%q) accepted a url the fetch refuses: %v", args, err)
		}
		if req["method"] != strings.ToUpper(r.Method) || req["path"] != u.Path {
			t.Fatalf("Activation(%q): method %v path %v; the fetch sends %s %s", args, req["method"], req["path"], r.Method, u.Path)
		}
		if q, err := url.ParseQuery(u.RawQuery); err == nil {
			got := req["query"].(map[string]any)
			for name, vs := range q {
				if len(vs) > 0 && got[name] != vs[0] {
					t.Fatalf("Activation(%q): query %s = %v; the fetch sends %q", args, name, got[name], vs)
				}
			}
		}
	})
}
