package net

import (
	"bytes"
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

const splicePrefix = "{{mandate:splice:"

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

// substitute replaces every placeholder in s with enc(vals[i]). It scans s
// once, left to right; substituted bytes are never scanned again, so a
// blob cannot smuggle in a placeholder.
func substitute(s string, vals [][]byte, enc func([]byte) string) (string, error) {
	if !strings.Contains(s, splicePrefix) {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, splicePrefix)
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+len(splicePrefix):]
		j := strings.Index(rest, "}}")
		if j < 0 || j > 4 {
			return "", kindapi.Errorf(abi.EINVAL, "net: fetch: unterminated splice placeholder")
		}
		n, err := strconv.Atoi(rest[:j])
		if err != nil || n < 0 || n >= len(vals) || strconv.Itoa(n) != rest[:j] {
			return "", kindapi.Errorf(abi.EINVAL, "net: fetch: splice placeholder %q names no spliced blob (have %d)", rest[:j], len(vals))
		}
		b.WriteString(enc(vals[n]))
		s = rest[j+2:]
	}
}
