//! `lsp`: byte streams for the language server, run in memory through `locklint::lsp::run`
//! (framing, JSON-RPC, documents, incremental edits, requests, analyses). Checks that every
//! frame the server writes is a JSON-RPC object and, in a conversation without `exit`, that
//! every request read gets an answer.

use super::{files, has_ext, Target};
use crate::gen;
use crate::rng::{Draw, Rng};
use locklint::lsp::protocol::{self, Incoming};
use locklint::lsp::transport::{Frame, Reader};
use locklint::lsp::{analysis, run as serve, Config};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{Cursor, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the server writes, kept in memory.
#[derive(Clone, Default)]
struct Written(Arc<Mutex<Vec<u8>>>);

impl Write for Written {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Request ids read from `input` (as JSON text, with their count), and whether `exit` came.
fn requests(input: &[u8]) -> (HashMap<String, usize>, bool) {
    let mut ids = HashMap::new();
    let mut r = Reader::new(Cursor::new(input));
    loop {
        match r.read_frame() {
            Frame::Body(body) => match protocol::parse(&body) {
                Incoming::Request(req) => *ids.entry(req.id.to_string()).or_insert(0) += 1,
                Incoming::Notification(n) if n.method == "exit" => return (ids, true),
                _ => {}
            },
            Frame::Skipped(_) => {}
            Frame::Broken(_) | Frame::Eof => return (ids, false),
        }
    }
}

fn run(input: &[u8]) {
    let out = Written::default();
    let code = serve(
        Cursor::new(input.to_vec()),
        Box::new(out.clone()),
        Config {
            debounce: Duration::ZERO,
            analyser: Box::new(analysis::Indexed::default()),
        },
    );
    assert!(code <= 1, "exit status {code}");
    let written = out.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut answered: HashMap<String, usize> = HashMap::new();
    let mut r = Reader::new(Cursor::new(written));
    loop {
        match r.read_frame() {
            Frame::Body(body) => {
                let v: Value = serde_json::from_slice(&body).expect("the server writes JSON");
                assert_eq!(v["jsonrpc"], "2.0", "{v}");
                if v.get("method").is_none() {
                    assert!(v.get("result").is_some() != v.get("error").is_some(), "{v}");
                    *answered.entry(v["id"].to_string()).or_insert(0) += 1;
                }
            }
            Frame::Eof => break,
            other => panic!("the server wrote a bad frame: {other:?}"),
        }
    }
    let (asked, exited) = requests(input);
    if !exited {
        for (id, n) in asked {
            let got = answered.get(&id).copied().unwrap_or(0);
            assert!(
                got >= n,
                "request {id} asked {n} times, answered {got} times"
            );
        }
    }
}

fn frame(msg: &Value) -> Vec<u8> {
    let body = msg.to_string();
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

fn root_uri() -> String {
    format!("file://{}", files::scratch_dir().display())
}

fn initialize() -> Vec<u8> {
    let mut out = frame(
        &json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": { "rootUri": root_uri(), "capabilities": {} } }),
    );
    out.extend(frame(
        &json!({ "jsonrpc": "2.0", "method": "initialized", "params": {} }),
    ));
    out
}

fn language(ext: &str) -> &'static str {
    match ext {
        "sql" => "sql",
        "lua" => "lua",
        _ => "rust",
    }
}

/// A conversation about one fixture: open it, edit it, ask about it, shut down.
fn seed(path: &std::path::Path, bytes: &[u8]) -> Option<Vec<u8>> {
    let ext = ["rs", "sql", "lua"]
        .into_iter()
        .find(|e| has_ext(path, e))?;
    let text = String::from_utf8_lossy(bytes);
    let uri = format!("{}/fixture.{ext}", root_uri());
    let lines = text.lines().count();
    let mid = lines / 2;
    let mut out = initialize();
    let mut id = 1;
    let mut msg = |method: &str, params: Value, request: bool| {
        let mut m = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        if request {
            id += 1;
            m["id"] = json!(id);
        }
        out.extend(frame(&m));
    };
    let doc = json!({ "uri": uri });
    msg(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": uri, "languageId": language(ext), "version": 1, "text": text } }),
        false,
    );
    let pos = |line: usize, character: usize| json!({ "line": line, "character": character });
    for line in [0, mid, lines.saturating_sub(1)] {
        msg(
            "textDocument/hover",
            json!({ "textDocument": doc, "position": pos(line, 8) }),
            true,
        );
    }
    msg(
        "textDocument/codeAction",
        json!({ "textDocument": doc, "range": { "start": pos(0, 0), "end": pos(lines, 0) }, "context": { "diagnostics": [] } }),
        true,
    );
    msg(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [
        { "range": { "start": pos(mid, 0), "end": pos(mid, 0) }, "text": "\n" },
        { "range": { "start": pos(mid + 1, 2), "end": pos(mid + 2, 1) }, "text": "é𝄞" },
    ] }),
        false,
    );
    msg(
        "textDocument/codeAction",
        json!({ "textDocument": doc, "range": { "start": pos(0, 0), "end": pos(0, 0) }, "context": { "diagnostics": [], "only": ["source.fixAll.locklint"] } }),
        true,
    );
    msg(
        "workspace/executeCommand",
        json!({ "command": "locklint.fixAll", "arguments": [uri] }),
        true,
    );
    msg("shutdown", Value::Null, true);
    Some(out)
}

