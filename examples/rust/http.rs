// http.rs: a wasi:http handler in Rust (a WASI 0.2 component of the
// wasi:http/proxy world), written against the canonical ABI directly, with
// no crate: the imports below are the functions a wasm32-wasip2 toolchain's
// bindings (wit-bindgen, the wasi crate) call. examples/build.sh rust
// compiles it for WASI preview 1 (wasm32-wasip1, or Debian's wasm32-wasi)
// and makes the component with wasm-tools (jco's `component embed` and
// `component new`, the WIT of testdata/components/wit) and the preview 1
// adapter, as rustc's wasm32-wasip2 target does: the component holds the
// program, the adapter that serves Rust's std (eprintln! below) over
// wasi:cli, and wit-component's shim and fixup modules. It answers like the
// JavaScript example:
//   GET  /                 a greeting
//   ANY  /echo             the request body, byte for byte, with its
//                          Content-Type, method, query and X-Echo
//   ANY  /stream           the request body, byte for byte, sent as it
//                          arrives (64 KiB at a time: a body of any size
//                          in a small memory)
//   GET  /status/<code>    that status (204 and 304 without a body)
//   GET  /big?mib=<n>      n MiB (at most 16) of a..z repeated
//   GET  /headers          the request's headers as JSON, sorted
//   GET  /fetch?url=<url>  an outgoing GET of url (http or https; the
//                          revision's allowed_outbound_hosts must list
//                          it): "status <n>" and the body it answered, or
//                          502 and the error-code the host gave
// and 404 otherwise; every answer has x-example: rust.

use std::alloc::{alloc, realloc, Layout};

#[link(wasm_import_module = "wasi:http/types@0.2.10")]
extern "C" {
    #[link_name = "[constructor]fields"]
    fn fields_new() -> u32;
    #[link_name = "[method]fields.append"]
    fn fields_append(f: u32, name: *const u8, name_len: usize, value: *const u8, value_len: usize, ret: *mut u8);
    #[link_name = "[method]fields.entries"]
    fn fields_entries(f: u32, ret: *mut u8);
    #[link_name = "[resource-drop]fields"]
    fn fields_drop(f: u32);
    #[link_name = "[method]incoming-request.method"]
    fn request_method(r: u32, ret: *mut u8);
    #[link_name = "[method]incoming-request.path-with-query"]
    fn request_path(r: u32, ret: *mut u8);
    #[link_name = "[method]incoming-request.headers"]
    fn request_headers(r: u32) -> u32;
    #[link_name = "[method]incoming-request.consume"]
    fn request_consume(r: u32, ret: *mut u8);
    #[link_name = "[resource-drop]incoming-request"]
    fn request_drop(r: u32);
    #[link_name = "[method]incoming-body.stream"]
    fn incoming_body_stream(b: u32, ret: *mut u8);
    #[link_name = "[resource-drop]incoming-body"]
    fn incoming_body_drop(b: u32);
    #[link_name = "[constructor]outgoing-response"]
    fn response_new(headers: u32) -> u32;
    #[link_name = "[method]outgoing-response.set-status-code"]
    fn response_set_status(r: u32, code: u32) -> u32;
    #[link_name = "[method]outgoing-response.body"]
    fn response_body(r: u32, ret: *mut u8);
    #[link_name = "[method]outgoing-body.write"]
    fn outgoing_body_write(b: u32, ret: *mut u8);
    #[link_name = "[static]outgoing-body.finish"]
    fn outgoing_body_finish(b: u32, has_trailers: u32, trailers: u32, ret: *mut u8);
    #[link_name = "[static]response-outparam.set"]
    fn outparam_set(out: u32, is_err: u32, resp: u32, a: u32, b: u64, c: u32, d: u32, e: u32, f: u32);
}

