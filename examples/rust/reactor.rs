//! The reactor support shared by wordfreq.rs and count.rs, compiled in with
//! `--cfg reactor` (a module of theirs, not a program):
//!
//!     rustc --edition 2021 -O --cfg reactor --crate-type cdylib \
//!         --target wasm32-wasip1 -o count-reactor.wasm count.rs
//!
//! A reactor is initialised once (`_initialize`) and its exported entry
//! function is then called once per activation. Two things a command gets
//! for free need doing by hand:
//!
//! - `_initialize`: rustc links a `cdylib` for WASI without wasi-libc's
//!   reactor start file, so the module would export no `_initialize` and
//!   wasm-ld would wrap every export in the constructors and destructors,
//!   run again on each call. Defining it here, calling the constructors
//!   once, makes the module a reactor (and removes the wrappers).
//! - the environment: `std::env::var` reads wasi-libc's `environ`, which is
//!   copied from the host once (at `_initialize` or at first use) and never
//!   again, while the node hands every activation its own environment
//!   (`LATENT_ACTIVATION_ID`, the WAGI CGI variables). `environ` reads it
//!   from the host on each call, through WASI's `environ_get`.
//!
//! Also: `std::io::stdout()` is buffered for the life of the instance, so an
//! entry function flushes it before returning; `std::io::stdin()` is too, so
//! an entry function reads it to the end (as both examples do) or leaves
//! nothing in its buffer for the next activation.

use std::collections::HashMap;

extern "C" {
    fn __wasm_call_ctors();
}

#[link(wasm_import_module = "wasi_snapshot_preview1")]
extern "C" {
    fn environ_sizes_get(count: *mut usize, buf_size: *mut usize) -> i32;
    fn environ_get(environ: *mut *mut u8, buf: *mut u8) -> i32;
}

/// _initialize is the reactor's initialisation: the static constructors
/// (wasi-libc's and Rust's), once, before any entry function.
#[no_mangle]
pub extern "C" fn _initialize() {
    unsafe { __wasm_call_ctors() }
}

#[allow(dead_code)] // wordfreq reads no variable
/// environ reads the environment from the host now: each variable once (the
/// first of a repeated name), values not UTF-8 replaced lossily. Empty if the
/// host refuses.
pub fn environ() -> HashMap<String, String> {
    let mut vars = HashMap::new();
    let (mut count, mut size) = (0usize, 0usize);
    if unsafe { environ_sizes_get(&mut count, &mut size) } != 0 || count == 0 {
        return vars;
    }
    let mut ptrs: Vec<*mut u8> = vec![std::ptr::null_mut(); count];
    let mut buf = vec![0u8; size];
    if unsafe { environ_get(ptrs.as_mut_ptr(), buf.as_mut_ptr()) } != 0 {
        return vars;
    }
    // The strings are NUL-terminated and follow each other in buf.
    for kv in buf.split(|&b| b == 0).take(count) {
        let kv = String::from_utf8_lossy(kv);
        let (k, v) = kv.split_once('=').unwrap_or((&kv, ""));
        vars.entry(k.to_string()).or_insert_with(|| v.to_string());
    }
    vars
}
