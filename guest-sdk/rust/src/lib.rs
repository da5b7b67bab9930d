//! The Rust SDK for Mandate guests: safe wrappers over the host calls of
//! the `mandate` import module (guest-sdk/ABI.md), mirroring the Go SDK.
//!
//! A guest starts with no authority. It finds the capabilities its
//! manifest granted by name, calls them, narrows them, and reads the blobs
//! they return:
//!
//! ```no_run
//! use mandate::net::{fetch, Request};
//!
//! fn main() -> Result<(), mandate::Error> {
//!     let flights = mandate::lookup("flights")?;
//!     let oneway = flights.derive(r#"{"paths":["/search/oneway"]}"#)?;
//!     let resp = fetch(oneway, &Request::get("/search/oneway?to=LIS"))?;
//!     mandate::set_result(&resp.body)?;
//!     Ok(())
//! }
//! ```
//!
//! Every failure is an [`Error`] carrying the kernel's [`Errno`] and its
//! reason. Handles ([`Cap`], [`Blob`], [`Task`]) are plain numbers, `Copy`
//! like the Go SDK's values; `drop_handle` removes one from the task's
//! table. Build guests with `mandate build` (rustc and this crate alone)
//! or `cargo build --target wasm32-wasip1` (`wasm32-wasi` for a rustc older
//! than 1.78); off WebAssembly every call fails with `ENOTSUP`.
//!
//! A guest has no sockets and no preopened directories, so `std::net` and
//! `std::fs` fail whatever the manifest grants:
//! `TcpStream::connect("127.0.0.1:8080")` with "operation not supported on
//! this platform" (`ErrorKind::Unsupported`), `File::open("notes.json")`
//! with "failed to find a pre-opened file descriptor through which
//! \"notes.json\" could be opened". Use the capabilities instead: HTTP
//! through a net capability ([`net::fetch`]), records through a data
//! capability ([`Cap::call`] with "read", "query" or "write"), a file of the
//! person's as the task's input ([`input`]: `mandate run --input FILE`).
//!
//! The only `unsafe` code is in [`sys`], the import shims.
#![deny(unsafe_code)]

mod errno;
mod error;
pub mod json;
pub mod net;
#[allow(unsafe_code)]
pub mod sys;
mod plan;
mod task;

pub use errno::{name_of, Errno, ALL as ALL_ERRNOS};
pub use error::{errno_of, Error};
pub use plan::{submit_plan, PlanItem};
pub use task::{spawn, SpawnCap, SpawnRequest, Task};

/// The import module every host call lives in.
pub const MODULE_NAME: &str = "mandate";

/// Limits the kernel applies (guest-sdk/abi/abi.go).
pub const MAX_OP_LEN: usize = 64;
/// The longest capability name `cap_lookup` takes.
pub const MAX_NAME_LEN: usize = 256;
/// The longest argument document of `cap_call` and `cap_derive`.
pub const MAX_ARG_LEN: usize = 1 << 20;
/// The largest blob.
pub const MAX_BLOB_LEN: usize = 64 << 20;
/// The longest text `last_error` returns.
pub const MAX_ERROR_LEN: usize = 1024;

/// The host calls, in the order of abi.HostCalls.
pub const HOST_CALLS: [&str; 17] = [
    "cap_lookup",
    "cap_call",
    "cap_derive",
    "cap_revoke",
    "cap_describe",
    "handle_drop",
    "blob_create",
    "blob_len",
    "blob_read",
    "task_input",
    "task_result",
    "last_error",
    "task_spawn",
    "task_wait",
    "task_kill",
    "plan_submit",
    "blob_part",
];

pub(crate) fn sys_call_name(call: &str) -> bool {
    HOST_CALLS.contains(&call)
}

/// Turns a raw result into `Ok(out)` or the host call's `Error`.
pub(crate) fn check(call: &'static str, code: u32, out: u32) -> Result<u32, Error> {
    if code == 0 {
        Ok(out)
    } else {
        Err(Error::host(call, code))
    }
}

/// A handle to a capability in this task's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cap(u32);

/// Finds a capability the manifest granted under `name`.
pub fn lookup(name: &str) -> Result<Cap, Error> {
    let mut out = 0;
    let code = sys::cap_lookup(name.as_bytes(), &mut out);
    check("cap_lookup", code, out).map(Cap)
}

