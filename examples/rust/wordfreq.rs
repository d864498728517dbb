//! wordfreq is an example latent-node function in Rust, built with plain
//! rustc (no cargo, no crates):
//!
//!     rustc --edition 2021 -O --target wasm32-wasip1 -o wordfreq.wasm wordfreq.rs
//!
//! (`--target wasm32-wasi` with older compilers, such as Debian's rustc with
//! libstd-rust-dev-wasm32). It reads UTF-8 text from stdin (the request body)
//! and writes to stdout (the answer body of a 200) the ten most frequent
//! words, lowercased, one per line as "<count> <word>", most frequent first
//! and ties in alphabetical order. A word is a run of alphanumeric
//! characters or apostrophes. A body that is not UTF-8 or has no words is
//! reported on stderr (the node returns stderr's tail in the problem) with
//! exit status 2, which the node reports as declared-error with exit_code 2.
//!
//! Built with `--cfg reactor --crate-type cdylib` it is a reactor exporting
//! the same function as `wordfreq` (see reactor.rs).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::process;

const TOP: usize = 10;

#[cfg(reactor)]
mod reactor;

// A command (the default build) runs main once per activation.
#[cfg(not(reactor))]
fn main() {
    if let Err((code, msg)) = run() {
        fail(code, &msg);
    }
}

/// wordfreq is the entry function of the reactor build (`--cfg reactor
/// --crate-type cdylib`, see reactor.rs), called once per activation:
/// returning is exit status 0, a failure exits through proc_exit.
#[cfg(reactor)]
#[no_mangle]
pub extern "C" fn wordfreq() {
    if let Err((code, msg)) = run() {
        fail(code, &msg);
    }
}

/// run reads the text on stdin and writes the ranking to stdout (flushed);
/// Err holds the exit status and the reason.
fn run() -> Result<(), (i32, String)> {
    let mut input = Vec::new();
    io::stdin()
        .read_to_end(&mut input)
        .map_err(|e| (1, format!("read stdin: {}", e)))?;
    let text = String::from_utf8(input).map_err(|e| (2, format!("the body is not UTF-8 text: {}", e)))?;
    let mut counts: HashMap<String, u64> = HashMap::new();
    for word in text
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
    {
        *counts.entry(word.to_lowercase()).or_insert(0) += 1;
    }
    if counts.is_empty() {
        return Err((2, "the body has no words".to_string()));
    }
    let mut ranked: Vec<(String, u64)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut out = io::BufWriter::new(io::stdout().lock());
    for (word, n) in ranked.iter().take(TOP) {
        writeln!(out, "{} {}", n, word).map_err(|e| (1, format!("write answer: {}", e)))?;
    }
    // Flushes the BufWriter and the process-wide stdout behind it.
    out.flush().map_err(|e| (1, format!("write answer: {}", e)))
}

/// fail writes msg to stderr and exits with status code.
fn fail(code: i32, msg: &str) -> ! {
    eprintln!("wordfreq: {}", msg);
    process::exit(code)
}
