package net

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Splicing: a request may name blobs (abi.HTTPRequest.Splice) and refer to
// them in its URL, header values and body with abi.SplicePlaceholder(i),
// "{{mandate:splice:i}}". The kind resolves each blob through Call.Blob,
// where the kernel checks that its label may flow to this sink (EFLOW
// otherwise), and substitutes its bytes; the guest never reads them, so
// its label does not rise. In the URL the bytes are query-escaped; in a
// header value they must be a valid header value (EINVAL otherwise); in the
// body they are inserted as they are. A placeholder naming no spliced blob,
// or an unterminated one, is EINVAL.

const splicePrefix = kindapi.SplicePrefix

// spliceRequest substitutes the spliced blobs into r, bounded by limit
// bytes of body.
func spliceRequest(call *kindapi.Call, r *abi.HTTPRequest, limit int64) error {
	if len(r.Splice) == 0 {
		return nil
	}
	vals := make([][]byte, len(r.Splice))
	var total int64
	for i, h := range r.Splice {
		b, err := call.Blob(h)
		if err != nil {
			return err
		}
		total += int64(b.Len())
		if total > limit {
			return kindapi.Errorf(abi.ELIMIT, "net: fetch: spliced blobs exceed max_request_bytes %d", limit)
		}
		vals[i], _ = io.ReadAll(b.Reader())
	}
	var err error
	if r.URL, err = substitute(r.URL, vals, func(v []byte) string { return url.QueryEscape(string(v)) }); err != nil {
		return err
	}
	for name, vs := range r.Header {
		for i, v := range vs {
			if vs[i], err = substitute(v, vals, func(v []byte) string { return string(v) }); err != nil {
				return err
			}
		}
		r.Header[name] = vs
	}
	if bytes.Contains(r.Body, []byte(splicePrefix)) {
		s, err := substitute(string(r.Body), vals, func(v []byte) string { return string(v) })
		if err != nil {
			return err
		}
		r.Body = []byte(s)
	}
	return nil
}

// substitute replaces every placeholder in s with enc(vals[i])
// (kindapi.Substitute).
func substitute(s string, vals [][]byte, enc func([]byte) string) (string, error) {
	return kindapi.Substitute(s, vals, enc, "net: fetch")
}

// Parts: a request may splice parts of blobs (abi.HTTPRequest.SpliceParts),
// each a JSON path into a blob's document, a pattern over a text (the
// blob's, or the string at the path) or both, extracted by the kernel
// (Call.BlobPartOf) with that part's own label. They go into a JSON body
// only, each where a string value is exactly abi.PartPlaceholder(i), and
// replace that whole string with the part's JSON value, so a value cannot
// break out of its field. The request's provenance records, for each such
// place ("request.body.recipient"), the part's label and path, for the
// constraints' spliced() and from(). A body splicing parts splices no
// whole blob (its bytes could carry a part placeholder in), and a part
// placeholder anywhere else (the URL, a header, inside a longer string) is
// EINVAL, as is a member name with '.', '[' or ']' in such a body (its
// place would read as another's).
func spliceParts(call *kindapi.Call, r *abi.HTTPRequest) (map[string]kindapi.Source, error) {
	if len(r.SpliceParts) == 0 {
		if containsPart(r) {
			return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: a part placeholder, but no spliced parts")
		}
		return nil, nil
	}
	if strings.Contains(r.URL, abi.PartPrefix) {
		return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: parts are spliced into a JSON body only, not the URL")
	}
	for _, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, abi.PartPrefix) {
				return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: parts are spliced into a JSON body only, not a header")
			}
		}
	}
	vals := make([]any, len(r.SpliceParts))
	srcs := make([]kindapi.Source, len(r.SpliceParts))
	for i, sp := range r.SpliceParts {
		b, err := call.BlobPartOf(sp)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(b.Reader())
		dec.UseNumber()
		if err := dec.Decode(&vals[i]); err != nil {
			return nil, kindapi.Errorf(abi.EINTERNAL, "net: fetch: part %d: %v", i, err)
		}
		srcs[i] = kindapi.Source{Label: b.Label(), Path: sp.Path, Pattern: sp.Pattern, Written: b.Written()}
	}
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil || dec.More() {
		return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: a body splicing parts must be one JSON document")
	}
	prov := map[string]kindapi.Source{}
	var walk func(v any, place string) (any, error)
	walk = func(v any, place string) (any, error) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if strings.Contains(k, abi.PartPrefix) {
					return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: a part placeholder in a member name")
				}
				// A place is written .name or [N]: a member named "a.b"
				// would share the place of member b of member a, so the
				// guest could type a value at one and splice at the other.
				if strings.ContainsAny(k, ".[]") {
					return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: at %s: a body splicing parts may not have a member name with '.', '[' or ']' (%s)", place, quoteTrunc(k))
				}
				nv, err := walk(e, place+"."+k)
				if err != nil {
					return nil, err
				}
				x[k] = nv
			}
		case []any:
			for i, e := range x {
				nv, err := walk(e, place+"["+strconv.Itoa(i)+"]")
				if err != nil {
					return nil, err
				}
				x[i] = nv
			}
		case string:
			if !strings.Contains(x, abi.PartPrefix) {
				return x, nil
			}
			for i := range vals {
				if x == abi.PartPlaceholder(i) {
					prov[place] = srcs[i]
					return vals[i], nil
				}
			}
			return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: at %s: a part placeholder must be a whole string value naming a spliced part (have %d)", place, len(vals))
		}
		return v, nil
	}
	doc, err := walk(doc, "request.body")
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, kindapi.Errorf(abi.EINTERNAL, "net: fetch: re-encoding the body: %v", err)
	}
	r.Body = body
	return prov, nil
}

// checkPartsBody refuses, before anything is substituted, a body that
// splices parts and whole blobs both: a whole blob's bytes could carry a
// part placeholder in.
func checkPartsBody(r *abi.HTTPRequest) error {
	if len(r.SpliceParts) > 0 && len(r.Splice) > 0 && bytes.Contains(r.Body, []byte(splicePrefix)) {
		return kindapi.Errorf(abi.EINVAL, "net: fetch: a body splicing parts cannot splice whole blobs (splice the blob's \"$\" as a part)")
	}
	return nil
}

// containsPart reports whether a part placeholder is anywhere in r.
func containsPart(r *abi.HTTPRequest) bool {
	if strings.Contains(r.URL, abi.PartPrefix) || bytes.Contains(r.Body, []byte(abi.PartPrefix)) {
		return true
	}
	for _, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, abi.PartPrefix) {
				return true
			}
		}
	}
	return false
}