impl Cap {
    /// Wraps a raw handle (for hostile tests and other SDKs).
    pub fn from_handle(h: u32) -> Cap {
        Cap(h)
    }

    /// The raw handle.
    pub fn handle(self) -> u32 {
        self.0
    }

    /// Performs `op` with an argument document (a JSON object, per kind;
    /// ABI.md). The result is a blob, or `None` when the operation
    /// returns nothing.
    pub fn call(self, op: &str, args: impl AsRef<[u8]>) -> Result<Option<Blob>, Error> {
        let mut out = 0;
        let code = sys::cap_call(self.0, op.as_bytes(), args.as_ref(), &mut out);
        check("cap_call", code, out).map(Blob::from_raw)
    }

    /// `call`, then reads the result (and drops its handle): empty when
    /// the operation returns nothing. Reading raises this task's label to
    /// include the result's.
    pub fn call_bytes(self, op: &str, args: impl AsRef<[u8]>) -> Result<Vec<u8>, Error> {
        match self.call(op, args)? {
            None => Ok(Vec::new()),
            Some(b) => b.take(),
        }
    }

    /// `call` returning only the errno, without reading back a reason on
    /// failure: the cheapest round trip (benchmarks use it).
    pub fn call_no_result(self, op: &str, args: impl AsRef<[u8]>) -> Errno {
        let mut out = 0;
        let code = sys::cap_call(self.0, op.as_bytes(), args.as_ref(), &mut out);
        Errno::from_code(code).unwrap_or(Errno::EINTERNAL)
    }

    /// Asks for a narrower capability. `req` is the kind's narrowing
    /// request, a JSON document (ABI.md), e.g.
    /// `r#"{"paths":["/search/oneway"]}"#`. Asking for more than `self`
    /// allows fails with `EDENIED`.
    pub fn derive(self, req: impl AsRef<[u8]>) -> Result<Cap, Error> {
        let mut out = 0;
        let code = sys::cap_derive(self.0, req.as_ref(), &mut out);
        check("cap_derive", code, out).map(Cap)
    }

    /// Revokes `self` and everything derived from it, in every task.
    pub fn revoke(self) -> Result<(), Error> {
        check("cap_revoke", sys::cap_revoke(self.0), 0).map(|_| ())
    }

    /// The kernel's JSON description of `self`: its id, kind, ops and
    /// scope (never secrets).
    pub fn describe(self) -> Result<Vec<u8>, Error> {
        let mut out = 0;
        let code = sys::cap_describe(self.0, &mut out);
        Blob(check("cap_describe", code, out)?).take()
    }

    /// Removes `self` from this task's table (revokes nothing).
    pub fn drop_handle(self) -> Result<(), Error> {
        drop_handle(self.0)
    }
}

pub(crate) fn drop_handle(h: u32) -> Result<(), Error> {
    check("handle_drop", sys::handle_drop(h), 0).map(|_| ())
}

/// A handle to an immutable, labelled byte string the kernel holds.
///
/// A task can pass a blob on by handle (as a request body, a child's
/// input) without reading it, and so without taking on its label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Blob(u32);

impl Blob {
    /// Hands `data` to the kernel and returns its handle. The blob
    /// carries this task's label.
    pub fn new(data: &[u8]) -> Result<Blob, Error> {
        let mut out = 0;
        let code = sys::blob_create(data, &mut out);
        check("blob_create", code, out).map(Blob)
    }

    /// Wraps a raw handle.
    pub fn from_handle(h: u32) -> Blob {
        Blob(h)
    }

    fn from_raw(h: u32) -> Option<Blob> {
        if h == 0 {
            None
        } else {
            Some(Blob(h))
        }
    }

    /// The raw handle.
    pub fn handle(self) -> u32 {
        self.0
    }

