package net

import (
	"bytes"
	"io"
	"net/url"

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