/// A random position: mostly inside a small document, sometimes far outside or ill-typed.
fn position(rng: &mut Rng) -> Value {
    match rng.below(12) {
        0 => json!({ "line": u32::MAX, "character": u32::MAX }),
        1 => json!({ "line": -1, "character": 0 }),
        2 => json!({ "line": "3", "character": null }),
        3 => json!({}),
        _ => json!({ "line": rng.below(40), "character": rng.below(120) }),
    }
}

fn range(rng: &mut Rng) -> Value {
    json!({ "start": position(rng), "end": position(rng) })
}

fn method(rng: &mut Rng, names: &[&'static str]) -> &'static str {
    names[rng.below(names.len())]
}

/// A conversation of random messages about a few documents, with garbage frames mixed in.
fn generate(rng: &mut Rng, max: usize) -> Vec<u8> {
    let mut out = if rng.one_in(10) {
        Vec::new()
    } else {
        initialize()
    };
    let uris = [
        format!("{}/a.rs", root_uri()),
        format!("{}/b.sql", root_uri()),
        "untitled:Untitled-1".to_string(),
        "untitled:Untitled-2".to_string(),
    ];
    let mut version = 1;
    let mut id = 1;
    while out.len() < max {
        let uri = rng.pick(&uris).clone();
        let doc = json!({ "uri": uri });
        id += 1;
        let request = |method: &str, params: Value| json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let notify = |method: &str, params: Value| json!({ "jsonrpc": "2.0", "method": method, "params": params });
        let text_max = (max / 4).max(16);
        let msg = match rng.below(16) {
            0 | 1 => {
                let (lang, text) = match rng.below(3) {
                    0 => ("rust", gen::rust::generate(rng, text_max)),
                    1 => ("sql", gen::sql::generate(rng, text_max)),
                    _ => ("lua", gen::lua::generate(rng, text_max)),
                };
                notify(
                    "textDocument/didOpen",
                    json!({ "textDocument": { "uri": uri, "languageId": lang, "version": version, "text": text } }),
                )
            }
            2..=5 => {
                version += 1;
                let changes: Vec<Value> = (0..rng.range(1, 4))
                    .map(|_| {
                        let text = *rng.pick(&[
                            "",
                            "x",
                            "\n",
                            "é𝄞",
                            "let a = 1;\n",
                            "}",
                            "redis.call('del', KEYS[1])",
                        ]);
                        if rng.one_in(8) {
                            json!({ "text": text })
                        } else {
                            json!({ "range": range(rng), "text": text })
                        }
                    })
                    .collect();
                notify(
                    "textDocument/didChange",
                    json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": changes }),
                )
            }
            6 | 7 => request(
                "textDocument/hover",
                json!({ "textDocument": doc, "position": position(rng) }),
            ),
            8 | 9 => {
                let only = if rng.one_in(2) {
                    json!(["source.fixAll.locklint"])
                } else {
                    Value::Null
                };
                request(
                    "textDocument/codeAction",
                    json!({ "textDocument": doc, "range": range(rng), "context": { "diagnostics": [], "only": only } }),
                )
            }
            10 => request(
                "workspace/executeCommand",
                json!({ "command": rng.pick(&["locklint.fixAll", "locklint.explain", "other"]), "arguments": [uri] }),
            ),
            11 => notify(
                "$/cancelRequest",
                json!({ "id": rng.below(id as usize + 1) }),
            ),
            12 => notify(
                method(rng, &["textDocument/didSave", "textDocument/didClose"]),
                json!({ "textDocument": doc }),
            ),
            13 => request(
                method(rng, &["custom/unknown", "initialize", "shutdown"]),
                json!({}),
            ),
            14 => {
                // garbage: bad JSON, a bad header, an unterminated frame at the end
                let garbage = *rng.pick(&[
                    b"Content-Length: 5\r\n\r\n{\"id\"".as_slice(),
                    b"Content-Length: x\r\n\r\n{}",
                    b"X-Nothing\r\n\r\n",
                    b"Content-Length: 15\r\n\r\n{\"id\":1,\"m\":2}",
                    b"Content-Length: 1000000000000\r\n\r\n",
                ]);
                out.extend_from_slice(garbage);
                continue;
            }
            _ => json!({ "jsonrpc": "2.0", "id": [id], "method": 5, "params": "x" }),
        };
        out.extend(frame(&msg));
    }
    out
}

pub const TARGET: Target = Target {
    name: "lsp",
    about: "the language server's JSON-RPC input (framing, lifecycle, documents, edits, requests)",
    ext: "lsp",
    seed,
    builtin: &[
        "Content-Length: 2\r\n\r\n{}",
        "Content-Length: 52\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\r\n\r\n",
        "Content-Length: 99999999999999\r\n\r\n",
    ],
    generate: Some(generate),
    dictionary: &[
        "Content-Length: ",
        "\r\n\r\n",
        "{\"jsonrpc\":\"2.0\",",
        "\"id\":",
        "\"method\":\"textDocument/hover\"",
        "\"method\":\"textDocument/didChange\"",
        "\"range\":",
        "\"line\":4294967296",
        "\"character\":-1",
        "}",
        "]",
        "\"",
        "null",
        "é",
        "𝄞",
    ],
    run,
};