#[link(wasm_import_module = "wasi:http/types@0.2.10")]
extern "C" {
    #[link_name = "[constructor]outgoing-request"]
    fn outgoing_request_new(headers: u32) -> u32;
    #[link_name = "[method]outgoing-request.set-scheme"]
    fn outgoing_request_set_scheme(r: u32, is_some: u32, scheme: u32, other: *const u8, other_len: usize) -> u32;
    #[link_name = "[method]outgoing-request.set-authority"]
    fn outgoing_request_set_authority(r: u32, is_some: u32, p: *const u8, len: usize) -> u32;
    #[link_name = "[method]outgoing-request.set-path-with-query"]
    fn outgoing_request_set_path(r: u32, is_some: u32, p: *const u8, len: usize) -> u32;
    #[link_name = "[method]future-incoming-response.subscribe"]
    fn future_response_subscribe(f: u32) -> u32;
    #[link_name = "[method]future-incoming-response.get"]
    fn future_response_get(f: u32, ret: *mut u8);
    #[link_name = "[resource-drop]future-incoming-response"]
    fn future_response_drop(f: u32);
    #[link_name = "[method]incoming-response.status"]
    fn incoming_response_status(r: u32) -> u32;
    #[link_name = "[method]incoming-response.consume"]
    fn incoming_response_consume(r: u32, ret: *mut u8);
    #[link_name = "[resource-drop]incoming-response"]
    fn incoming_response_drop(r: u32);
}

#[link(wasm_import_module = "wasi:http/outgoing-handler@0.2.10")]
extern "C" {
    #[link_name = "handle"]
    fn outgoing_handle(request: u32, has_options: u32, options: u32, ret: *mut u8);
}

#[link(wasm_import_module = "wasi:io/poll@0.2.12")]
extern "C" {
    #[link_name = "[method]pollable.block"]
    fn pollable_block(p: u32);
    #[link_name = "[resource-drop]pollable"]
    fn pollable_drop(p: u32);
}

#[link(wasm_import_module = "wasi:io/streams@0.2.12")]
extern "C" {
    #[link_name = "[method]input-stream.blocking-read"]
    fn blocking_read(s: u32, len: u64, ret: *mut u8);
    #[link_name = "[resource-drop]input-stream"]
    fn input_stream_drop(s: u32);
    #[link_name = "[method]output-stream.blocking-write-and-flush"]
    fn blocking_write_and_flush(s: u32, p: *const u8, len: usize, ret: *mut u8);
    #[link_name = "[resource-drop]output-stream"]
    fn output_stream_drop(s: u32);
}

/// The allocator the host calls to place lists and strings it returns.
#[no_mangle]
pub unsafe extern "C" fn cabi_realloc(old: *mut u8, old_size: usize, align: usize, new_size: usize) -> *mut u8 {
    if new_size == 0 {
        return align as *mut u8;
    }
    let p = if old_size == 0 {
        alloc(Layout::from_size_align_unchecked(new_size, align))
    } else {
        realloc(old, Layout::from_size_align_unchecked(old_size, align), new_size)
    };
    if p.is_null() {
        std::process::abort();
    }
    p
}

/// A return area: the canonical ABI writes results of more than one value
/// through a pointer; 32 bytes aligned to 8 hold every result used here.
#[repr(C, align(8))]
struct Ret([u8; 32]);

impl Ret {
    fn new() -> Ret {
        Ret([0; 32])
    }
    fn ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr()
    }
    fn u8(&self, at: usize) -> u8 {
        self.0[at]
    }
    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes([self.0[at], self.0[at + 1], self.0[at + 2], self.0[at + 3]])
    }
    /// The (pointer, length) at `at` as owned bytes: the host allocated
    /// them with cabi_realloc, so they become a Vec we own.
    unsafe fn bytes(&self, at: usize) -> Vec<u8> {
        let (p, n) = (self.u32(at) as *mut u8, self.u32(at + 4) as usize);
        if n == 0 {
            return Vec::new();
        }
        Vec::from_raw_parts(p, n, n)
    }
}

const METHODS: [&str; 9] = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];

struct Request {
    method: String,
    path: String,
    query: String, // with its "?", or empty
    headers: Vec<(String, Vec<u8>)>,
    handle: u32,
}

