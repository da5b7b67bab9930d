//! HTTP through a net capability (the Go SDK's guest-sdk/net): the kernel
//! performs the request within the capability's scope (origin, methods,
//! paths, limits) and injects any secret headers itself.
//!
//! ```no_run
//! use mandate::net::{fetch, Request};
//! let flights = mandate::lookup("flights")?;
//! let resp = fetch(flights, &Request::get("/search?from=SFO"))?;
//! println!("{} {}", resp.status, String::from_utf8_lossy(&resp.body));
//! # Ok::<(), mandate::Error>(())
//! ```
//!
//! The argument is the JSON document of ABI.md ("net"); the result blob
//! holds the binary response encoding
//! `"MHR1" status:uvarint nheader:uvarint { name:bytes value:bytes }* body:bytes`.

use std::collections::BTreeMap;

use crate::json::Object;
use crate::{Blob, Cap, Error};

/// The net kind's only operation.
pub const FETCH_OP: &str = "fetch";

/// Limits the kernel applies to a request and a response (abi/wire.go).
pub const MAX_HEADERS: usize = 128;
/// The most header bytes (names and values) of a request.
pub const MAX_HEADER_BYTES: usize = 64 << 10;
/// The longest URL.
pub const MAX_URL_LEN: usize = 8 << 10;
/// The longest method.
pub const MAX_METHOD_LEN: usize = 16;

const RESPONSE_MAGIC: &[u8] = b"MHR1";

/// A part of a blob spliced by reference (abi.SplicePart): a JSON path
/// into the blob's document, such as "$.transactions[0].sender"; or, with
/// `pattern` set, the capture of that regular expression (one capture
/// group, RE2 syntax, exactly one match) in the string at `path`, or with
/// `path` "" in the blob's text. `SplicePart::path` and
/// `SplicePart::pattern` make each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplicePart {
    pub blob: Blob,
    pub path: String,
    pub pattern: String,
}

impl SplicePart {
    /// The JSON value at `path`.
    pub fn path(blob: Blob, path: &str) -> SplicePart {
        SplicePart { blob, path: path.to_string(), pattern: String::new() }
    }

    /// The capture of `pattern` in the string at `path` ("" for the blob's text).
    pub fn pattern(blob: Blob, path: &str, pattern: &str) -> SplicePart {
        SplicePart { blob, path: path.to_string(), pattern: pattern.to_string() }
    }
}

/// The argument of `fetch` (abi.HTTPRequest).
///
/// `url` is a path (with query), resolved against the capability's
/// origin, or an absolute URL naming exactly that origin. At most one of
/// `body` and `body_blob` is set. `splice` names blobs the kernel
/// substitutes where `splice_placeholder(i)` stands, without the guest
/// reading them; `splice_parts` the same for parts of blobs (see ABI.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub url: String,
    pub header: BTreeMap<String, Vec<String>>,
    pub body: Vec<u8>,
    pub body_blob: Option<Blob>,
    pub splice: Vec<Blob>,
    pub splice_parts: Vec<SplicePart>,
}

impl Request {
    /// A request with this method and URL.
    pub fn new(method: &str, url: &str) -> Request {
        Request { method: method.to_string(), url: url.to_string(), ..Request::default() }
    }

    /// A GET of url.
    pub fn get(url: &str) -> Request {
        Request::new("GET", url)
    }

    /// Adds a header value.
    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.header.entry(name.to_string()).or_default().push(value.to_string());
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// The request as the kernel reads it: the JSON encoding Go's
    /// encoding/json gives abi.HTTPRequest (body in standard base64, empty
    /// fields left out).
    pub fn encode(&self) -> String {
        let mut o = Object::new().str("method", &self.method).str("url", &self.url);
        if !self.header.is_empty() {
            let mut h = Object::new();
            for (k, vs) in &self.header {
                h = h.strs(k, vs);
            }
            o = o.raw("header", &h.finish());
        }
        if !self.body.is_empty() {
            o = o.str("body", &base64(&self.body));
        }
        if let Some(b) = self.body_blob {
            o = o.num("body_blob", b.handle() as u64);
        }
        if !self.splice.is_empty() {
            let hs: Vec<String> = self.splice.iter().map(|b| b.handle().to_string()).collect();
            o = o.raw("splice", &format!("[{}]", hs.join(",")));
        }
        if !self.splice_parts.is_empty() {
            let ps: Vec<String> = self
                .splice_parts
                .iter()
                .map(|p| {
                    let o = Object::new().num("blob", p.blob.handle() as u64).str("path", &p.path);
                    if p.pattern.is_empty() {
                        o.finish()
                    } else {
                        o.str("pattern", &p.pattern).finish()
                    }
                })
                .collect();
            o = o.raw("splice_parts", &format!("[{}]", ps.join(",")));
        }
        o.finish()
    }
}

/// The placeholder for the i-th spliced blob: `{{mandate:splice:i}}`.
pub fn splice_placeholder(i: usize) -> String {
    format!("{{{{mandate:splice:{}}}}}", i)
}

/// The placeholder for the i-th spliced part: `{{mandate:part:i}}`.
pub fn part_placeholder(i: usize) -> String {
    format!("{{{{mandate:part:{}}}}}", i)
}

/// What a successful fetch returns (abi.HTTPResponse). Header names and
/// values that are not UTF-8 are decoded lossily.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub header: BTreeMap<String, Vec<String>>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (exact, as the kernel wrote it:
    /// canonical, e.g. "Content-Type").
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.header.get(name).and_then(|v| v.first()).map(String::as_str)
    }
}

/// Performs `req` on the net capability `c` and decodes the response.
/// Reading it raises this task's label to include the response's.
pub fn fetch(c: Cap, req: &Request) -> Result<Response, Error> {
    let blob = fetch_blob(c, req)?;
    decode_response(&blob.take()?)
}

