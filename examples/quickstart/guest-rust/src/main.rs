//! The quickstart's tool, in Rust: it holds one net capability,
//! "flights", and tries five things. The kernel allows the first and
//! refuses the rest; the guest reports what happened to each, one line per
//! attempt, as its result. A port of ../guest/main.go: the same attempts,
//! the same lines.

use std::fmt::Write;

use mandate::json::Object;
use mandate::net::{fetch, Request};
use mandate::Error;

struct Report(String);

impl Report {
    fn say(&mut self, line: &str) {
        self.0.push_str(line);
        self.0.push('\n');
    }

    fn outcome<T>(&mut self, what: &str, r: &Result<T, Error>) {
        match r {
            Ok(_) => self.say(&format!("allowed  {}", what)),
            Err(e) if e.from_kernel() => self.say(&format!("denied   {}: {} ({})", what, e.errno, e.reason)),
            Err(e) => self.say(&format!("failed   {}: {}", what, e)),
        }
    }
}

fn main() {
    let mut report = Report(String::new());
    // Where the ungranted origin lives comes in as input: the guest knows
    // the address, it just has no capability for it.
    let evil = String::from_utf8_lossy(&mandate::input_bytes().unwrap_or_default()).into_owned();

    let flights = mandate::lookup("flights").expect("the manifest grants flights");

    // 1. Allowed: GET /search on the granted origin.
    match fetch(flights, &Request::get("/search?from=SFO&to=LIS")) {
        Ok(resp) => {
            let body = String::from_utf8_lossy(&resp.body);
            let mut line = String::new();
            let _ = write!(line, "allowed  GET /search -> {} {:?}", resp.status, body.trim());
            report.say(&line);
        }
        Err(e) => report.outcome::<()>("GET /search", &Err(e)),
    }

    // 2. Denied: the same capability, another origin.
    let r = fetch(flights, &Request::get(&format!("{}/collect?passport=X123", evil)));
    report.outcome(&format!("GET {}/collect (an origin never granted)", evil), &r);

    // 3. Denied: a path outside the granted prefix, even when dressed up.
    let r = fetch(flights, &Request::get("/search/../admin"));
    report.outcome("GET /search/../admin (outside the granted paths)", &r);

    // 4. Denied: asking for a wider capability (POST was never granted).
    let r = flights.derive(Object::new().strs("methods", &["GET", "POST"]).finish());
    report.outcome("derive methods [GET POST] (a widening)", &r);

    // 5. A narrower capability works until it is revoked.
    let oneway = flights.derive(Object::new().strs("paths", &["/search/oneway"]).finish());
    report.outcome("derive paths [/search/oneway] (a narrowing)", &oneway);
    if let Ok(oneway) = oneway {
        let r = fetch(oneway, &Request::get("/search/oneway?to=LIS"));
        report.outcome("GET /search/oneway with the narrowed capability", &r);
        report.outcome("revoke the narrowed capability", &oneway.revoke());
        let r = fetch(oneway, &Request::get("/search/oneway?to=LIS"));
        report.outcome("GET /search/oneway after revocation", &r);
    }
    mandate::set_result(report.0.as_bytes()).expect("set the result");
}