unsafe fn read_request(handle: u32) -> Request {
    let mut r = Ret::new();
    request_method(handle, r.ptr());
    let method = match r.u8(0) as usize {
        i if i < METHODS.len() => METHODS[i].to_string(),
        _ => String::from_utf8_lossy(&r.bytes(4)).into_owned(), // other(string)
    };
    let mut r = Ret::new();
    request_path(handle, r.ptr());
    let pq = if r.u8(0) == 1 { String::from_utf8_lossy(&r.bytes(4)).into_owned() } else { "/".to_string() };
    let (path, query) = match pq.find('?') {
        Some(i) => (pq[..i].to_string(), pq[i..].to_string()),
        None => (pq.clone(), String::new()),
    };
    let fields = request_headers(handle);
    let mut r = Ret::new();
    fields_entries(fields, r.ptr());
    let (list, n) = (r.u32(0) as *mut u8, r.u32(4) as usize);
    let mut headers = Vec::with_capacity(n);
    for i in 0..n {
        let e = list.add(i * 16);
        let word = |o: usize| u32::from_le_bytes(*(e.add(o) as *const [u8; 4])) as usize;
        let name = Vec::from_raw_parts(word(0) as *mut u8, word(4), word(4));
        let value = Vec::from_raw_parts(word(8) as *mut u8, word(12), word(12));
        headers.push((String::from_utf8_lossy(&name).into_owned(), value));
    }
    if n > 0 {
        drop(Vec::from_raw_parts(list, n * 16, n * 16));
    }
    fields_drop(fields);
    Request { method, path, query, headers, handle }
}

impl Request {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_slice())
    }

    /// The body, read to its end.
    unsafe fn body(&self) -> Vec<u8> {
        let mut r = Ret::new();
        request_consume(self.handle, r.ptr());
        if r.u8(0) != 0 {
            return Vec::new();
        }
        read_body(r.u32(4))
    }
}

/// read_body reads the incoming body to its end and drops it.
unsafe fn read_body(body: u32) -> Vec<u8> {
    let mut r = Ret::new();
    incoming_body_stream(body, r.ptr());
    let mut out = Vec::new();
    if r.u8(0) == 0 {
        let stream = r.u32(4);
        loop {
            let mut r = Ret::new();
            blocking_read(stream, 64 << 10, r.ptr());
            if r.u8(0) != 0 {
                break; // closed (or failed): the end of the body
            }
            out.extend_from_slice(&r.bytes(4));
        }
        input_stream_drop(stream);
    }
    incoming_body_drop(body);
    out
}

/// The error-code cases the node answers, by index.
const ERROR_CODES: [(u8, &str); 7] = [(2, "destination-not-found"), (6, "connection-refused"), (8, "connection-timeout"),
    (15, "HTTP-request-denied"), (28, "HTTP-response-body-size"), (35, "HTTP-protocol-error"), (38, "internal-error")];

fn error_code(i: u8) -> String {
    match ERROR_CODES.iter().find(|(n, _)| *n == i) {
        Some((_, name)) => name.to_string(),
        None => format!("error-code {}", i),
    }
}