/// Performs `req` and returns the response as an unread blob, to pass on
/// without reading it (reading raises this task's label).
pub fn fetch_blob(c: Cap, req: &Request) -> Result<Blob, Error> {
    match c.call(FETCH_OP, req.encode())? {
        Some(b) => Ok(b),
        None => Err(Error::guest("net::fetch", "the kernel returned no response")),
    }
}

/// Decodes a fetch result blob. Every length is checked against what
/// remains, so hostile input yields an `EINVAL` error, never a panic or a
/// large allocation.
pub fn decode_response(b: &[u8]) -> Result<Response, Error> {
    let bad = |what: &str| Error::guest("net::decode_response", what.to_string());
    if b.len() > crate::MAX_BLOB_LEN {
        return Err(bad("response too large"));
    }
    if !b.starts_with(RESPONSE_MAGIC) {
        return Err(bad("bad magic"));
    }
    let mut d = Decoder { b: &b[RESPONSE_MAGIC.len()..] };
    let status = d.uvarint().ok_or_else(|| bad("bad varint"))?;
    let n = d.uvarint().ok_or_else(|| bad("bad varint"))?;
    if status > 999 || n > MAX_HEADERS as u64 {
        return Err(bad(&format!("status {}, {} headers", status, n)));
    }
    let mut r = Response { status: status as u16, ..Response::default() };
    for _ in 0..n {
        let k = d.bytes().ok_or_else(|| bad("bad header name"))?;
        let v = d.bytes().ok_or_else(|| bad("bad header value"))?;
        r.header
            .entry(String::from_utf8_lossy(k).into_owned())
            .or_default()
            .push(String::from_utf8_lossy(v).into_owned());
    }
    r.body = d.bytes().ok_or_else(|| bad("bad body"))?.to_vec();
    if !d.b.is_empty() {
        return Err(bad(&format!("{} trailing bytes", d.b.len())));
    }
    Ok(r)
}

struct Decoder<'a> {
    b: &'a [u8],
}

impl<'a> Decoder<'a> {
    /// A uvarint as Go's encoding/binary writes it (at most 10 bytes, the
    /// last at most 1 when it is the tenth).
    fn uvarint(&mut self) -> Option<u64> {
        let mut x: u64 = 0;
        for (i, &c) in self.b.iter().enumerate() {
            if i == 10 || (i == 9 && c > 1) {
                return None;
            }
            x |= ((c & 0x7f) as u64) << (7 * i);
            if c < 0x80 {
                self.b = &self.b[i + 1..];
                return Some(x);
            }
        }
        None
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.uvarint()?;
        if n > self.b.len() as u64 {
            return None;
        }
        let (v, rest) = self.b.split_at(n as usize);
        self.b = rest;
        Some(v)
    }
}

/// Standard base64 with padding (what Go's encoding/json uses for []byte).
pub fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity((b.len() + 2) / 3 * 4);
    for c in b.chunks(3) {
        let v = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        out.push(A[(v >> 18) as usize & 63] as char);
        out.push(A[(v >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 { A[(v >> 6) as usize & 63] as char } else { '=' });
        out.push(if c.len() > 2 { A[v as usize & 63] as char } else { '=' });
    }
    out
}


#[cfg(test)]
mod tests {
    use super::*;

    fn uv(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn bytes(s: &[u8], out: &mut Vec<u8>) {
        uv(s.len() as u64, out);
        out.extend_from_slice(s);
    }

    #[test]
    fn decode() {
        let mut b = b"MHR1".to_vec();
        uv(200, &mut b);
        uv(3, &mut b);
        for (k, v) in [("A", "1"), ("B", "2"), ("B", "3")] {
            bytes(k.as_bytes(), &mut b);
            bytes(v.as_bytes(), &mut b);
        }
        bytes(b"hello", &mut b);
        let r = decode_response(&b).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header["B"], vec!["2", "3"]);
        assert_eq!(r.body, b"hello");
        let mut t = b.clone();
        t.push(1);
        assert!(decode_response(&t).is_err());
    }

    #[test]
    fn hostile() {
        let cases: Vec<Vec<u8>> = vec![
            vec![],
            b"XXXX".to_vec(),
            [b"MHR1".as_ref(), &[0xff, 0xff, 0x03, 0]].concat(),
            [b"MHR1".as_ref(), &[200, 1, 0xff, 0xff, 0xff, 0xff, 0x0f]].concat(),
            [b"MHR1".as_ref(), &[200, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]].concat(),
            [b"MHR1".as_ref(), &[0x80; 11]].concat(),
        ];
        for c in cases {
            assert!(decode_response(&c).is_err(), "{:?} decoded", c);
        }
    }

    #[test]
    fn encode() {
        let r = Request::get("/search?q=\"x\"").header("Accept", "text/html").body("hi!");
        assert_eq!(
            r.encode(),
            r#"{"method":"GET","url":"/search?q=\"x\"","header":{"Accept":["text/html"]},"body":"aGkh"}"#
        );
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(splice_placeholder(2), "{{mandate:splice:2}}");
        let mut p = Request::get("/p");
        p.splice_parts = vec![
            SplicePart::path(Blob::from_handle(3), "$.a"),
            SplicePart::pattern(Blob::from_handle(4), "", r"(?m)^Pay to:\s+(\S+)$"),
        ];
        assert_eq!(
            p.encode(),
            r#"{"method":"GET","url":"/p","splice_parts":[{"blob":3,"path":"$.a"},{"blob":4,"path":"","pattern":"(?m)^Pay to:\\s+(\\S+)$"}]}"#
        );
    }
}
