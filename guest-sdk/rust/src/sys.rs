//! The raw host calls of the `mandate` import module, and the safe shims
//! the rest of the crate calls them through.
//!
//! This is the only module of the crate with `unsafe` code. Every host
//! function takes only `i32` parameters and returns one `i32` errno (0 on
//! success); pointers are offsets into the guest's linear memory, lengths
//! are byte counts, and `out_*` pointers receive one little-endian `u32`
//! written only on success (see guest-sdk/ABI.md). The names and parameter
//! counts below are checked against the kernel's table (abi.HostCalls) by
//! abi_twins_rust_test.go at the repository's root.
//!
//! Calling the raw functions is `unsafe`: the kernel writes through the
//! out and buffer pointers it is given, so a caller that passes a pointer
//! it does not own lets the kernel overwrite memory Rust thinks is
//! elsewhere in use. The hostile guests of the attack suite do exactly that
//! on purpose; everything else goes through the shims, which pass only
//! live slices and `&mut u32`.
//!
//! Outside WebAssembly there is no kernel: every raw call returns
//! `ENOTSUP` (11), so code that uses the SDK still builds and tests on the
//! host, as the Go SDK does.

/// The raw imports, as the kernel registers them.
#[cfg(target_arch = "wasm32")]
pub mod raw {
    #[link(wasm_import_module = "mandate")]
    extern "C" {
        pub fn cap_lookup(name_ptr: *const u8, name_len: u32, out_handle_ptr: *mut u32) -> u32;
        pub fn cap_call(
            h: u32,
            op_ptr: *const u8,
            op_len: u32,
            arg_ptr: *const u8,
            arg_len: u32,
            out_handle_ptr: *mut u32,
        ) -> u32;
        pub fn cap_derive(h: u32, req_ptr: *const u8, req_len: u32, out_handle_ptr: *mut u32) -> u32;
        pub fn cap_revoke(h: u32) -> u32;
        pub fn cap_describe(h: u32, out_handle_ptr: *mut u32) -> u32;
        pub fn handle_drop(h: u32) -> u32;
        pub fn blob_create(ptr: *const u8, len: u32, out_handle_ptr: *mut u32) -> u32;
        pub fn blob_len(h: u32, out_len_ptr: *mut u32) -> u32;
        pub fn blob_read(h: u32, offset: u32, buf_ptr: *mut u8, buf_len: u32, out_n_ptr: *mut u32) -> u32;
        pub fn task_input(out_handle_ptr: *mut u32) -> u32;
        pub fn task_result(h: u32) -> u32;
        pub fn last_error(buf_ptr: *mut u8, buf_len: u32, out_n_ptr: *mut u32) -> u32;
        pub fn task_spawn(spawn_h: u32, req_ptr: *const u8, req_len: u32, out_task_ptr: *mut u32) -> u32;
        pub fn task_wait(task_h: u32, out_handle_ptr: *mut u32) -> u32;
        pub fn task_kill(task_h: u32) -> u32;
        pub fn plan_submit(req_ptr: *const u8, req_len: u32) -> u32;
        pub fn blob_part(
            h: u32,
            path_ptr: *const u8,
            path_len: u32,
            pattern_ptr: *const u8,
            pattern_len: u32,
            out_handle_ptr: *mut u32,
        ) -> u32;
    }
}

/// The raw imports off WebAssembly: each returns `ENOTSUP` and touches no
/// memory. They keep the imports' signatures (and stay `unsafe`), so code
/// written against them compiles on both.
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::missing_safety_doc)]
pub mod raw {
    const ENOTSUP: u32 = 11;
    pub unsafe fn cap_lookup(_: *const u8, _: u32, _: *mut u32) -> u32 { ENOTSUP }
    pub unsafe fn cap_call(_: u32, _: *const u8, _: u32, _: *const u8, _: u32, _: *mut u32) -> u32 { ENOTSUP }
    pub unsafe fn cap_derive(_: u32, _: *const u8, _: u32, _: *mut u32) -> u32 { ENOTSUP }
    pub unsafe fn cap_revoke(_: u32) -> u32 { ENOTSUP }
    pub unsafe fn cap_describe(_: u32, _: *mut u32) -> u32 { ENOTSUP }
    pub unsafe fn handle_drop(_: u32) -> u32 { ENOTSUP }
    pub unsafe fn blob_create(_: *const u8, _: u32, _: *mut u32) -> u32 { ENOTSUP }
    pub unsafe fn blob_len(_: u32, _: *mut u32) -> u32 { ENOTSUP }
    pub unsafe fn blob_read(_: u32, _: u32, _: *mut u8, _: u32, _: *mut u32) -> u32 { ENOTSUP }
    pub unsafe fn task_input(_: *mut u32) -> u32 { ENOTSUP }
    pub unsafe fn task_result(_: u32) -> u32 { ENOTSUP }
    pub unsafe fn last_error(_: *mut u8, _: u32, _: *mut u32) -> u32 { ENOTSUP }
    pub unsafe fn task_spawn(_: u32, _: *const u8, _: u32, _: *mut u32) -> u32 { ENOTSUP }
    pub unsafe fn task_wait(_: u32, _: *mut u32) -> u32 { ENOTSUP }
    pub unsafe fn task_kill(_: u32) -> u32 { ENOTSUP }
    pub unsafe fn plan_submit(_: *const u8, _: u32) -> u32 { ENOTSUP }
    pub unsafe fn blob_part(_: u32, _: *const u8, _: u32, _: *const u8, _: u32, _: *mut u32) -> u32 { ENOTSUP }
}

