//! Just enough JSON for argument documents: a writer for the ones a guest
//! sends and a bounded parser for the ones it reads (its input, a
//! description, a receipt). No serde: the SDK is std-only.
//!
//! ```
//! use mandate::json::{self, Value};
//! let doc = json::Object::new().str("method", "GET").str("url", "/search").finish();
//! assert_eq!(doc, r#"{"method":"GET","url":"/search"}"#);
//! let v = json::parse(br#"{"self":"sha256:ab","n":[1,2]}"#).unwrap();
//! assert_eq!(v.get("self").and_then(Value::as_str), Some("sha256:ab"));
//! ```

use crate::Error;

/// Appends `s` to `out` as a JSON string (quoted and escaped).
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `s` as a JSON string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_str(&mut out, s);
    out
}

/// A list of strings as a JSON array.
pub fn str_array<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::from("[");
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(&mut out, s.as_ref());
    }
    out.push(']');
    out
}

/// Builds a JSON object member by member, in the order given.
#[derive(Default)]
pub struct Object {
    out: String,
}

impl Object {
    /// An empty object.
    pub fn new() -> Object {
        Object { out: String::from("{") }
    }

    fn key(&mut self, k: &str) {
        if self.out.len() > 1 {
            self.out.push(',');
        }
        write_str(&mut self.out, k);
        self.out.push(':');
    }

    /// A string member.
    pub fn str(mut self, k: &str, v: &str) -> Object {
        self.key(k);
        write_str(&mut self.out, v);
        self
    }

    /// A number member.
    pub fn num(mut self, k: &str, v: u64) -> Object {
        self.key(k);
        self.out.push_str(&v.to_string());
        self
    }

    /// A boolean member.
    pub fn bool(mut self, k: &str, v: bool) -> Object {
        self.key(k);
        self.out.push_str(if v { "true" } else { "false" });
        self
    }

    /// An array of strings.
    pub fn strs<S: AsRef<str>>(mut self, k: &str, v: &[S]) -> Object {
        self.key(k);
        self.out.push_str(&str_array(v));
        self
    }

    /// A member whose value is already JSON (not checked).
    pub fn raw(mut self, k: &str, json: &str) -> Object {
        self.key(k);
        self.out.push_str(json);
        self
    }

    /// The document.
    pub fn finish(mut self) -> String {
        self.out.push('}');
        self.out
    }
}

