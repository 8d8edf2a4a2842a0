//! The language server on a large project and on a small one: `locklint lsp` (the binary, as
//! an editor starts it) with the project as its workspace, a Rust file of about 2,000 lines
//! of the project opened (the server reads and analyses the whole project: the index is
//! built), then edits of that document one after the other, each sent once the diagnostics of
//! the one before arrived. Prints, per project: its files and lines, the time from opening
//! the document to its first diagnostics (with an empty analysis cache, then with the cache
//! the first run wrote), the time from each `didChange` to the diagnostics of its version
//! (median, 90th percentile, max), the server's peak RSS (`VmHWM`) and the load average (the
//! figures are wall times: on a shared machine, other work stretches them).
//!
//! The large project is the corpus of `benches/analyze.rs` (vendored into
//! `target/bench-corpus` on first use; `LOCKLINT_BENCH_CORPUS=/some/dir` for another tree),
//! the small one this repository. `LOCKLINT_BENCH_EDITS` sets the number of edits (50).
//!
//! `cargo bench --bench lsp`

#[path = "support/corpus.rs"]
mod corpus;
#[path = "../tests/support/frames.rs"]
mod frames;
#[path = "support/rss.rs"]
mod rss;

use serde_json::{json, Value};
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A `locklint lsp` process and the messages it writes, each with when it was read.
struct Server {
    child: Child,
    stdin: ChildStdin,
    incoming: Receiver<(Instant, Value)>,
    next_id: i64,
}

impl Server {
    /// Starts the server on `root` (the analysis cache in `cache`) and initialises it.
    fn start(root: &Path, cache: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_locklint"))
            .arg("lsp")
            .env("LOCKLINT_CACHE_DIR", cache)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start locklint lsp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, incoming) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            while let Some(body) = frames::read_frame(&mut r) {
                let msg: Value = serde_json::from_slice(&body).unwrap();
                if tx.send((Instant::now(), msg)).is_err() {
                    return;
                }
            }
        });
        let mut server = Server {
            child,
            stdin,
            incoming,
            next_id: 0,
        };
        let uri = url::Url::from_file_path(root).unwrap().to_string();
        let id = server.request(
            "initialize",
            json!({ "processId": null, "rootUri": uri, "capabilities": {} }),
        );
        server.wait(|m| m["id"] == id);
        server.send(json!({ "jsonrpc": "2.0", "method": "initialized", "params": {} }));
        server
    }

    fn send(&mut self, msg: Value) {
        let body = msg.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    /// When the first message matching `pred` was read (others are skipped).
    fn wait(&self, pred: impl Fn(&Value) -> bool) -> Instant {
        loop {
            let (at, m) = self
                .incoming
                .recv_timeout(Duration::from_secs(600))
                .expect("the server answered in time");
            if pred(&m) {
                return at;
            }
        }
    }

    /// When the diagnostics of `uri` at `version` were read.
    fn diagnostics(&self, uri: &str, version: i64) -> Instant {
        self.wait(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && m["params"]["version"] == version
        })
    }

    /// The server's peak resident set, in KiB.
    fn peak_rss_kib(&self) -> u64 {
        rss::peak_rss_kib(&self.child.id().to_string())
    }

    fn stop(mut self) {
        let id = self.request("shutdown", Value::Null);
        self.wait(|m| m["id"] == id);
        self.send(json!({ "jsonrpc": "2.0", "method": "exit" }));
        let _ = self.child.wait();
    }
}

/// The project's Rust, `.sql` and `.lua` files as the server's walk finds them, with their
/// line counts.
fn files_of(root: &Path) -> Vec<(PathBuf, usize)> {
    let (files, _) =
        locklint::discover::discover(&[root.to_path_buf()], &[], std::sync::Arc::new(|_| false));
    files
        .into_iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let lines = text.lines().count();
            Some((p, lines))
        })
        .collect()
}