// The safe shims. Each passes the kernel only a live slice (its pointer
// and its length, which fits in u32 on wasm32, where usize is 32 bits; a
// slice longer than u32::MAX cannot exist there) and a `&mut u32` for the
// result. The kernel reads at most len bytes from an input slice, writes at
// most len bytes into an output slice and 4 bytes through the out pointer,
// and nothing else (ABI.md, "Conventions"), so none of them can touch
// memory Rust has not handed over for the call.

#[inline]
fn len(b: &[u8]) -> u32 {
    b.len() as u32
}

pub(crate) fn cap_lookup(name: &[u8], out: &mut u32) -> u32 {
    // SAFETY: see above.
    unsafe { raw::cap_lookup(name.as_ptr(), len(name), out) }
}

pub(crate) fn cap_call(h: u32, op: &[u8], arg: &[u8], out: &mut u32) -> u32 {
    // SAFETY: see above.
    unsafe { raw::cap_call(h, op.as_ptr(), len(op), arg.as_ptr(), len(arg), out) }
}

pub(crate) fn cap_derive(h: u32, req: &[u8], out: &mut u32) -> u32 {
    // SAFETY: see above.
    unsafe { raw::cap_derive(h, req.as_ptr(), len(req), out) }
}

pub(crate) fn cap_revoke(h: u32) -> u32 {
    // SAFETY: no pointers.
    unsafe { raw::cap_revoke(h) }
}

pub(crate) fn cap_describe(h: u32, out: &mut u32) -> u32 {
    // SAFETY: see above.
    unsafe { raw::cap_describe(h, out) }
}

pub(crate) fn handle_drop(h: u32) -> u32 {
    // SAFETY: no pointers.
    unsafe { raw::handle_drop(h) }
}

pub(crate) fn blob_create(data: &[u8], out: &mut u32) -> u32 {
    // SAFETY: see above.
    unsafe { raw::blob_create(data.as_ptr(), len(data), out) }
}

pub(crate) fn blob_len(h: u32, out: &mut u32) -> u32 {
    // SAFETY: see above.
    unsafe { raw::blob_len(h, out) }
}

pub(crate) fn blob_read(h: u32, offset: u32, buf: &mut [u8], out: &mut u32) -> u32 {
    let n = len(buf);
    // SAFETY: see above; buf is exclusively borrowed for the call.
    unsafe { raw::blob_read(h, offset, buf.as_mut_ptr(), n, out) }
}

pub(crate) fn task_input(out: &mut u32) -> u32 {
    // SAFETY: see above.
    unsafe { raw::task_input(out) }
}

pub(crate) fn task_result(h: u32) -> u32 {
    // SAFETY: no pointers.
    unsafe { raw::task_result(h) }
}

pub(crate) fn last_error(buf: &mut [u8], out: &mut u32) -> u32 {
    let n = len(buf);
    // SAFETY: see above; buf is exclusively borrowed for the call.
    unsafe { raw::last_error(buf.as_mut_ptr(), n, out) }
}

pub(crate) fn task_spawn(h: u32, req: &[u8], out: &mut u32) -> u32 {
    // SAFETY: see above.
    unsafe { raw::task_spawn(h, req.as_ptr(), len(req), out) }
}

pub(crate) fn task_wait(h: u32, out: &mut u32) -> u32 {
    // SAFETY: see above.
    unsafe { raw::task_wait(h, out) }
}

pub(crate) fn task_kill(h: u32) -> u32 {
    // SAFETY: no pointers.
    unsafe { raw::task_kill(h) }
}

pub(crate) fn plan_submit(req: &[u8]) -> u32 {
    // SAFETY: see above.
    unsafe { raw::plan_submit(req.as_ptr(), len(req)) }
}

pub(crate) fn blob_part(h: u32, path: &[u8], pattern: &[u8], out: &mut u32) -> u32 {
    // SAFETY: see above.
    unsafe { raw::blob_part(h, path.as_ptr(), len(path), pattern.as_ptr(), len(pattern), out) }
}
