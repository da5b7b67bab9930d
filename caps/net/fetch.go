package net

import (
	"context"
	"errors"
	"fmt"
	"io"
	gonet "net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/egress"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Prepare prepares a fetch: the request is decoded once, its blobs are
// spliced, and its method, URL, headers and body are checked against the
// scope. The effect sends exactly the request that was checked. See the
// package documentation for each errno.
func (k *Kind) Prepare(call *kindapi.Call) (kindapi.Op, error) {
	if call.Op != abi.NetFetchOp {
		return kindapi.Op{}, kindapi.Errorf(abi.ENOTSUP, "net: no operation %q", call.Op)
	}
	s, err := kindapi.ScopeAs[*Scope](call.Scope, "net")
	if err != nil {
		return kindapi.Op{}, err
	}
	var w written
	r, method, u, hdr, prov, err := s.prepare(call, &w)
	if err != nil {
		return kindapi.Op{}, err
	}
	body, err := s.body(call, r)
	if err != nil {
		return kindapi.Op{}, err
	}
	log := call.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	f := &fetch{k: k, s: s, r: r, method: method, u: u, hdr: hdr, body: body, log: log, w: w}
	op := kindapi.Op{
		Sink:       s.sink(),
		Vars:       f.vars,
		Show:       f.show,
		Effect:     f.run,
		Provenance: prov,
	}
	if !safeMethod(method) {
		op.Account = f.account
	}
	return op, nil
}

// safeMethod reports whether a request with method m changes nothing at
// the origin (RFC 9110, 9.2.1): its fetch is not an effect to list.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// written is a request's URL and body as the task wrote them, before any
// blob was spliced in.
type written struct {
	url      string
	body     []byte
	bodyBlob bool // the body is a blob, spliced whole
}

// account is what a request that changes something was, as the task
// wrote it: the method and URL, and its query and body with each
// spliced blob or part shown as "[spliced N]" ("[spliced part N]"),
// never its bytes.
func (f *fetch) account() kindapi.Account {
	path, query, hasQuery := strings.Cut(f.w.url, "?")
	if i := strings.IndexByte(query, '#'); i >= 0 {
		query = query[:i]
	} else if i := strings.IndexByte(path, '#'); i >= 0 {
		path = path[:i]
	}
	if strings.Contains(path, kindapi.SplicePrefix) {
		// A spliced path: as written (relative to the origin).
		if strings.Contains(path, "://") {
			if _, tail, err := splitOrigin(path); err == nil {
				path = tail
			}
		}
		path = markSpliced(path)
	} else {
		path = f.u.EscapedPath()
	}
	a := kindapi.Account{Action: f.method + " " + f.s.origin.String() + path}
	var w strings.Builder
	if hasQuery {
		w.WriteString("?" + markSpliced(query))
	}
	switch {
	case f.w.bodyBlob:
		fmt.Fprintf(&w, " [spliced body, %d bytes]", f.body.n)
	case len(f.w.body) > 0:
		w.WriteString(" " + markSpliced(string(f.w.body)))
	}
	a.Written = w.String()
	return a
}

// markSpliced shows each splice placeholder in s as "[spliced N]" and
// each part placeholder (a whole JSON string) as "[spliced part N]". s
// passed prepare, so its placeholders are well formed; one that is not
// is left as it is.
func markSpliced(s string) string {
	if out, err := kindapi.Substitute(s, spliceIndexes, func(n []byte) string { return "[spliced " + string(n) + "]" }, ""); err == nil {
		s = out
	}
	for i := 0; i < abi.MaxSplice && strings.Contains(s, abi.PartPrefix); i++ {
		s = strings.ReplaceAll(s, abi.PartPlaceholder(i), "[spliced part "+strconv.Itoa(i)+"]")
	}
	return s
}

// spliceIndexes are the values markSpliced shows for the splice
// placeholders: their numbers.
var spliceIndexes = func() [][]byte {
	v := make([][]byte, abi.MaxSplice)
	for i := range v {
		v[i] = []byte(strconv.Itoa(i))
	}
	return v
}()

// fetch is a prepared request.
type fetch struct {
	k      *Kind
	s      *Scope
	r      abi.HTTPRequest
	method string
	u      *url.URL
	hdr    http.Header
	body   reqBody
	log    hclog.Logger
	w      written
}

func (f *fetch) run(ctx context.Context) (*kindapi.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, f.s.timeout)
	defer cancel()
	resp, last, err := f.k.do(ctx, f.s, f.method, f.u, f.hdr, f.body, f.log)
	if err != nil {
		return nil, err
	}
	// Labelled by the path that answered (a redirect's last hop), not the
	// one asked for.
	label, parts := f.s.responseLabels(last.RawPath, resp.Body)
	res := &kindapi.Result{Data: abi.EncodeHTTPResponse(resp), Label: label, Parts: parts}
	if !safeMethod(f.method) {
		res.Outcome = strconv.Itoa(resp.Status)
	}
	return res, nil
}

