//! The length-overflow attack (../length-overflow/main.go) in Rust,
//! through the raw imports (mandate::sys::raw): ptr+len wrapping past
//! 2^32, lengths of 4 GiB, ranges that end one byte past memory, lengths
//! above each call's limit, and a read buffer that wraps. Limits are
//! checked before ranges, and ranges in 64-bit arithmetic (law 10): ELIMIT
//! or EFAULT, no effect, no crash. The report has the Go guest's keys, so
//! the suite holds it to the same row.

use mandate::json::Object;
use mandate::sys::raw;
use mandate::{name_of, Blob, MAX_ARG_LEN, MAX_BLOB_LEN, MAX_NAME_LEN, MAX_OP_LEN};

/// The last address of a 32-bit memory.
const TOP: u32 = 0xffff_ffff;

/// An address as the raw imports take it.
fn p(a: u32) -> *const u8 {
    a as usize as *const u8
}

/// The address of b's first byte.
fn addr(b: &[u8]) -> u32 {
    b.as_ptr() as usize as u32
}

struct Report(Object);

impl Report {
    fn rec(&mut self, k: &str, code: u32) {
        let o = std::mem::take(&mut self.0);
        self.0 = o.str(k, &name_of(code));
    }

    fn note(&mut self, k: &str, v: &str) {
        let o = std::mem::take(&mut self.0);
        self.0 = o.str(&format!("#{}", k), v);
    }
}

fn main() {
    let _ = mandate::input_bytes().expect("input");
    let web = mandate::lookup("web").expect("web").handle();
    let sp = mandate::lookup("spawner").expect("spawner").handle();
    let name = b"web";
    let fetch = b"fetch";
    let get: &[u8] = br#"{"method":"POST","url":"/api/overflow"}"#;
    let mut big = vec![0u8; MAX_ARG_LEN + 1];
    big[..get.len()].copy_from_slice(get);
    let b = Blob::new(b"hello, world").expect("blob").handle();
    let mut buf = [0u8; 16];
    let bufp = addr(&buf);
    let mut out: u32 = 0;
    let o: *mut u32 = &mut out;
    let mut r = Report(Object::new());

    // SAFETY: each length below runs past the end of memory or over a
    // limit (the point: the kernel must refuse it before touching memory);
    // the good calls write only into buf (16 bytes) and out.
    unsafe {
        r.rec("lookup_len_wrap", raw::cap_lookup(name.as_ptr(), TOP, o));
        r.rec("lookup_len_limit", raw::cap_lookup(name.as_ptr(), MAX_NAME_LEN as u32 + 1, o));
        r.rec(
            "op_len_wrap",
            raw::cap_call(web, fetch.as_ptr(), TOP - addr(fetch) + 2, get.as_ptr(), get.len() as u32, o),
        );
        r.rec("op_len_limit", raw::cap_call(web, fetch.as_ptr(), MAX_OP_LEN as u32 + 1, get.as_ptr(), get.len() as u32, o));
        r.rec("args_len_wrap", raw::cap_call(web, fetch.as_ptr(), 5, get.as_ptr(), TOP - addr(get) + 1, o));
        r.rec("args_len_4g", raw::cap_call(web, fetch.as_ptr(), 5, p(0), TOP, o));
        r.rec("args_len_limit", raw::cap_call(web, fetch.as_ptr(), 5, big.as_ptr(), big.len() as u32, o));
        r.rec("derive_len_wrap", raw::cap_derive(web, p(0x10), TOP - 0xf, o));
        r.rec("blob_create_wrap", raw::blob_create(p(TOP - 10), 20, o));
        r.rec("blob_create_limit", raw::blob_create(p(0), MAX_BLOB_LEN as u32 + 1, o));
        r.rec("blob_create_past_end", raw::blob_create(p(0x3fff_fff0), 0x11, o));
        r.rec("read_buf_wrap", raw::blob_read(b, 0, buf.as_mut_ptr(), TOP - bufp + 1, o));
        r.rec("read_offset_past_end", raw::blob_read(b, 13, buf.as_mut_ptr(), 16, o));
        r.rec("read_offset_4g", raw::blob_read(b, TOP, buf.as_mut_ptr(), 16, o));
        r.rec("last_error_wrap", raw::last_error(buf.as_mut_ptr(), TOP, o));
        r.rec("spawn_len_wrap", raw::task_spawn(sp, buf.as_ptr(), TOP - bufp + 1, o));
        // Good lengths still work.
        r.rec("read_ok", raw::blob_read(b, 7, buf.as_mut_ptr(), 16, o));
    }
    let n = (out as usize).min(buf.len());
    r.note("read", &String::from_utf8_lossy(&buf[..n]));
    mandate::set_result(r.0.finish().as_bytes()).expect("result");
}