/// fetch answers an outgoing GET of url: "status <n>\n" and its body, or
/// 502 with the error-code.
unsafe fn fetch(out: u32, url: &str) {
    let (scheme, rest) = match url.split_once("://") {
        Some(("http", rest)) => (0, rest),
        Some(("https", rest)) => (1, rest),
        _ => return text(out, 400, "want /fetch?url=http://host[:port]/path or https://...\n"),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let req = outgoing_request_new(fields_new());
    outgoing_request_set_scheme(req, 1, scheme, std::ptr::null(), 0);
    outgoing_request_set_authority(req, 1, authority.as_ptr(), authority.len());
    outgoing_request_set_path(req, 1, path.as_ptr(), path.len());
    // result<future-incoming-response, error-code>: the case at 0, the
    // payload at 8.
    let mut r = Ret::new();
    outgoing_handle(req, 0, 0, r.ptr());
    if r.u8(0) != 0 {
        return text(out, 502, &format!("{}\n", error_code(r.u8(8))));
    }
    let future = r.u32(8);
    let ready = future_response_subscribe(future);
    pollable_block(ready);
    pollable_drop(ready);
    // option<result<result<incoming-response, error-code>>>: the option at
    // 0, the outer result at 8, the inner at 16, its payload at 24.
    let mut r = Ret::new();
    future_response_get(future, r.ptr());
    future_response_drop(future);
    if r.u8(0) != 1 || r.u8(8) != 0 {
        return text(out, 502, "no response\n");
    }
    if r.u8(16) != 0 {
        return text(out, 502, &format!("{}\n", error_code(r.u8(24))));
    }
    let resp = r.u32(24);
    let status = incoming_response_status(resp);
    let mut r = Ret::new();
    incoming_response_consume(resp, r.ptr());
    let body = if r.u8(0) == 0 { read_body(r.u32(4)) } else { Vec::new() };
    incoming_response_drop(resp);
    let mut msg = format!("status {}\n", status).into_bytes();
    msg.extend_from_slice(&body);
    send(out, 200, &[("content-type", b"text/plain; charset=utf-8"), ("x-example", b"rust")], &msg);
}

/// start sets the response (status, headers) through the response-outparam
/// and returns its outgoing body and that body's output stream.
unsafe fn start(out: u32, status: u32, headers: &[(&str, &[u8])]) -> (u32, u32) {
    let fields = fields_new();
    for (k, v) in headers {
        let mut r = Ret::new();
        fields_append(fields, k.as_ptr(), k.len(), v.as_ptr(), v.len(), r.ptr());
    }
    let resp = response_new(fields);
    response_set_status(resp, status);
    let mut r = Ret::new();
    response_body(resp, r.ptr());
    let obody = r.u32(4);
    outparam_set(out, 0, resp, 0, 0, 0, 0, 0, 0);
    let mut r = Ret::new();
    outgoing_body_write(obody, r.ptr());
    (obody, r.u32(4))
}

/// finish drops the output stream and finishes the outgoing body.
unsafe fn finish(obody: u32, ostream: u32) {
    output_stream_drop(ostream);
    let mut r = Ret::new();
    outgoing_body_finish(obody, 0, 0, r.ptr());
}

/// send answers status with headers and body through the response-outparam.
unsafe fn send(out: u32, status: u32, headers: &[(&str, &[u8])], body: &[u8]) {
    let (obody, stream) = start(out, status, headers);
    // blocking-write-and-flush takes at most 4096 bytes a call.
    for chunk in body.chunks(4096) {
        let mut r = Ret::new();
        blocking_write_and_flush(stream, chunk.as_ptr(), chunk.len(), r.ptr());
        if r.u8(0) != 0 {
            break;
        }
    }
    finish(obody, stream);
}

/// stream answers 200 at once and copies the request body to the
/// response as it arrives, never holding more than one read of it.
unsafe fn stream(request: u32, out: u32, req: &Request) {
    let ctype = req.header("content-type").unwrap_or(b"application/octet-stream").to_vec();
    let (obody, ostream) = start(out, 200, &[("content-type", ctype.as_slice()), ("x-example", b"rust")]);
    let mut r = Ret::new();
    request_consume(request, r.ptr());
    if r.u8(0) == 0 {
        let ibody = r.u32(4);
        let mut r = Ret::new();
        incoming_body_stream(ibody, r.ptr());
        if r.u8(0) == 0 {
            let istream = r.u32(4);
            loop {
                let mut r = Ret::new();
                blocking_read(istream, 64 << 10, r.ptr());
                if r.u8(0) != 0 {
                    break; // closed (or failed): the end of the body
                }
                let chunk = r.bytes(4);
                let mut w = Ret::new();
                blocking_write_and_flush(ostream, chunk.as_ptr(), chunk.len(), w.ptr());
                if w.u8(0) != 0 {
                    break; // the caller is gone
                }
            }
            input_stream_drop(istream);
        }
        incoming_body_drop(ibody);
    }
    request_drop(request);
    finish(obody, ostream);
}

unsafe fn text(out: u32, status: u32, body: &str) {
    send(out, status, &[("content-type", b"text/plain; charset=utf-8"), ("x-example", b"rust")], body.as_bytes());
}

/// json_string writes s as a JSON string.
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn query_param(query: &str, name: &str) -> Option<String> {
    query.trim_start_matches('?').split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        if k == name {
            Some(v.to_string())
        } else {
            None
        }
    })
}