/// The document to edit: the Rust file whose length is nearest 2,000 lines among those that
/// can hold lock code (the prefilter lets them through: the front-end reads them on every
/// change).
fn document(files: &[(PathBuf, usize)]) -> PathBuf {
    files
        .iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "rs"))
        .filter(|(p, _)| {
            std::fs::read_to_string(p)
                .is_ok_and(|t| locklint::frontend::prefilter::can_contribute(&t))
        })
        .min_by_key(|(_, lines)| lines.abs_diff(2000))
        .map(|(p, _)| p.clone())
        .expect("a Rust file")
}

/// One session: the server started on `root`, `doc` opened; the time to its first
/// diagnostics; then `edits` edits, each timed to the diagnostics of its version; and the peak
/// RSS at the end.
fn session(root: &Path, doc: &Path, cache: &Path, edits: usize) -> (Duration, Vec<Duration>, u64) {
    let mut server = Server::start(root, cache);
    let uri = url::Url::from_file_path(doc).unwrap().to_string();
    let text = std::fs::read_to_string(doc).unwrap();
    let lines = text.lines().count();
    let sent = Instant::now();
    server.send(
        json!({ "jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": { "uri": uri, "languageId": "rust", "version": 1, "text": text } } }),
    );
    let build = server.diagnostics(&uri, 1) - sent;
    let mut times = Vec::with_capacity(edits);
    for k in 0..edits {
        let version = k as i64 + 2;
        // a keystroke at the end of the document, in a comment line of its own
        let change = if k == 0 {
            json!({ "range": { "start": { "line": lines, "character": 0 }, "end": { "line": lines, "character": 0 } }, "text": "// x" })
        } else {
            json!({ "range": { "start": { "line": lines, "character": 3 + k }, "end": { "line": lines, "character": 3 + k } }, "text": "x" })
        };
        let sent = Instant::now();
        server.send(
            json!({ "jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": { "uri": uri, "version": version }, "contentChanges": [change] } }),
        );
        times.push(server.diagnostics(&uri, version) - sent);
    }
    let rss = server.peak_rss_kib();
    server.stop();
    (build, times, rss)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The `q` quantile of sorted durations (nearest rank).
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn report(name: &str, root: &Path, edits: usize) {
    let files = files_of(root);
    let lines: usize = files.iter().map(|(_, l)| l).sum();
    let doc = document(&files);
    let doc_lines = std::fs::read_to_string(&doc).map_or(0, |t| t.lines().count());
    let cache = std::env::temp_dir().join(format!("locklint-bench-lsp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let (cold, mut times, rss) = session(root, &doc, &cache, edits);
    let (warm, _, _) = session(root, &doc, &cache, 0);
    let _ = std::fs::remove_dir_all(&cache);
    times.sort();
    println!("{name}: {}", root.display());
    println!("  files, lines:                 {}, {lines}", files.len());
    println!(
        "  document:                     {} ({doc_lines} lines)",
        doc.strip_prefix(root).unwrap_or(&doc).display()
    );
    println!(
        "  index build (open → diagnostics): {:.0} ms with an empty analysis cache, {:.0} ms with a warm one",
        ms(cold),
        ms(warm)
    );
    println!(
        "  didChange → diagnostics ({} edits): median {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        times.len(),
        ms(quantile(&times, 0.5)),
        ms(quantile(&times, 0.9)),
        ms(*times.last().unwrap_or(&Duration::ZERO))
    );
    println!(
        "  peak RSS of the server:       {:.0} MiB",
        rss as f64 / 1024.0
    );
    println!(
        "  load average:                 {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}

fn main() {
    let edits = std::env::var("LOCKLINT_BENCH_EDITS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(50);
    report(
        "large project (the benchmark corpus)",
        &corpus::corpus(),
        edits,
    );
    report(
        "small project (this repository)",
        Path::new(env!("CARGO_MANIFEST_DIR")),
        edits,
    );
}
