// Package net is the network capability kind, Kind("net"): the right to
// make HTTP requests to one origin, with some methods, under some path
// prefixes, within size and time limits, with credentials the kernel
// attaches and the guest never sees.
//
// A manifest grants one:
//
//	cap "net" "flights" {
//	  origin  = "https://flights.example"
//	  methods = ["GET"]
//	  paths   = ["/search"]
//	  headers = [{ name = "Authorization", env = "FLIGHTS_TOKEN", prefix = "Bearer " }]
//	}
//
// which reaches Grant as the JSON spec
//
//	{"origin":"https://flights.example","methods":["GET"],"paths":["/search"],
//	 "headers":[{"name":"Authorization","env":"FLIGHTS_TOKEN","prefix":"Bearer "}]}
//
// and a guest narrows it before handing it to a child (cap_derive):
//
//	{"paths":["/search/economy"],"max_response_bytes":65536,"timeout":"5s",
//	 "drop_headers":["Authorization"]}
//
// In Go:
//
//	k := net.New()
//	root, err := k.Grant(kindapi.GrantContext{Dir: manifestDir}, spec)
//	child, err := k.Narrow(root, []byte(`{"paths":["/search/economy"]}`))
//	_, err = k.Narrow(child, []byte(`{"methods":["POST"]}`)) // EDENIED: methods [POST] not in [GET]
//
// # Grant spec
//
//	field               type      default     meaning
//	origin              string    (required)  scheme://host[:port], http or https
//	methods             []string  ["GET"]     allowed methods; CONNECT, TRACE, TRACK never
//	paths               []string  ["/"]       allowed path prefixes, on segment boundaries
//	max_request_bytes   size      1048576     request body bound (<= 64 MiB)
//	max_response_bytes  size      10485760    response body bound (<= 64 MiB - 68 KiB)
//	timeout             duration  "30s"       whole fetch, redirects and body (<= 1h)
//	max_redirects       int       5           in-scope redirects followed (<= 20)
//	allow_private       bool      false       may dial loopback/private/link-local...
//	clearance           []string  []          confidentiality tags that may be sent here (a sink):
//	                                          the calling task's label and every spliced blob must
//	                                          flow to it, else EFLOW; [] is public data only
//	accepts_untrusted   bool      true        false: refuse a task or spliced blob tainted by any source
//	refuses_taints      []string  []          refuse a task or spliced blob carrying one of these taints;
//	                                          a trailing * is a prefix ("web:*"), "*" alone every taint
//	labels              []string  []          confidentiality tags every response carries
//	responses           object    {}          labels by path prefix and by JSON field, below
//	headers             []object  []          injected headers (<= 16), below
//
// A size is a number of bytes or a string such as "64KiB" or "10MB"
// (abi.ParseSize), in grants and narrowing requests alike.
//
// A header is {"name": N, "env": V} or {"name": N, "file": F}, with an
// optional "prefix" prepended to the value. The value is read when the
// capability is granted: from the host environment variable V, or from file
// F (relative to the manifest; one trailing newline is removed). A missing
// variable or file, or an empty value, is a grant error naming the field.
// Unknown fields are errors; errors are *kindapi.FieldError.
//
// The origin is canonicalised: scheme and host lower-cased, the default
// port elided (HTTP://FLIGHTS.EXAMPLE:80 is http://flights.example),
// international names converted to punycode with the strict IDNA Lookup
// profile (bücher.example is xn--bcher-kva.example), one trailing dot
// removed, IPv6 literals bracketed. Userinfo (http://a@b), a path other
// than "/", a query, a fragment, percent-escapes or backslashes in the
// authority, an empty host, a bad port, an IPv6 zone, and hosts that some
// parsers read as IPv4 numbers but are not dotted-decimal ("127.1") are
// refused. Without allow_private, an origin whose host is a non-public IP
// literal or a name under "localhost" is refused at grant.
//
// # Labels by path and by field
//
// A response is labelled web:<origin> (its integrity: where it came from)
// plus the tags of labels. responses says otherwise for the paths under a
// prefix, and labels fields of their JSON bodies apart:
//
//	cap "net" "bank" {
//	  origin = var.bank
//	  responses = {
//	    "/transactions" = {
//	      taint  = "bank:tx"                     # the rest of the response, instead of web:<origin>
//	      labels = ["pii:alice"]                 # more confidentiality tags, on all of it
//	      fields = {
//	        "$.transactions[*].sender" = "bank:transactions.sender"              # a field's own taint
//	        "$.transactions[*].iban"   = { taint = "bank:iban", labels = ["pii:alice:iban"] }
//	      }
//	    }
//	  }
//	}
//
//	entry field  type      default       meaning
//	taint        string    web:<origin>  what the response carries where no field says otherwise
//	labels       []string  []            confidentiality tags of all of it (beside the cap's labels)
//	fields       object    {}            PATTERN = "taint": that field's taint instead of taint, or
//	                                     PATTERN = {taint, labels}: its taint and more tags (<= 64 patterns)
//
// At most 64 entries; keys are path prefixes (canonicalised, matched on
// segment boundaries like paths). The longest prefix naming the path that
// answered wins (a redirect's last hop, not the path asked for). A
// pattern is a JSON path into the response body: $, then .name, ["name"],
// [N], and [*] or .* for any index or member. Where patterns nest the
// deepest wins ($.transactions[*] = "bank:row" and
// $.transactions[*].sender = "bank:sender" label a subject bank:row and a
// sender bank:sender); two patterns of one depth that could name one
// place are a grant error. A taint is non-empty, without "*", control
// characters or surrounding space.
//
// The fetch returns a blob labelled {the cap's and the entry's labels,
// taint} whose parts carry {those labels and the field's, the field's
// taint} (kindapi.Result.Parts). A task that reads the blob carries all of
// them; a call that splices one field by part (abi.HTTPRequest.SpliceParts)
// sends only that field's (joined with the label the task had when it
// fetched), and the task's own label does not rise. So a
// payment capability with refuses_taints = ["bank:tx"] accepts the bank's
// record of a sender and refuses its free-text subject, and a constraint
// can insist the recipient came from there (with "in": the part has more
// taints than its field's once the task had read anything before the
// fetch):
//
//	when = "spliced(request.body.recipient) && 'bank:transactions.sender' in from(request.body.recipient).integ"
//
// A part may also be chosen by a pattern (abi.SplicePart.Pattern: one
// capture group, RE2, exactly one match, bounded), in the string at its
// path or, with no path, in the response's body or any text blob: "pay
// the bill" splices the bill's (?m)^Pay to:\s+([A-Z0-9]+)$ line into the
// recipient, and a constraint can require the pattern too,
// from(request.body.recipient).pattern. A part of a blob the task wrote
// itself is never spliced in the constraints' sense (kernel/provenance.go).
//
// A response whose body is not JSON carries taint on all of it. Without
// an entry for its path a response is labelled as without responses.
//
// # Narrowing request
//
// Every field is optional; absent keeps the parent's value:
//
//	{"origin": "...", "methods": [...], "paths": [...],
//	 "max_request_bytes": N, "max_response_bytes": N, "timeout": "1s",
//	 "max_redirects": N, "allow_private": false, "drop_headers": ["Authorization"],
//	 "clearance": [...], "accepts_untrusted": false, "refuses_taints": [...],
//	 "labels": [...], "responses": {...}}
//
// The result must be within the parent: origin identical, methods a subset,
// each path within a parent prefix, limits no larger, allow_private only
// true if the parent's is, clearance within the parent's, accepts_untrusted
// false if the parent's is, refuses_taints refusing every taint the
// parent's does (each of the parent's patterns, or a prefix above it:
// "bank:*" keeps "bank:tx"), labels a superset, headers only dropped.
// responses are inherited and cannot change: a request may repeat the
// parent's (as the scope's JSON shows them), and any other value is
// EDENIED, since another taint is not a narrower one. A request that widens
// anything is refused with EDENIED naming every field that widened; it is
// never clamped. A malformed request (unknown field, bad type, empty list,
// negative limit, a header not injected) is EINVAL. A dropped header stays
// reserved: the child's guest may not set it either.
//
// # Fetch
//
// The "fetch" operation takes an abi.HTTPRequest and returns an
// abi.HTTPResponse blob labelled with the integrity taint
// "web:<canonical origin>" (or as responses says, above). Result (Errno):
//
//   - EINVAL: a malformed request: bad method token, URL that is neither a
//     path nor absolute, control characters, bad percent-escapes, bad
//     header names or values; a part spliced from a path its blob does
//     not have, a part placeholder outside a JSON body's string values, a
//     member name with '.', '[' or ']' in a body splicing parts.
//   - EFLOW (from the kernel, before anything is sent): the calling task or
//     a spliced blob or part carries a confidentiality tag outside
//     clearance, or a taint the capability refuses (accepts_untrusted =
//     false, refuses_taints); the error names the taint.
//   - EDENIED: the method or path is not allowed; the URL names another
//     origin or is a network-path reference ("//host"); the path has a
//     backslash, an encoded slash or backslash (%2F, %5C), an ambiguous dot
//     segment ("..;", "..%00"), a double-encoded escape ("%252e") or bytes
//     that are not valid UTF-8 once decoded (overlong "%c0%ae"); the guest
//     sets a reserved header, a hop-by-hop or framing header (Host,
//     Connection, Content-Length, Transfer-Encoding, TE, Trailer, Upgrade,
//     Keep-Alive, Proxy-*), Cookie, Accept-Encoding (the transport
//     negotiates and decompresses, so the echo check sees plain bytes), a
//     method override (X-HTTP-Method-Override, X-HTTP-Method,
//     X-Method-Override), or, on a capability that injects headers, Range
//     or If-Range (slices of an echo would each pass the echo check); a
//     redirect leaves the scope; the
//     origin resolves to a non-public address and allow_private is false;
//     the response echoes an injected secret.
//   - ELIMIT: the body (inline or spliced from body_blob) is over
//     max_request_bytes, the response body over max_response_bytes, the
//     response has more than abi.MaxHeaders header values or
//     abi.MaxHeaderBytes header bytes (or more header bytes than the
//     transport reads, 2*abi.MaxHeaderBytes), or more than max_redirects
//     redirects.
//   - ETIMEDOUT: no complete response within the timeout.
//   - EIO: any other network or protocol failure.
//
// Paths are canonicalised before they are matched and the canonical form is
// what is sent, so the server sees the path that was checked: escapes of
// unreserved characters are decoded (so %2e is "."), dot segments resolved
// and empty segments dropped ("/search/../admin" is "/admin", which prefix
// "/search" does not allow), the trailing slash kept. Prefix "/search"
// allows "/search", "/search/x" and "/search?q=1", not "/searchadmin".
// Queries are not constrained (only escaped where a byte may not appear).
// A fragment is dropped. The URL may also be absolute, naming the
// capability's origin in any spelling that canonicalises to it.
//
// Headers the guest sends pass through unchanged unless refused above.
// Injected headers are set by the kernel on every request and every
// in-scope redirect hop. Their values never appear in the scope's JSON, in
// errors or in logs; and because a server may echo a request (a debug
// endpoint, a reflected error page), a response whose header names (in
// any case), header values, body or redirect Location contain an injected
// secret of at least 8 bytes is refused with EDENIED rather than handed to
// the guest. (This catches verbatim echoes only, not ones the server
// encodes, such as base64; a server that wants to leak its own credential
// can.)
//
// Redirects are followed by the kernel while each hop stays within the
// scope (same origin, allowed path, method still allowed; 301/302/303 turn
// other methods into GET without a body as net/http does, 307/308 keep
// both), up to max_redirects. A redirect out of scope fails the fetch with
// EDENIED naming the target rather than returning the 3xx. Injected headers
// therefore only ever go to the capability's origin.
//
// Private addresses are refused when dialed, on the address actually
// dialed (net.Dialer.Control), so a name that resolves or rebinds to one is
// refused: loopback, RFC 1918 and fc00::/7, link-local (incl. 169.254.169.254),
// unspecified, multicast, CGNAT 100.64/10, 0/8, reserved 240/4, benchmarking,
// documentation and IETF ranges, deprecated IPv4-compatible and site-local
// IPv6, Teredo, and IPv4-mapped, NAT64 and 6to4 addresses that embed any of
// these. Environment proxies are never used, there is no cookie jar, and
// Set-Cookie/Set-Cookie2 are removed from responses: a session cookie
// minted from an injected credential is itself a credential.
package net
