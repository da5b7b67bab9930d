//! The SDK's error: a failed host call, with the kernel's errno and reason.

use std::fmt;

use crate::errno::{name_of, Errno};

/// A failed call, as the Go SDK's `*mandate.Error`: the host call, the
/// kernel's errno and its reason (from `last_error`).
///
/// Failures on the guest's side of the boundary (a response the SDK
/// cannot decode) carry `EINVAL` and a `call` naming the SDK function
/// (e.g. `"net::decode_response"`), so `from_kernel` tells them apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The errno; `EINTERNAL` for a value this SDK does not know (see
    /// `code`).
    pub errno: Errno,
    /// The raw errno value the kernel returned.
    pub code: u32,
    /// The host call, e.g. "cap_call".
    pub call: &'static str,
    /// The kernel's explanation, if any. Act on the errno, not on this.
    pub reason: String,
}

impl Error {
    /// An error for host call `call` that returned `code`, with the
    /// kernel's reason read from `last_error`.
    pub(crate) fn host(call: &'static str, code: u32) -> Error {
        Error::with_reason(call, code, crate::last_error())
    }

    /// An error with a reason of the caller's.
    pub(crate) fn with_reason(call: &'static str, code: u32, reason: String) -> Error {
        Error {
            errno: Errno::from_code(code).unwrap_or(Errno::EINTERNAL),
            code,
            call,
            reason,
        }
    }

    /// A failure on the guest's side (bad input to decode): EINVAL.
    pub(crate) fn guest(call: &'static str, reason: impl Into<String>) -> Error {
        Error::with_reason(call, Errno::EINVAL.code(), reason.into())
    }

    /// Whether the kernel returned this error (rather than the SDK).
    pub fn from_kernel(&self) -> bool {
        crate::sys_call_name(self.call)
    }

    /// Whether the errno is `e` (the Go SDK's `errors.Is(err, abi.E...)`).
    pub fn is(&self, e: Errno) -> bool {
        self.code == e.code()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.call, name_of(self.code))?;
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// The errno of a result: `ESUCCESS` for `Ok`.
pub fn errno_of<T>(r: &Result<T, Error>) -> Errno {
    match r {
        Ok(_) => Errno::ESUCCESS,
        Err(e) => e.errno,
    }
}
