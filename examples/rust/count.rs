//! count is an example latent-node HTTP handler in Rust for the WAGI ABI,
//! built without cargo:
//!
//!     rustc --edition 2021 -O --target wasm32-wasip1 -o count.wasm count.rs
//!
//! (Debian's rustc 1.63 names the target wasm32-wasi.) It counts the words,
//! lines or bytes of a text: the body of a POST, or the `text` parameter of
//! a GET's query (`?text=to+be+or+not`). The path below the node's route
//! picks the unit: `/words` (also the bare route), `/lines`, `/bytes`; an
//! `Accept: application/json` request header asks for
//! `{"count":4,"unit":"words"}` instead of the plain `4 words`. Every answer
//! carries `X-Example: rust-count`, a success also `X-Count`; another path
//! answers 404, another method 405, a body that is not UTF-8 400.
//!
//! Built with `--cfg reactor --crate-type cdylib` it is a reactor exporting
//! the same handler as `web` (see reactor.rs).

use std::io::{self, Read, Write};

#[cfg(reactor)]
mod reactor;

// A command (the default build) answers one request per activation, reading
// its environment as it started.
#[cfg(not(reactor))]
fn main() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if respond(handle(&var)).is_err() {
        std::process::exit(1);
    }
}

/// web is the entry function of the reactor build (`--cfg reactor
/// --crate-type cdylib`, see reactor.rs), called once per request: the CGI
/// variables are read from the host now, since `std::env` would answer with
/// the environment seen at `_initialize`. Returning is exit status 0.
#[cfg(reactor)]
#[no_mangle]
pub extern "C" fn web() {
    let env = reactor::environ();
    let var = |name: &str| env.get(name).cloned().unwrap_or_default();
    if respond(handle(&var)).is_err() {
        std::process::exit(1);
    }
}

/// respond writes the CGI answer to stdout and flushes it.
fn respond((status, content_type, extra, body): (u16, &str, Vec<(&str, String)>, String)) -> io::Result<()> {
    let mut out = io::stdout().lock();
    let mut head = format!(
        "Status: {}\nContent-Type: {}\nX-Example: rust-count\n",
        status, content_type
    );
    for (name, value) in extra {
        head.push_str(&format!("{}: {}\n", name, value));
    }
    head.push('\n');
    out.write_all(head.as_bytes())?;
    out.write_all(body.as_bytes())?;
    out.flush()
}

/// handle answers the request: status, Content-Type, other headers, body.
fn handle(var: &dyn Fn(&str) -> String) -> (u16, &'static str, Vec<(&'static str, String)>, String) {
    let path = var("PATH_INFO");
    let unit = match path.as_str() {
        "" | "/" | "/words" => "words",
        "/lines" => "lines",
        "/bytes" => "bytes",
        _ => return (404, "text/plain", vec![], format!("no unit {}: want /words, /lines or /bytes\n", path)),
    };
    let text = match var("REQUEST_METHOD").as_str() {
        "POST" => {
            let mut raw = Vec::new();
            if io::stdin().read_to_end(&mut raw).is_err() {
                return (500, "text/plain", vec![], "cannot read the body\n".to_string());
            }
            match String::from_utf8(raw) {
                Ok(s) => s,
                Err(_) => return (400, "text/plain", vec![], "the body is not UTF-8\n".to_string()),
            }
        }
        "GET" => match query_param(&var("QUERY_STRING"), "text") {
            Some(s) => s,
            None => return (400, "text/plain", vec![], "GET wants ?text=... (percent-encoded UTF-8)\n".to_string()),
        },
        m => return (405, "text/plain", vec![], format!("{} not allowed: want GET or POST\n", m)),
    };
    let n = match unit {
        "words" => text.split_whitespace().count(),
        "lines" => text.lines().count(),
        _ => text.len(),
    };
    let extra = vec![("X-Count", n.to_string())];
    if var("HTTP_ACCEPT").contains("application/json") {
        (200, "application/json", extra, format!("{{\"count\":{},\"unit\":\"{}\"}}\n", n, unit))
    } else {
        (200, "text/plain; charset=utf-8", extra, format!("{} {}\n", n, unit))
    }
}

/// query_param returns the decoded value of the first `key=` in a query,
/// None when it is missing or not UTF-8 once decoded.
fn query_param(query: &str, key: &str) -> Option<String> {
    for pair in query.split('&') {
        let mut kv = pair.splitn(2, '=');
        if kv.next() == Some(key) {
            return percent_decode(kv.next().unwrap_or(""));
        }
    }
    None
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}