#[export_name = "wasi:http/incoming-handler@0.2.10#handle"]
pub unsafe extern "C" fn handle(request: u32, out: u32) {
    let req = read_request(request);
    let path = req.path.as_str();
    if path == "/" || path.is_empty() {
        let msg = format!("hello from Rust: {} {}{}\n", req.method, path, req.query);
        request_drop(request);
        return text(out, 200, &msg);
    }
    if path == "/echo" {
        let body = req.body();
        let ctype = req.header("content-type").unwrap_or(b"application/octet-stream").to_vec();
        let n = body.len().to_string();
        let mut headers: Vec<(&str, &[u8])> = vec![
            ("content-type", &ctype),
            ("x-example", b"rust"),
            ("x-method", req.method.as_bytes()),
            ("x-query", req.query.as_bytes()),
            ("x-body-bytes", n.as_bytes()),
        ];
        if let Some(e) = req.header("x-echo") {
            headers.push(("x-echo", e));
        }
        send(out, 200, &headers, &body);
        return request_drop(request);
    }
    if path == "/stream" {
        return stream(request, out, &req);
    }
    if let Some(code) = path.strip_prefix("/status/") {
        request_drop(request);
        return match code.parse::<u32>() {
            Ok(c) if code.len() == 3 && (100..200).contains(&c) => text(out, 400, "informational statuses cannot be sent\n"),
            Ok(c) if c == 204 || c == 304 => send(out, c, &[("x-example", b"rust")], b""),
            Ok(c) if code.len() == 3 && (200..600).contains(&c) => text(out, c, &format!("status {}\n", c)),
            _ => text(out, 404, &format!("no route {}\n", path)),
        };
    }
    if path == "/big" {
        let mib = query_param(&req.query, "mib").and_then(|v| v.parse::<usize>().ok()).unwrap_or(1).min(16);
        request_drop(request);
        let body: Vec<u8> = (0..mib << 20).map(|i| b'a' + (i % 26) as u8).collect();
        return send(out, 200, &[("content-type", b"application/octet-stream"), ("x-example", b"rust")], &body);
    }
    if path == "/fetch" {
        let url = query_param(&req.query, "url").unwrap_or_default();
        request_drop(request);
        return fetch(out, &url);
    }
    if path == "/headers" {
        let mut all: Vec<(String, String)> =
            req.headers.iter().map(|(k, v)| (k.to_ascii_lowercase(), String::from_utf8_lossy(v).into_owned())).collect();
        all.sort();
        // Like a JavaScript Headers object: repeated names joined by ", ".
        let mut merged: Vec<(String, String)> = Vec::new();
        for (k, v) in all {
            match merged.last_mut() {
                Some((lk, lv)) if *lk == k => {
                    lv.push_str(", ");
                    lv.push_str(&v);
                }
                _ => merged.push((k, v)),
            }
        }
        let mut json = String::from("{");
        for (i, (k, v)) in merged.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            json_string(&mut json, k);
            json.push(':');
            json_string(&mut json, v);
        }
        json.push_str("}\n");
        request_drop(request);
        return send(out, 200, &[("content-type", b"application/json"), ("x-example", b"rust")], json.as_bytes());
    }
    let msg = format!("no route {}\n", path);
    // std's stderr: through the adapter to wasi:cli/stderr, which the node
    // keeps in the activation's log.
    eprintln!("http.rs: {} {}: no route", req.method, path);
    request_drop(request);
    text(out, 404, &msg)
}