// show is what an approver sees: the request as it will be sent, whole
// (the kernel's injected headers named, never their values).
func (f *fetch) show() kindapi.Preview {
	// The whole body (bounded by max_request_bytes): the kernel binds
	// the approval to all of it and cuts only what it shows.
	raw, _ := io.ReadAll(f.body.open())
	d := []kindapi.Detail{{Name: "method", Value: f.method}, {Name: "url", Value: f.u.String()}}
	names := make([]string, 0, len(f.hdr))
	for n := range f.hdr {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		d = append(d, kindapi.Detail{Name: "header " + n, Value: strings.Join(f.hdr[n], ", ")})
	}
	for _, h := range f.s.headers {
		d = append(d, kindapi.Detail{Name: "header " + h.name, Value: "(set by the kernel)"})
	}
	if f.body.n > 0 {
		d = append(d, kindapi.Detail{Name: "body", Value: string(raw)})
	}
	return kindapi.Preview{Summary: f.method + " " + f.u.String(), Details: d}
}

// prepare decodes a fetch's request, splices its blobs in and checks the
// method, URL and headers against the scope.
func (s *Scope) prepare(call *kindapi.Call, w *written) (abi.HTTPRequest, string, *url.URL, http.Header, map[string]kindapi.Source, error) {
	r, err := abi.DecodeHTTPRequest(call.Args)
	if err != nil {
		if errors.Is(err, abi.ErrTooLarge) {
			return r, "", nil, nil, nil, kindapi.Errorf(abi.ELIMIT, "net: fetch: %v", err)
		}
		return r, "", nil, nil, nil, kindapi.Errorf(abi.EINVAL, "net: fetch: %v", err)
	}
	if err := checkPartsBody(&r); err != nil {
		return r, "", nil, nil, nil, err
	}
	*w = written{url: r.URL, body: r.Body, bodyBlob: r.BodyBlob != 0}
	if err := spliceRequest(call, &r, s.maxRequest); err != nil {
		return r, "", nil, nil, nil, err
	}
	prov, err := spliceParts(call, &r)
	if err != nil {
		return r, "", nil, nil, nil, err
	}
	method, err := s.checkMethod(r.Method)
	if err != nil {
		return r, "", nil, nil, nil, err
	}
	u, err := s.target(r.URL)
	if err != nil {
		return r, "", nil, nil, nil, err
	}
	hdr, err := s.guestHeader(r.Header)
	if err != nil {
		return r, "", nil, nil, nil, err
	}
	return r, method, u, hdr, prov, nil
}

// checkMethod validates the guest's method and checks it is allowed.
func (s *Scope) checkMethod(m string) (string, error) {
	if _, ok := canonHeaderName(m); !ok {
		return "", kindapi.Errorf(abi.EINVAL, "net: fetch: method %s is not a token", quoteTrunc(m))
	}
	m = strings.ToUpper(m)
	for _, a := range s.methods {
		if a == m {
			return m, nil
		}
	}
	return "", kindapi.Errorf(abi.EDENIED, "net: fetch: method %s is not allowed (allowed: %s)", m, strings.Join(s.methods, ", "))
}