/// A parsed JSON value. Numbers keep their text, so none loses precision;
/// objects keep their members in document order.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The member `k` of an object (the first, were it repeated).
    pub fn get(&self, k: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.iter().find(|(n, _)| n == k).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number as a u64, if it is a whole one that fits.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// The members, if this is an object.
    pub fn as_object(&self) -> Option<&[(String, Value)]> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Encodes the value (compact, members in order).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => out.push_str(n),
            Value::String(s) => write_str(out, s),
            Value::Array(a) => {
                out.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(out, k);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// How deeply `parse` lets arrays and objects nest.
pub const MAX_DEPTH: usize = 64;

/// Parses one JSON document (RFC 8259; nothing but whitespace after it).
/// Hostile input yields an `EINVAL` error, never a panic or unbounded
/// recursion.
pub fn parse(b: &[u8]) -> Result<Value, Error> {
    let mut p = Parser { b, i: 0 };
    let v = p.value(0)?;
    p.ws();
    if p.i != b.len() {
        return Err(p.err("trailing data"));
    }
    Ok(v)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, what: &str) -> Error {
        Error::guest("json::parse", format!("{} at byte {}", what, self.i))
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn lit(&mut self, s: &[u8], v: Value) -> Result<Value, Error> {
        if self.b[self.i..].starts_with(s) {
            self.i += s.len();
            Ok(v)
        } else {
            Err(self.err("bad literal"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, Error> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        self.ws();
        match self.b.get(self.i) {
            None => Err(self.err("unexpected end")),
            Some(b'n') => self.lit(b"null", Value::Null),
            Some(b't') => self.lit(b"true", Value::Bool(true)),
            Some(b'f') => self.lit(b"false", Value::Bool(false)),
            Some(b'"') => self.string().map(Value::String),
            Some(b'[') => {
                self.i += 1;
                let mut a = Vec::new();
                self.ws();
                if self.eat(b']') {
                    return Ok(Value::Array(a));
                }
                loop {
                    a.push(self.value(depth + 1)?);
                    self.ws();
                    if self.eat(b']') {
                        return Ok(Value::Array(a));
                    }
                    if !self.eat(b',') {
                        return Err(self.err("expected , or ]"));
                    }
                }
            }
            Some(b'{') => {
                self.i += 1;
                let mut m = Vec::new();
                self.ws();
                if self.eat(b'}') {
                    return Ok(Value::Object(m));
                }
                loop {
                    self.ws();
                    if self.b.get(self.i) != Some(&b'"') {
                        return Err(self.err("expected a member name"));
                    }
                    let k = self.string()?;
                    self.ws();
                    if !self.eat(b':') {
                        return Err(self.err("expected :"));
                    }
                    m.push((k, self.value(depth + 1)?));
                    self.ws();
                    if self.eat(b'}') {
                        return Ok(Value::Object(m));
                    }
                    if !self.eat(b',') {
                        return Err(self.err("expected , or }"));
                    }
                }
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    fn digits(&mut self) -> usize {
        let s = self.i;
        while let Some(b'0'..=b'9') = self.b.get(self.i) {
            self.i += 1;
        }
        self.i - s
    }

    fn number(&mut self) -> Result<Value, Error> {
        let s = self.i;
        self.eat(b'-');
        let int = self.i;
        if self.digits() == 0 || (self.b[int] == b'0' && self.i - int > 1) {
            return Err(self.err("bad number"));
        }
        if self.eat(b'.') && self.digits() == 0 {
            return Err(self.err("bad fraction"));
        }
        if self.eat(b'e') || self.eat(b'E') {
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            if self.digits() == 0 {
                return Err(self.err("bad exponent"));
            }
        }
        // The bytes are ASCII digits and signs.
        Ok(Value::Number(String::from_utf8_lossy(&self.b[s..self.i]).into_owned()))
    }

    fn hex4(&mut self) -> Result<u32, Error> {
        let h = self.b.get(self.i..self.i + 4).ok_or_else(|| self.err("short \\u escape"))?;
        let s = std::str::from_utf8(h).map_err(|_| self.err("bad \\u escape"))?;
        let v = u32::from_str_radix(s, 16).map_err(|_| self.err("bad \\u escape"))?;
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, Error> {
        self.i += 1; // the opening quote
        let mut out: Vec<u8> = Vec::new();
        loop {
            let c = *self.b.get(self.i).ok_or_else(|| self.err("unterminated string"))?;
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = *self.b.get(self.i).ok_or_else(|| self.err("unterminated string"))?;
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let mut v = self.hex4()?;
                            if (0xd800..0xdc00).contains(&v) && self.b[self.i..].starts_with(b"\\u") {
                                let save = self.i;
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xdc00..0xe000).contains(&lo) {
                                    v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
                                } else {
                                    self.i = save;
                                }
                            }
                            char::from_u32(v).unwrap_or('\u{fffd}')
                        }
                        _ => return Err(self.err("bad escape")),
                    };
                    let mut tmp = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                }
                c if c < 0x20 => return Err(self.err("control character in string")),
                c => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| self.err("invalid UTF-8 in string"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let src = r#"{"a":[1,-2.5e3,true,false,null],"b":"x\"\\\n\u00e9\ud83d\ude00","c":{}}"#;
        let v = parse(src.as_bytes()).unwrap();
        assert_eq!(v.get("b").and_then(Value::as_str), Some("x\"\\\né😀"));
        assert_eq!(parse(v.encode().as_bytes()).unwrap(), v);
    }

    #[test]
    fn hostile() {
        for bad in [
            "", "{", "[1,]", "{\"a\"}", "01", "1.", "\"\\x\"", "\"a", "nul", "[1] x", "\"\u{1}\"",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{:?} parsed", bad);
        }
        let deep = "[".repeat(10_000);
        assert!(parse(deep.as_bytes()).is_err());
        assert!(parse(&[b'"', 0xff, b'"']).is_err());
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("a\"b\u{1}"), r#""a\"b\u0001""#);
        assert_eq!(Object::new().strs("m", &["GET"]).num("n", 3).finish(), r#"{"m":["GET"],"n":3}"#);
    }
}
