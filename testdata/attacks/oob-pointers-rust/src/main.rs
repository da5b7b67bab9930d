//! The oob-pointers attack (../oob-pointers/main.go) in Rust: every host
//! call gets pointers outside linear memory, names, ops, arguments,
//! buffers and, above all, out pointers on calls that would have an effect
//! (a fetch, a charge, a derive, a spawn), through the raw imports
//! (mandate::sys::raw). Every range is checked before anything happens
//! (law 10, EFAULT). The report has the Go guest's keys, so the suite
//! holds it to the same row.

use mandate::json::{self, Object};
use mandate::sys::raw;
use mandate::{name_of, Blob, SpawnRequest};

/// The last address of a 32-bit memory.
const TOP: u32 = 0xffff_ffff;

/// An address as the raw imports take it.
fn p(a: u32) -> *const u8 {
    a as usize as *const u8
}

fn pm(a: u32) -> *mut u8 {
    a as usize as *mut u8
}

fn pu(a: u32) -> *mut u32 {
    a as usize as *mut u32
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
}

fn main() {
    let input = mandate::input_bytes().expect("input");
    let input = json::parse(&input).expect("the suite's input");
    let me = input.get("self").and_then(|v| v.as_str()).unwrap_or("").to_string();
    let web = mandate::lookup("web").expect("web").handle();
    let card = mandate::lookup("card").expect("card").handle();
    let sp = mandate::lookup("spawner").expect("spawner").handle();
    let name = b"web";
    let fetch = b"fetch";
    let get: &[u8] = br#"{"method":"POST","url":"/api/oob-effect"}"#;
    let charge: &[u8] = br#"{"payee":"airline.example","amount":"10.00","currency":"USD","idempotency_key":"oob"}"#;
    let charge_op = b"charge";
    let derive: &[u8] = br#"{"paths":["/api/oob"]}"#;
    let spawn = SpawnRequest { module: me, timeout: Some("1s".into()), ..SpawnRequest::default() }.encode();
    let spawn = spawn.as_bytes();
    let mut out: u32 = 0;
    let o: *mut u32 = &mut out;
    let mut r = Report(Object::new());

    // SAFETY: every pointer below is either out of bounds (the point: the
    // kernel must refuse it before touching memory) or a live buffer of
    // this function (name, fetch, get, ..., out, blob contents).
    unsafe {
        r.rec("lookup_name_oob", raw::cap_lookup(p(0x7fff_fff0), 3, o));
        r.rec("lookup_out_oob", raw::cap_lookup(name.as_ptr(), 3, pu(TOP - 1)));
        r.rec("call_op_oob", raw::cap_call(web, p(TOP - 4), 5, get.as_ptr(), get.len() as u32, o));
        r.rec("call_args_oob", raw::cap_call(web, fetch.as_ptr(), 5, p(0x7000_0000), 64, o));
        // Effects whose result cannot be written: refused before they happen.
        r.rec("fetch_out_oob", raw::cap_call(web, fetch.as_ptr(), 5, get.as_ptr(), get.len() as u32, pu(TOP - 2)));
        r.rec(
            "fetch_out_unaligned_end",
            raw::cap_call(web, fetch.as_ptr(), 5, get.as_ptr(), get.len() as u32, pu(0x7fff_fffe)),
        );
        r.rec(
            "charge_out_oob",
            raw::cap_call(card, charge_op.as_ptr(), 6, charge.as_ptr(), charge.len() as u32, pu(TOP)),
        );
        r.rec("derive_out_oob", raw::cap_derive(web, derive.as_ptr(), derive.len() as u32, pu(TOP - 3)));
        r.rec("spawn_out_oob", raw::task_spawn(sp, spawn.as_ptr(), spawn.len() as u32, pu(TOP - 3)));
        r.rec("spawn_req_oob", raw::task_spawn(sp, p(0x7fff_0000), 100, o));
        r.rec("describe_out_oob", raw::cap_describe(web, pu(TOP)));
        r.rec("input_out_oob", raw::task_input(pu(TOP - 1)));
        r.rec("blob_create_oob", raw::blob_create(p(0x7fff_ff00), 0x200, o));
        let b = Blob::new(b"hello").expect("blob").handle();
        r.rec("blob_read_buf_oob", raw::blob_read(b, 0, pm(0x7fff_fff0), 16, o));
        r.rec("blob_read_out_oob", raw::blob_read(b, 0, pm(addr(name)), 3, pu(TOP)));
        r.rec("blob_len_out_oob", raw::blob_len(b, pu(TOP - 2)));
        r.rec("last_error_oob", raw::last_error(pm(TOP - 5), 100, o));
        r.rec("wait_out_oob", raw::task_wait(b, pu(TOP)));
        // The same calls with good pointers work.
        r.rec("fetch_ok", raw::cap_call(web, fetch.as_ptr(), 5, get.as_ptr(), get.len() as u32, o));
    }
    mandate::set_result(r.0.finish().as_bytes()).expect("result");
}