// target resolves a request URL (a path with optional query, or an
// absolute URL of the scope's origin) to the canonical URL that is
// checked and sent. A fragment is dropped: it never reaches a server.
func (s *Scope) target(raw string) (*url.URL, error) {
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c == 0x7f {
			return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: control character or space in url")
		}
	}
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		raw = raw[:i]
	}
	var rest string
	switch {
	case strings.HasPrefix(raw, "//") || strings.HasPrefix(raw, "/\\"):
		return nil, kindapi.Errorf(abi.EDENIED, "net: fetch: url %s is a network-path reference (//host); use a path or %s/...", quoteTrunc(raw), s.origin)
	case strings.HasPrefix(raw, "/"):
		rest = raw
	case strings.Contains(raw, "://"):
		o, tail, err := splitOrigin(raw)
		if err != nil {
			return nil, kindapi.Errorf(abi.EDENIED, "net: fetch: url does not name the origin %s: %v", s.origin, err)
		}
		if o != s.origin {
			return nil, kindapi.Errorf(abi.EDENIED, "net: fetch: origin %s is not the capability's origin %s", o, s.origin)
		}
		rest = tail
	default:
		return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: url must be a path starting with / or an absolute URL of %s", s.origin)
	}
	p, q, hasQuery := strings.Cut(rest, "?")
	if p == "" {
		p = "/"
	}
	cp, err := canonPath(p)
	if err != nil {
		var pe *pathError
		if errors.As(err, &pe) && pe.denied {
			return nil, kindapi.Errorf(abi.EDENIED, "net: fetch: %v", err)
		}
		return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: %v", err)
	}
	if !pathAllowed(s.paths, cp) {
		return nil, kindapi.Errorf(abi.EDENIED, "net: fetch: path %s is outside the allowed prefixes %v", quoteTrunc(cp), s.paths)
	}
	dp, err := url.PathUnescape(cp)
	if err != nil { // cannot happen: canonPath writes only valid escapes
		return nil, kindapi.Errorf(abi.EINTERNAL, "net: fetch: canonical path does not unescape")
	}
	return &url.URL{
		Scheme:     s.origin.scheme,
		Host:       s.origin.hostPort(),
		Path:       dp,
		RawPath:    cp,
		RawQuery:   canonQuery(q),
		ForceQuery: hasQuery && q == "",
	}, nil
}

// canonQuery escapes the bytes that may not appear in a query (non-ASCII,
// '"', '<', a '%' that starts no escape...). It does not otherwise change
// the query: the scope does not constrain queries.
func canonQuery(q string) string {
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '%' && i+2 < len(q) && isHex(q[i+1]) && isHex(q[i+2]):
			b.WriteByte(c)
		case isPathChar(c) || c == '/' || c == '?':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		}
	}
	return b.String()
}

func isHex(c byte) bool { _, ok := unhex(c); return ok }

// guestHeader validates the guest's headers: names must be tokens and
// values free of control characters (EINVAL); hop-by-hop and framing
// headers, Cookie, and every reserved (injected or dropped) name are
// refused (EDENIED).
func (s *Scope) guestHeader(h map[string][]string) (http.Header, error) {
	out := make(http.Header, len(h)+len(s.headers))
	for name, vs := range h {
		c, ok := canonHeaderName(name)
		if !ok {
			return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: header name %s is not a token", quoteTrunc(name))
		}
		if s.reservedHeader(c) {
			return nil, kindapi.Errorf(abi.EDENIED, "net: fetch: header %s is set by the kernel; the guest may not set it", c)
		}
		if why := guestForbidden(c); why != "" {
			return nil, kindapi.Errorf(abi.EDENIED, "net: fetch: header %s %s", c, why)
		}
		if rangeHeaders[c] && len(s.headers) > 0 {
			return nil, kindapi.Errorf(abi.EDENIED, "net: fetch: header %s is not allowed on a capability that injects credentials (a ranged echo would leak them)", c)
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return nil, kindapi.Errorf(abi.EINVAL, "net: fetch: header %s has a control character or newline in its value", c)
			}
			out[c] = append(out[c], v)
		}
	}
	return out, nil
}

// reqBody is a request body that can be read again for a 307/308 redirect.
type reqBody struct {
	n    int64
	open func() io.Reader
}

