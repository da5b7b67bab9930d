//! Errno values, the result of every host call (guest-sdk/abi/errno.go).

use std::fmt;

/// The result of a host call; the same names and values as the Go SDK's
/// `abi.Errno` (checked by abi_twins_rust_test.go). Values are stable: new
/// ones are only appended.
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Errno {
    /// success
    ESUCCESS = 0,
    /// the handle is not in the caller's table: invented, stale or foreign
    EBADHANDLE = 1,
    /// the capability does not allow this (scope, op, widening)
    EDENIED = 2,
    /// the capability or one of its ancestors was revoked
    EREVOKED = 3,
    /// the capability has expired
    EEXPIRED = 4,
    /// the data's label may not flow to this sink
    EFLOW = 5,
    /// a size, count or budget limit was reached
    ELIMIT = 6,
    /// a pointer or length lies outside the guest's memory
    EFAULT = 7,
    /// a malformed argument (bad encoding, bad name)
    EINVAL = 8,
    /// a required approval was refused
    EAPPROVAL = 9,
    /// no such capability name, or no input
    ENOTFOUND = 10,
    /// the capability's kind has no such operation
    ENOTSUP = 11,
    /// the effect failed outside the kernel (upstream error)
    EIO = 12,
    /// the effect did not finish within its timeout
    ETIMEDOUT = 13,
    /// the handle names a blob where a capability was expected, or the reverse
    EWRONGTYPE = 14,
    /// the kernel failed; the call was denied (fail closed)
    EINTERNAL = 15,
    /// the child task did not finish normally (failed, killed, out of limits)
    ECHILD = 16,
}

/// Every errno, in value order.
pub const ALL: [Errno; 17] = [
    Errno::ESUCCESS,
    Errno::EBADHANDLE,
    Errno::EDENIED,
    Errno::EREVOKED,
    Errno::EEXPIRED,
    Errno::EFLOW,
    Errno::ELIMIT,
    Errno::EFAULT,
    Errno::EINVAL,
    Errno::EAPPROVAL,
    Errno::ENOTFOUND,
    Errno::ENOTSUP,
    Errno::EIO,
    Errno::ETIMEDOUT,
    Errno::EWRONGTYPE,
    Errno::EINTERNAL,
    Errno::ECHILD,
];

impl Errno {
    /// The errno of a raw value; `None` for a value this SDK does not know
    /// (one a newer kernel appended).
    pub fn from_code(code: u32) -> Option<Errno> {
        ALL.get(code as usize).copied()
    }

    /// The raw value.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The symbolic name, e.g. "EDENIED".
    pub fn name(self) -> &'static str {
        match self {
            Errno::ESUCCESS => "ESUCCESS",
            Errno::EBADHANDLE => "EBADHANDLE",
            Errno::EDENIED => "EDENIED",
            Errno::EREVOKED => "EREVOKED",
            Errno::EEXPIRED => "EEXPIRED",
            Errno::EFLOW => "EFLOW",
            Errno::ELIMIT => "ELIMIT",
            Errno::EFAULT => "EFAULT",
            Errno::EINVAL => "EINVAL",
            Errno::EAPPROVAL => "EAPPROVAL",
            Errno::ENOTFOUND => "ENOTFOUND",
            Errno::ENOTSUP => "ENOTSUP",
            Errno::EIO => "EIO",
            Errno::ETIMEDOUT => "ETIMEDOUT",
            Errno::EWRONGTYPE => "EWRONGTYPE",
            Errno::EINTERNAL => "EINTERNAL",
            Errno::ECHILD => "ECHILD",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name of a raw errno value, `Errno(N)` for one this SDK does not
/// know (as the Go SDK's Errno.String).
pub fn name_of(code: u32) -> String {
    match Errno::from_code(code) {
        Some(e) => e.name().to_string(),
        None => format!("Errno({})", code),
    }
}