    /// The blob's size. Asking does not read it.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(self) -> Result<usize, Error> {
        let mut out = 0;
        let code = sys::blob_len(self.0, &mut out);
        check("blob_len", code, out).map(|n| n as usize)
    }

    /// Copies blob bytes from `offset` into `buf` and returns how many (0
    /// at the end). Reading raises this task's label to include the
    /// blob's.
    pub fn read_at(self, buf: &mut [u8], offset: usize) -> Result<usize, Error> {
        let mut out = 0;
        let code = sys::blob_read(self.0, offset as u32, buf, &mut out);
        check("blob_read", code, out).map(|n| n as usize)
    }

    /// Reads the whole blob.
    pub fn bytes(self) -> Result<Vec<u8>, Error> {
        let n = self.len()?;
        let mut p = vec![0u8; n];
        let mut off = 0;
        while off < n {
            let m = self.read_at(&mut p[off..], off)?;
            if m == 0 {
                break;
            }
            off += m;
        }
        p.truncate(off);
        Ok(p)
    }

    /// Makes a blob of one part of this one (`blob_part`): the JSON value
    /// at `path`, the capture of `pattern` (a regular expression with one
    /// capture group, RE2 syntax) in the string at `path`, or with `path`
    /// "" in the blob's text (a fetched response's body). The part is a
    /// JSON value (a capture, a JSON string) labelled with that part's
    /// label only: reading it raises this task's label by the part's, not
    /// the whole blob's. A pattern must match exactly once (`EINVAL`).
    pub fn part(self, path: &str, pattern: &str) -> Result<Blob, Error> {
        let mut out = 0;
        let code = sys::blob_part(self.0, path.as_bytes(), pattern.as_bytes(), &mut out);
        check("blob_part", code, out).map(Blob)
    }

    /// Reads one part of the blob (`part`, then its bytes; the part's
    /// handle is dropped): its JSON value, raising this task's label by
    /// the part's label only.
    pub fn read_part(self, path: &str, pattern: &str) -> Result<Vec<u8>, Error> {
        self.part(path, pattern)?.take()
    }

    /// Reads the whole blob and drops its handle.
    pub fn take(self) -> Result<Vec<u8>, Error> {
        let r = self.bytes();
        let _ = self.drop_handle();
        r
    }

    /// Removes the blob's handle from this task's table.
    pub fn drop_handle(self) -> Result<(), Error> {
        drop_handle(self.0)
    }
}

/// The task's input blob; `None` when it has none.
pub fn input() -> Result<Option<Blob>, Error> {
    let mut out = 0;
    match sys::task_input(&mut out) {
        0 => Ok(Some(Blob(out))),
        10 => Ok(None), // ENOTFOUND: no input
        code => Err(Error::with_reason("task_input", code, String::new())),
    }
}

/// Reads the task's input: empty when there is none.
pub fn input_bytes() -> Result<Vec<u8>, Error> {
    match input()? {
        None => Ok(Vec::new()),
        Some(b) => b.take(),
    }
}

/// Makes `b` the task's result (the last call wins).
pub fn set_result_blob(b: Blob) -> Result<(), Error> {
    check("task_result", sys::task_result(b.0), 0).map(|_| ())
}

/// Makes `data` the task's result.
pub fn set_result(data: &[u8]) -> Result<(), Error> {
    set_result_blob(Blob::new(data)?)
}

/// The kernel's reason for this task's last failed call ("" when none).
pub fn last_error() -> String {
    let mut buf = [0u8; MAX_ERROR_LEN];
    let mut n = 0;
    if sys::last_error(&mut buf, &mut n) != 0 {
        return String::new();
    }
    let n = (n as usize).min(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Off WebAssembly there is no kernel: every call is ENOTSUP.
    #[test]
    fn off_wasm() {
        let e = lookup("flights").unwrap_err();
        assert_eq!((e.errno, e.call, e.from_kernel()), (Errno::ENOTSUP, "cap_lookup", true));
        assert!(e.is(Errno::ENOTSUP));
        assert_eq!(e.to_string(), "cap_lookup: ENOTSUP");
        assert_eq!(errno_of(&Blob::new(b"x")), Errno::ENOTSUP);
        assert_eq!(last_error(), "");
    }

    #[test]
    fn errnos() {
        for (i, e) in ALL_ERRNOS.iter().enumerate() {
            assert_eq!(e.code(), i as u32);
            assert_eq!(Errno::from_code(i as u32), Some(*e));
        }
        assert_eq!(Errno::from_code(17), None);
        assert_eq!(name_of(2), "EDENIED");
        assert_eq!(name_of(99), "Errno(99)");
        let e = Error::with_reason("cap_call", 99, "new".into());
        assert_eq!((e.errno, e.to_string()), (Errno::EINTERNAL, "cap_call: Errno(99): new".to_string()));
        assert!(!net::decode_response(b"").unwrap_err().from_kernel());
    }
}