// body returns the request body from Body or the spliced BodyBlob, bounded
// by max_request_bytes (ELIMIT).
func (s *Scope) body(call *kindapi.Call, r abi.HTTPRequest) (reqBody, error) {
	if r.BodyBlob != 0 {
		b, err := call.Blob(r.BodyBlob)
		if err != nil {
			return reqBody{}, err
		}
		if int64(b.Len()) > s.maxRequest {
			return reqBody{}, kindapi.Errorf(abi.ELIMIT, "net: fetch: body blob of %d bytes exceeds max_request_bytes %d", b.Len(), s.maxRequest)
		}
		n := int64(b.Len())
		return reqBody{n: n, open: func() io.Reader { return io.NewSectionReader(b, 0, n) }}, nil
	}
	if int64(len(r.Body)) > s.maxRequest {
		return reqBody{}, kindapi.Errorf(abi.ELIMIT, "net: fetch: body of %d bytes exceeds max_request_bytes %d", len(r.Body), s.maxRequest)
	}
	data := r.Body
	return reqBody{n: int64(len(data)), open: func() io.Reader { return strings.NewReader(string(data)) }}, nil
}

// do sends the request and follows redirects while each hop stays within
// the scope, reads the bounded response and checks it. It returns the URL
// that answered.
func (k *Kind) do(ctx context.Context, s *Scope, method string, u *url.URL, guestHdr http.Header, body reqBody, log hclog.Logger) (abi.HTTPResponse, *url.URL, error) {
	client := k.client(s)
	for hop := 0; ; hop++ {
		req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
		if err != nil {
			return abi.HTTPResponse{}, nil, kindapi.Errorf(abi.EINTERNAL, "net: fetch: building request: %v", err)
		}
		req.URL = u // exactly the canonical URL that was checked
		req.Header = guestHdr.Clone()
		for _, h := range s.headers {
			req.Header[h.name] = []string{h.value.Value()}
		}
		if body.n > 0 {
			req.ContentLength = body.n
			req.Body = io.NopCloser(body.open())
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body.open()), nil }
		}
		log.Debug("fetch", "method", method, "origin", s.origin.String(), "path", u.RawPath, "hop", hop)
		resp, err := client.Do(req)
		if err != nil {
			if hop == 0 && egress.NotSent(err) {
				// Nothing left: the use, budget and rate token are given back.
				return abi.HTTPResponse{}, nil, kindapi.NotPerformed(fetchErr(ctx, s, err))
			}
			return abi.HTTPResponse{}, nil, fetchErr(ctx, s, err)
		}
		loc := resp.Header.Get("Location")
		if !isRedirect(resp.StatusCode) || loc == "" {
			defer resp.Body.Close()
			r, err := s.readResponse(ctx, resp)
			return r, u, err
		}
		resp.Body.Close()
		if hop >= s.maxRedirects {
			return abi.HTTPResponse{}, nil, kindapi.Errorf(abi.ELIMIT, "net: fetch: more than max_redirects (%d) redirects", s.maxRedirects)
		}
		for _, inj := range s.headers {
			if appearsInString(inj.probe, loc) {
				return abi.HTTPResponse{}, nil, kindapi.Errorf(abi.EDENIED, "net: fetch: redirect Location echoes the injected header %s; refused", inj.name)
			}
		}
		next, err := s.redirectTarget(u, loc)
		if err != nil {
			return abi.HTTPResponse{}, nil, err
		}
		// As net/http does: 301, 302 and 303 turn a request other than GET
		// or HEAD into a GET without a body; 307 and 308 keep both.
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
			if method != http.MethodGet && method != http.MethodHead {
				method = http.MethodGet
			}
			body = reqBody{}
			delete(guestHdr, "Content-Type")
		}
		if _, err := s.checkMethod(method); err != nil {
			return abi.HTTPResponse{}, nil, kindapi.Errorf(abi.EDENIED, "net: fetch: redirect to %s needs method %s, which is not allowed", quoteTrunc(next.String()), method)
		}
		u = next
	}
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// redirectTarget resolves a Location against the current URL and checks
// the result as a request URL: same origin, allowed path. A redirect out
// of scope fails the fetch (EDENIED, naming the target's origin and path)
// rather than returning the 3xx: the guest asked for a resource, and a
// redirect it may not follow is a refusal, not a result. The target's
// query is left out of the error: a server may put a credential there (a
// pre-signed URL minted with the injected header).
func (s *Scope) redirectTarget(cur *url.URL, loc string) (*url.URL, error) {
	ref, err := url.Parse(loc)
	if err != nil {
		return nil, kindapi.Errorf(abi.EDENIED, "net: fetch: redirect to an unparseable Location")
	}
	abs := cur.ResolveReference(ref)
	next, err := s.target(abs.String())
	if err != nil {
		shown := url.URL{Scheme: abs.Scheme, Host: abs.Host, Path: abs.Path, RawPath: abs.RawPath}
		why := err.Error()
		var ke *kindapi.Error
		if errors.As(err, &ke) {
			why = strings.TrimPrefix(ke.Msg, "net: fetch: ")
		}
		return nil, kindapi.Errorf(abi.EDENIED, "net: fetch: redirect to %s refused: %s", quoteTrunc(shown.String()), why)
	}
	return next, nil
}

