package net

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// FuzzSplicePatternPart: a request splicing a part of a text by pattern,
// whatever the text, the pattern and the body, gives a request or an
// errno of the documented ones (EINVAL, ELIMIT), never a panic; when it
// succeeds, the body is one JSON document whose recipient is a string the
// text holds, and the provenance records that place with the pattern.
func FuzzSplicePatternPart(f *testing.F) {
	f.Add([]byte("Amount due: 84.20 EUR\nPay to:     GB33BUKB20201555555555\n"), `(?m)^Pay to:\s+([A-Z0-9]+)$`, `{"recipient":"{{mandate:part:0}}"}`)
	f.Add([]byte("x"), `(x*)`, `{"recipient":"{{mandate:part:0}}","n":1}`)
	f.Add([]byte("a\xffb"), `a(.)b`, `["{{mandate:part:0}}"]`)
	f.Add([]byte("k: v"), `k: (v)`, `{"recipient":"{{mandate:part:0}}x"}`)
	f.Fuzz(func(t *testing.T, text []byte, pattern, body string) {
		blob := kindapi.NewBlob(text, kindapi.NewLabel(nil, []string{"bills:bill"}))
		call := new(kindapi.Call)
		call.Init(abi.NetFetchOp, nil, nil, kindapi.TaskInfo{}, nil, func(h abi.Handle) (*kindapi.Blob, error) {
			if h == 1 {
				return blob, nil
			}
			return nil, kindapi.ErrBadHandle
		}, nil)
		r := &abi.HTTPRequest{Method: "POST", URL: "/p", Body: []byte(body),
			SpliceParts: []abi.SplicePart{{Blob: 1, Pattern: pattern}}}
		prov, err := spliceParts(call, r)
		if err != nil {
			if e := kindapi.ErrnoOf(err); e != abi.EINVAL && e != abi.ELIMIT {
				t.Fatalf("errno %v: %v", e, err)
			}
			return
		}
		var doc any
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatalf("the spliced body %q is not JSON: %v", r.Body, err)
		}
		if m, ok := doc.(map[string]any); ok {
			if s, ok := m["recipient"].(string); ok {
				if src, spliced := prov["request.body.recipient"]; spliced {
					if src.Pattern != pattern || src.Path != "" || !strings.Contains(string(text), s) {
						t.Fatalf("recipient %q from %+v", s, src)
					}
				}
			}
		}
	})
}