// readResponse reads at most max_response_bytes+1 bytes of the body (a
// larger body is ELIMIT, never silently truncated), strips headers the
// guest must not see, bounds the rest, and refuses a response that echoes
// an injected secret.
func (s *Scope) readResponse(ctx context.Context, resp *http.Response) (abi.HTTPResponse, error) {
	// A HEAD response's Content-Length describes a body that is not sent.
	head := resp.Request != nil && resp.Request.Method == http.MethodHead
	if !head && resp.ContentLength > s.maxResponse {
		return abi.HTTPResponse{}, kindapi.Errorf(abi.ELIMIT, "net: fetch: response body of %d bytes exceeds max_response_bytes %d", resp.ContentLength, s.maxResponse)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, s.maxResponse+1))
	if err != nil {
		return abi.HTTPResponse{}, fetchErr(ctx, s, err)
	}
	if int64(len(data)) > s.maxResponse {
		return abi.HTTPResponse{}, kindapi.Errorf(abi.ELIMIT, "net: fetch: response body exceeds max_response_bytes %d", s.maxResponse)
	}
	h := resp.Header.Clone()
	for _, n := range stripResponseHeaders {
		delete(h, n)
	}
	n, size := 0, 0
	for name, vs := range h {
		for _, inj := range s.headers {
			if appearsInFold(inj.probe, name) {
				return abi.HTTPResponse{}, kindapi.Errorf(abi.EDENIED, "net: fetch: a response header name echoes the injected header %s; refused", inj.name)
			}
		}
		for _, v := range vs {
			n++
			size += len(name) + len(v)
			for _, inj := range s.headers {
				if appearsInString(inj.probe, v) {
					return abi.HTTPResponse{}, kindapi.Errorf(abi.EDENIED, "net: fetch: response header %s echoes the injected header %s; refused", name, inj.name)
				}
			}
		}
	}
	if n > abi.MaxHeaders || size > abi.MaxHeaderBytes {
		return abi.HTTPResponse{}, kindapi.Errorf(abi.ELIMIT, "net: fetch: response has %d header values, %d bytes (max %d, %d)", n, size, abi.MaxHeaders, abi.MaxHeaderBytes)
	}
	for _, inj := range s.headers {
		if appearsIn(inj.probe, data) {
			return abi.HTTPResponse{}, kindapi.Errorf(abi.EDENIED, "net: fetch: response body echoes the injected header %s; refused", inj.name)
		}
	}
	return abi.HTTPResponse{Status: resp.StatusCode, Header: h, Body: data}, nil
}

// fetchErr translates a transport error: a dial refused by the private
// address policy is EDENIED, a timeout ETIMEDOUT, anything else EIO. The
// message names the origin, never the request's headers.
func fetchErr(ctx context.Context, s *Scope, err error) error {
	if pe, ok := isPrivateDenial(err); ok {
		return kindapi.Errorf(abi.EDENIED, "net: fetch %s: %v", s.origin, pe)
	}
	var ne gonet.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return kindapi.Errorf(abi.ETIMEDOUT, "net: fetch %s: no complete response within %s", s.origin, s.timeout)
	}
	if errors.Is(err, context.Canceled) {
		return kindapi.Errorf(abi.EIO, "net: fetch %s: canceled", s.origin)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the URL; the origin is enough
	}
	if strings.Contains(err.Error(), "server response headers exceeded") {
		return kindapi.Errorf(abi.ELIMIT, "net: fetch %s: response headers exceed %d bytes", s.origin, 2*abi.MaxHeaderBytes)
	}
	return kindapi.Errorf(abi.EIO, "net: fetch %s: %s", s.origin, fmt.Sprint(err))
}
