//! `locklint lsp` end to end: a real client conversation over stdio (initialize, didOpen,
//! publishDiagnostics, codeAction, hover, executeCommand → workspace/applyEdit, shutdown),
//! floods of edits, incremental sync, unsaved buffers, the protocol's lifecycle and errors,
//! malformed input written as raw bytes; and, with the server run in this process over
//! in-memory pipes, a document whose analysis panics.

use serde_json::{json, Value};
use std::io::{BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

#[path = "support/comparable.rs"]
mod comparable;
#[path = "support/frames.rs"]
mod frames;
#[path = "support/sources.rs"]
mod sources;
use sources::try_lock_helper;

struct Client {
    /// The `locklint lsp` process (none for a server run in this process).
    child: Option<Child>,
    stdin: Option<Box<dyn Write + Send>>,
    incoming: Receiver<Value>,
    next_id: i64,
}

/// One end of an in-memory pipe: the bytes written to a [`PipeWriter`].
struct PipeReader {
    chunks: Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    at: usize,
}

impl Read for PipeReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.chunks.recv() {
                Ok(c) => {
                    self.chunk = c;
                    self.at = 0;
                }
                // the writer is gone: the end of the input
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

struct PipeWriter(Sender<Vec<u8>>);

impl Write for PipeWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .send(buf.to_vec())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn pipe() -> (PipeWriter, PipeReader) {
    let (tx, rx) = channel();
    (
        PipeWriter(tx),
        PipeReader {
            chunks: rx,
            chunk: Vec::new(),
            at: 0,
        },
    )
}

/// A client of a server run in this process (`locklint::lsp::run`, as `locklint lsp` runs it)
/// with the analyser given: its messages, and the server's exit status when it ends.
struct InProcess {
    client: Client,
    server: std::thread::JoinHandle<u8>,
}

impl InProcess {
    fn start(analyser: Box<dyn locklint::lsp::analysis::Analyser>) -> InProcess {
        let (to_server, server_input) = pipe();
        let (server_output, from_server) = pipe();
        let server = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || {
                locklint::lsp::run(
                    BufReader::new(server_input),
                    Box::new(server_output),
                    locklint::lsp::Config {
                        debounce: locklint::lsp::DEBOUNCE,
                        analyser,
                    },
                )
            })
            .unwrap();
        let mut client = Client::over(None, Box::new(to_server), from_server);
        let id = client.request(
            "initialize",
            json!({ "processId": null, "rootUri": null, "capabilities": {} }),
        );
        client.response(id);
        client.notify("initialized", json!({}));
        InProcess { client, server }
    }

    /// Ends the input and returns the server's exit status.
    fn end(mut self) -> u8 {
        self.client.close();
        self.server.join().expect("the server thread did not panic")
    }
}

impl Client {
    fn start() -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_locklint"))
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        Client::over(Some(child), Box::new(stdin), stdout)
    }

    /// A client writing to `stdin` and reading the server's frames from `stdout`.
    fn over(
        child: Option<Child>,
        stdin: Box<dyn Write + Send>,
        stdout: impl Read + Send + 'static,
    ) -> Client {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            while let Some(body) = frames::read_frame(&mut r) {
                if tx
                    .send(serde_json::from_slice::<Value>(&body).unwrap())
                    .is_err()
                {
                    return;
                }
            }
        });
        Client {
            child,
            stdin: Some(stdin),
            incoming: rx,
            next_id: 0,
        }
    }

    fn send(&mut self, msg: Value) {
        let body = msg.to_string();
        self.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Closes the server's input (end of the conversation).
    fn close(&mut self) {
        self.stdin = None;
    }

    /// Starts a server and initialises it.
    fn initialised() -> Client {
        let mut c = Client::start();
        let id = c.request(
            "initialize",
            json!({ "processId": null, "rootUri": null, "capabilities": {} }),
        );
        c.response(id);
        c.notify("initialized", json!({}));
        c
    }

    fn open(&mut self, uri: &str, language: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": language, "version": 1, "text": text } }),
        );
    }

    /// The full answer (result or error) to request `id`.
    fn answer(&self, id: impl Into<Value>) -> Value {
        let id = id.into();
        self.wait(|m| m["id"] == id && m.get("method").is_none())
    }

    /// The next diagnostics published for `uri`.
    fn diagnostics(&self, uri: &str) -> Value {
        self.wait(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri)
    }

    /// The server's exit status, once it has ended by itself.
    fn exit_status(&mut self) -> Option<i32> {
        for _ in 0..600 {
            let child = self.child.as_mut().expect("a server process");
            if let Some(s) = child.try_wait().unwrap() {
                return s.code();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.as_mut().map(Child::kill);
        panic!("the server did not end");
    }

    fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// The next message matching `pred` (others are skipped), within 60 s.
    fn wait(&self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let m = self
                .incoming
                .recv_timeout(Duration::from_secs(60))
                .expect("the server answered in time");
            if pred(&m) {
                return m;
            }
        }
    }

    fn response(&self, id: i64) -> Value {
        self.wait(|m| m["id"] == id && m.get("method").is_none())["result"].clone()
    }
}

const CODE: &str = "use redis::AsyncCommands;\n\npub async fn nightly(con: &mut redis::aio::MultiplexedConnection, token: &str) -> redis::RedisResult<bool> {\n    let ok: bool = con.set_nx(\"lock:nightly\", token).await?;\n    if ok {\n        let _: () = con.expire(\"lock:nightly\", 60).await?;\n    }\n    Ok(ok)\n}\n";

#[test]
fn a_client_sees_diagnostics_fixes_and_docs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.rs");
    std::fs::write(&path, CODE).unwrap();
    let uri = url::Url::from_file_path(path.canonicalize().unwrap())
        .unwrap()
        .to_string();

    let mut c = Client::start();
    let id = c.request(
        "initialize",
        json!({ "processId": null, "rootUri": null, "capabilities": {} }),
    );
    let caps = c.response(id)["capabilities"].clone();
    assert_eq!(caps["hoverProvider"], true);
    assert_eq!(caps["textDocumentSync"]["change"], 2, "incremental sync");
    assert!(caps["codeActionProvider"]["codeActionKinds"]
        .to_string()
        .contains("source.fixAll.locklint"));
    c.notify("initialized", json!({}));

    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": uri, "languageId": "rust", "version": 1, "text": CODE } }),
    );
    let published = c.wait(|m| m["method"] == "textDocument/publishDiagnostics");
    assert_eq!(published["params"]["uri"], uri);
    let diags = published["params"]["diagnostics"]
        .as_array()
        .unwrap()
        .clone();
    let d = diags
        .iter()
        .find(|d| d["code"] == "separate-expire")
        .expect("separate-expire");
    assert_eq!(d["severity"], 1);
    assert_eq!(d["source"], "locklint");
    assert_eq!(d["range"]["start"], json!({ "line": 5, "character": 24 }));
    assert_eq!(
        d["relatedInformation"][0]["location"]["range"]["start"]["line"],
        3
    );

    // the quick fix for the finding under the cursor
    let id = c.request(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": uri }, "range": d["range"], "context": { "diagnostics": [d] } }),
    );
    let actions = c.response(id);
    let fix = actions
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["edit"].is_object())
        .expect("a fix with an edit");
    assert_eq!(fix["kind"], "quickfix");
    assert_eq!(fix["isPreferred"], true);
    let edits = fix["edit"]["changes"][&uri].as_array().unwrap();
    assert!(edits
        .iter()
        .any(|e| e["newText"].as_str().unwrap().contains("SetExpiry::EX(60)")));
    assert!(actions
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["command"]["command"] == "locklint.explain"));

    // fix all safe findings
    let id = c.request(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": uri }, "range": { "start": { "line": 0, "character": 0 }, "end": { "line": 0, "character": 0 } }, "context": { "diagnostics": [], "only": ["source.fixAll.locklint"] } }),
    );
    let all = c.response(id);
    assert_eq!(all[0]["kind"], "source.fixAll.locklint");

    // hover shows the rule's page
    let id = c.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": uri }, "position": d["range"]["start"] }),
    );
    let hover = c.response(id);
    assert!(hover["contents"]["value"]
        .as_str()
        .unwrap()
        .contains("# separate-expire"));

    // executeCommand asks the client to apply the edit
    let id = c.request(
        "workspace/executeCommand",
        json!({ "command": "locklint.fixAll", "arguments": [uri] }),
    );
    let apply = c.wait(|m| m["method"] == "workspace/applyEdit");
    assert!(apply["params"]["edit"]["changes"][&uri].is_array());
    let apply_id = apply["id"].clone();
    c.send(json!({ "jsonrpc": "2.0", "id": apply_id, "result": { "applied": true } }));
    assert_eq!(c.response(id), json!(1));

    // the client applied the fix: the finding is gone
    let fixed = CODE
        .replace(
            "con.set_nx(\"lock:nightly\", token)",
            "con.set_options(\"lock:nightly\", token, redis::SetOptions::default().conditional_set(redis::ExistenceCheck::NX).with_expiration(redis::SetExpiry::EX(60)))",
        )
        .replace("    if ok {\n        let _: () = con.expire(\"lock:nightly\", 60).await?;\n    }\n", "");
    c.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [{ "text": fixed }] }),
    );
    let published = c.wait(|m| m["method"] == "textDocument/publishDiagnostics");
    let codes: Vec<String> = published["params"]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_string())
        .collect();
    assert!(!codes.contains(&"separate-expire".to_string()), "{codes:?}");

    let id = c.request("shutdown", Value::Null);
    c.response(id);
    c.notify("exit", Value::Null);
    let status = c.child.as_mut().unwrap().wait().unwrap();
    assert!(status.success());
}

fn file_uri(dir: &std::path::Path, name: &str) -> String {
    url::Url::from_file_path(dir.canonicalize().unwrap().join(name))
        .unwrap()
        .to_string()
}

fn codes(published: &Value) -> Vec<String> {
    published["params"]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_string())
        .collect()
}

/// `n` functions like [`CODE`]'s, each acquiring its own lock and setting its expiry apart
/// (one `separate-expire` each), 9 lines per function after a one-line header: the expire of
/// function `i` is on line `6 + 9 * i`.
fn many_functions(n: usize) -> String {
    let mut text = String::from("// jobs\n");
    for i in 0..n {
        text.push_str(
            &CODE
                .replace("use redis::AsyncCommands;\n", "// -\n")
                .replace("nightly", &format!("job{i}")),
        );
    }
    text
}

fn range(l0: usize, c0: usize, l1: usize, c1: usize) -> Value {
    json!({ "start": { "line": l0, "character": c0 }, "end": { "line": l1, "character": c1 } })
}

#[test]
fn a_flood_of_edits_is_debounced_and_a_hover_is_answered_from_the_last_version() {
    let n = 600;
    let text = many_functions(n);
    assert!(text.len() > 150_000, "{}", text.len());
    let dir = tempfile::tempdir().unwrap();
    let uri = file_uri(dir.path(), "jobs.rs");
    let mut c = Client::initialised();
    c.open(&uri, "rust", &text);
    // 999 keystrokes in the header comment, then one edit that replaces the first function
    // (lines 1..=9) with one line: lines after it move up by 8
    for v in 2..=1000 {
        c.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": v }, "contentChanges": [{ "range": range(0, 7, 0, 7), "text": "x" }] }),
        );
    }
    c.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 1001 }, "contentChanges": [{ "range": range(1, 0, 10, 0), "text": "// removed\n" }] }),
    );
    // the expire of the second function, in the last version: line 6 + 9 - 8 (in the
    // versions before, that line is the end of an `if`)
    let id = c.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 7, "character": 30 } }),
    );
    // the answer and the diagnostics of the last version, in either order
    let (mut hover, mut last) = (None, None);
    while hover.is_none() || last.is_none() {
        let m = c.wait(|_| true);
        if m["id"] == id {
            hover = Some(m);
        } else if m["method"] == "textDocument/publishDiagnostics" && m["params"]["version"] == 1001
        {
            last = Some(m);
        }
    }
    let (hover, last) = (hover.unwrap(), last.unwrap());
    assert!(
        hover["result"]["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("# separate-expire"),
        "{hover}"
    );
    assert_eq!(
        hover["result"]["range"]["start"],
        json!({ "line": 7, "character": 24 })
    );
    let found = codes(&last);
    assert_eq!(found.len(), n - 1, "one finding less than functions");
    assert!(found.iter().all(|c| c == "separate-expire"));
    // no diagnostics of a version in between are published after those of the last
    let id = c.request("shutdown", Value::Null);
    let mut later = Vec::new();
    loop {
        let m = c.wait(|_| true);
        if m["id"] == id {
            break;
        }
        later.push(m);
    }
    assert!(
        !later
            .iter()
            .any(|m| m["method"] == "textDocument/publishDiagnostics"),
        "{later:?}"
    );
}

#[test]
fn range_edits_in_utf16_units_give_the_same_diagnostics_as_the_whole_text() {
    let dir = tempfile::tempdir().unwrap();
    let whole = file_uri(dir.path(), "whole.rs");
    let built = file_uri(dir.path(), "built.rs");
    let mut c = Client::initialised();
    // a comment with characters of one and two UTF-16 units ahead of the code on its line
    let code = CODE.replacen("\n\npub", "\n// é𝄞 ✓\npub", 1);
    c.open(&whole, "rust", &code);
    let expected = c.diagnostics(&whole)["params"]["diagnostics"].clone();
    assert!(!expected.as_array().unwrap().is_empty());

    // built from pieces: the tail first, then the head, then a fix-up inside the comment
    let (head, tail) = code.split_at(code.find("pub async").unwrap());
    c.open(&built, "rust", "");
    let edits = [
        json!({ "range": range(0, 0, 0, 0), "text": tail }),
        json!({ "range": range(0, 0, 0, 0), "text": head.replace("✓", "") }),
        // after 'é𝄞 ' (1 + 2 + 1 units): insert the tick back
        json!({ "range": range(1, 7, 1, 7), "text": "✓" }),
        // replace "nightly" in the function name by "nightly" (a no-op in effect) across
        // a deletion and an insertion
        json!({ "range": range(2, 13, 2, 20), "text": "" }),
        json!({ "range": range(2, 13, 2, 13), "text": "nightly" }),
    ];
    c.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": built, "version": 2 }, "contentChanges": edits }),
    );
    let got = c.wait(|m| {
        m["method"] == "textDocument/publishDiagnostics"
            && m["params"]["uri"] == built
            && m["params"]["version"] == 2
    });
    let same = |got: &Value| {
        assert_eq!(
            got["params"]["diagnostics"].to_string(),
            expected.to_string().replace(&whole, &built)
        )
    };
    same(&got);

    // an edit outside the document is clamped and logged, and the server goes on
    c.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": built, "version": 3 }, "contentChanges": [
            { "range": range(500, 3, 900, 0), "text": "\n// end\n" },
            { "range": { "start": { "line": "x" } }, "text": "lost" },
        ] }),
    );
    let logged = |m: &Value, what: &str| {
        m["method"] == "window/logMessage"
            && m["params"]["message"].as_str().unwrap().contains(what)
    };
    c.wait(|m| logged(m, "outside the document"));
    c.wait(|m| logged(m, "invalid range"));
    let got = c.wait(|m| m["params"]["uri"] == built && m["params"]["version"] == 3);
    same(&got);
}

#[test]
fn unsaved_buffers_are_analysed_by_their_language() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Client::start();
    let root = url::Url::from_file_path(dir.path().canonicalize().unwrap())
        .unwrap()
        .to_string();
    let id = c.request(
        "initialize",
        json!({ "processId": null, "rootUri": root, "capabilities": {} }),
    );
    c.response(id);
    c.notify("initialized", json!({}));

    c.open("untitled:Untitled-1", "rust", CODE);
    assert!(codes(&c.diagnostics("untitled:Untitled-1")).contains(&"separate-expire".to_string()));

    let lua = include_str!("../fixtures/lua-release-no-compare/bad_get_not_guarding.lua");
    c.open("untitled:Untitled-2", "lua", lua);
    assert_eq!(
        codes(&c.diagnostics("untitled:Untitled-2")),
        ["lua-release-no-compare"]
    );

    // a file that is not on disk yet, by its extension
    let sql = include_str!("../fixtures/lock-table-no-owner-check/bad_release_by_name.sql");
    let new = file_uri(dir.path(), "new.sql");
    c.open(&new, "plaintext", sql);
    assert!(codes(&c.diagnostics(&new)).contains(&"lock-table-no-owner-check".to_string()));

    // requests about an unsaved buffer are answered from its analysis
    let id = c.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": "untitled:Untitled-1" }, "position": { "line": 5, "character": 30 } }),
    );
    assert!(c.response(id)["contents"]["value"]
        .as_str()
        .unwrap()
        .contains("# separate-expire"));

    // a language locklint does not read gets no diagnostics and empty answers
    c.open("untitled:notes", "markdown", "# notes");
    let id = c.request(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": "untitled:notes" }, "range": range(0, 0, 0, 0), "context": { "diagnostics": [] } }),
    );
    assert_eq!(c.response(id), json!([]));
}

#[test]
fn the_lifecycle_follows_the_protocol() {
    let mut c = Client::start();
    // before initialize
    let id = c.request("textDocument/hover", json!({}));
    assert_eq!(c.answer(id)["error"]["code"], -32002);
    let id = c.request(
        "initialize",
        json!({ "processId": null, "rootUri": null, "capabilities": {} }),
    );
    c.response(id);
    c.notify("initialized", json!({}));
    let id = c.request("initialize", json!({ "capabilities": {} }));
    assert_eq!(c.answer(id)["error"]["code"], -32600);
    // unknown methods: an error for a request, nothing for a notification
    c.notify("custom/somethingHappened", json!({ "x": 1 }));
    c.notify("$/setTrace", json!({ "value": "off" }));
    let id = c.request("custom/doSomething", json!({}));
    let answer = c.answer(id);
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    let id = c.request(
        "workspace/executeCommand",
        json!({ "command": "locklint.explain", "arguments": ["separate-expire"] }),
    );
    assert!(c
        .response(id)
        .as_str()
        .unwrap()
        .contains("# separate-expire"));
    let id = c.request("shutdown", Value::Null);
    assert_eq!(c.answer(id)["result"], Value::Null);
    // after shutdown, requests are refused
    let id = c.request("textDocument/hover", json!({ "textDocument": { "uri": "untitled:x" }, "position": { "line": 0, "character": 0 } }));
    assert_eq!(c.answer(id)["error"]["code"], -32600);
    let id = c.request("shutdown", Value::Null);
    assert_eq!(c.answer(id)["error"]["code"], -32600);
    c.notify("exit", Value::Null);
    assert_eq!(c.exit_status(), Some(0));

    // exit without shutdown
    let mut c = Client::initialised();
    c.notify("exit", Value::Null);
    assert_eq!(c.exit_status(), Some(1));

    // the client closes the connection
    let mut c = Client::initialised();
    let id = c.request("shutdown", Value::Null);
    c.answer(id);
    c.close();
    assert_eq!(c.exit_status(), Some(0));
    let mut c = Client::initialised();
    c.close();
    assert_eq!(c.exit_status(), Some(1));
}

#[test]
fn malformed_messages_are_answered_or_logged_and_the_server_goes_on() {
    let mut c = Client::initialised();
    let body = |s: &str| format!("Content-Length: {}\r\n\r\n{s}", s.len());
    // not JSON: a parse error (its id cannot be known)
    c.send_raw(body("{\"jsonrpc\":\"2.0\",\"id\":").as_bytes());
    let e = c.wait(|m| m.get("error").is_some());
    assert_eq!(e["error"]["code"], -32700);
    assert_eq!(e["id"], Value::Null);
    // a method that is not a string, params of the wrong type
    c.send_raw(body(r#"{"jsonrpc":"2.0","id":41,"method":7}"#).as_bytes());
    assert_eq!(c.answer(41)["error"]["code"], -32600);
    c.send_raw(
        body(r#"{"jsonrpc":"2.0","id":"s","method":"textDocument/hover","params":"x"}"#).as_bytes(),
    );
    assert_eq!(c.answer("s")["error"]["code"], -32600);
    // a request about a document that names none, a position of the wrong type
    let id = c.request(
        "textDocument/hover",
        json!({ "position": { "line": 0, "character": 0 } }),
    );
    assert_eq!(c.answer(id)["error"]["code"], -32602);
    c.open("untitled:a", "rust", CODE);
    c.diagnostics("untitled:a");
    let id = c.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": "untitled:a" }, "position": { "line": "one" } }),
    );
    assert_eq!(c.answer(id)["error"]["code"], -32602);
    // a bad header: logged, and the next message is read
    c.send_raw(b"Content-Length: lots\r\n\r\n{}");
    let logged = |m: &Value, what: &str| {
        m["method"] == "window/logMessage"
            && m["params"]["message"].as_str().unwrap().contains(what)
    };
    c.wait(|m| logged(m, "invalid Content-Length"));
    // a message over the size limit is skipped unread
    let big = 64 * 1024 * 1024 + 1;
    c.send_raw(format!("Content-Length: {big}\r\n\r\n").as_bytes());
    let chunk = vec![b' '; 1024 * 1024];
    for _ in 0..64 {
        c.send_raw(&chunk);
    }
    c.send_raw(b" ");
    c.wait(|m| logged(m, "over the 64 MiB limit"));
    let id = c.request(
        "workspace/executeCommand",
        json!({ "command": "locklint.explain", "arguments": ["separate-expire"] }),
    );
    assert!(c.response(id).is_string());
    // a huge Content-Length is not allocated: the server waits for the body, and ends when
    // the input ends inside it
    c.send_raw(b"Content-Length: 1000000000000\r\n\r\n{}");
    c.close();
    assert_eq!(c.exit_status(), Some(1));
}

#[test]
fn a_document_whose_analysis_fails_gets_a_diagnostic_and_the_server_goes_on() {
    let mut c = Client::initialised();
    // a stray backtick in a Lua script
    c.open(
        "untitled:broken",
        "lua",
        "local x = `\nreturn redis.call('DEL', KEYS[1])\n",
    );
    let published = c.diagnostics("untitled:broken");
    assert_eq!(codes(&published), ["parse-error"], "{published}");
    c.open("untitled:fine", "rust", CODE);
    assert!(codes(&c.diagnostics("untitled:fine")).contains(&"separate-expire".to_string()));
    let id = c.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": "untitled:fine" }, "position": { "line": 5, "character": 30 } }),
    );
    assert!(c.response(id)["contents"].is_object());
}

#[test]
fn a_document_of_three_megabytes_is_answered_with_exact_positions() {
    // lines with characters of two and three UTF-8 bytes: positions must be UTF-16 units;
    // long comment lines keep the document within the analysed tokens
    let n = 4_000;
    let comment = format!("// é ✓ {}\n", "-".repeat(600));
    let text = many_functions(n).replace("// -\n", &comment);
    assert!(text.len() > 3_000_000, "{}", text.len());
    let mut c = Client::initialised();
    c.open("untitled:big", "rust", &text);
    let published = c.diagnostics("untitled:big");
    let diags = published["params"]["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), n);
    let last = 6 + 9 * (n - 1);
    assert_eq!(
        diags.last().unwrap()["range"]["start"],
        json!({ "line": last, "character": 24 })
    );
    let id = c.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": "untitled:big" }, "position": { "line": last, "character": 30 } }),
    );
    assert_eq!(
        c.response(id)["range"]["start"],
        json!({ "line": last, "character": 24 })
    );
}

/// A document holding this text makes [`explodes_on_marker`] panic.
const EXPLODE: &str = "// explode here";

/// The language server's own analysis, except that it panics on a document holding
/// [`EXPLODE`] (a defect the analysis could have).
fn explodes_on_marker() -> Box<dyn locklint::lsp::analysis::Analyser> {
    use locklint::lsp::analysis::Analyser;
    let mut own = locklint::lsp::analysis::Indexed::default();
    Box::new(
        move |path: &std::path::Path,
              text: &str,
              root: Option<&std::path::Path>,
              others: &locklint::lsp::analysis::Others| {
            if text.contains(EXPLODE) {
                panic!("a defect met in {}", path.display());
            }
            own.analyse(path, text, root, others)
        },
    )
}

#[test]
fn a_panic_in_one_documents_analysis_is_published_and_logged_and_the_server_goes_on() {
    let mut server = InProcess::start(explodes_on_marker());
    let c = &mut server.client;
    c.open("untitled:broken", "rust", &format!("{EXPLODE}\n{CODE}"));
    // the log line comes before the diagnostics
    let logged = c.wait(|m| {
        m["method"] == "window/logMessage"
            && m["params"]["message"]
                .as_str()
                .is_some_and(|l| l.contains("a defect met in"))
    });
    let line = logged["params"]["message"].as_str().unwrap();
    assert!(
        line.contains("locklint could not analyse this file"),
        "{logged}"
    );
    let published = c.diagnostics("untitled:broken");
    assert_eq!(codes(&published), ["parse-error"], "{published}");
    let d = &published["params"]["diagnostics"][0];
    assert!(
        d["message"].as_str().unwrap().contains("a defect met in"),
        "{d}"
    );
    assert_eq!(d["range"], range(0, 0, 0, 1));

    // another document is analysed as usual
    c.open("untitled:fine", "rust", CODE);
    assert!(codes(&c.diagnostics("untitled:fine")).contains(&"separate-expire".to_string()));
    // requests about the failed document are answered from its finding
    let id = c.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": "untitled:broken" }, "position": { "line": 0, "character": 0 } }),
    );
    let hover = c.response(id);
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("parse-error"),
        "{hover}"
    );
    // once its text no longer makes the analysis panic, it is analysed again
    c.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": "untitled:broken", "version": 2 }, "contentChanges": [{ "text": CODE }] }),
    );
    let again = c.diagnostics("untitled:broken");
    assert!(
        codes(&again).contains(&"separate-expire".to_string()),
        "{again}"
    );
    let id = c.request("shutdown", Value::Null);
    assert!(c.response(id).is_null());
    assert_eq!(server.end(), 0, "the input ended after shutdown");
}

/// `text` with one LSP text edit applied (positions in an ASCII text).
fn apply_edit(text: &str, edit: &Value) -> String {
    let offset = |p: &Value| {
        let line = p["line"].as_u64().unwrap() as usize;
        let character = p["character"].as_u64().unwrap() as usize;
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        start + character
    };
    let (a, b) = (
        offset(&edit["range"]["start"]),
        offset(&edit["range"]["end"]),
    );
    format!(
        "{}{}{}",
        &text[..a],
        edit["newText"].as_str().unwrap(),
        &text[b..]
    )
}

#[test]
fn fix_all_fixes_the_unsaved_buffer_as_check_fix_fixes_the_file() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut examples: Vec<std::path::PathBuf> = std::fs::read_dir(&fixtures)
        .unwrap()
        .flatten()
        .flat_map(|rule| {
            std::fs::read_dir(rule.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("bad_")
                && name.ends_with(".rs")
                && p.with_extension("rs.fixed").is_file()
        })
        .collect();
    examples.sort();
    assert!(examples.len() >= 20, "{} examples", examples.len());
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".git")).unwrap();
    let mut c = Client::start();
    let root = url::Url::from_file_path(ws.path().canonicalize().unwrap()).unwrap();
    let id = c.request(
        "initialize",
        json!({ "processId": null, "rootUri": root.to_string(), "capabilities": {} }),
    );
    c.response(id);
    c.notify("initialized", json!({}));
    let mut changed = 0;
    for (i, example) in examples.iter().enumerate() {
        let text = std::fs::read_to_string(example).unwrap();
        // the file on disk is not what the editor shows
        let path = ws.path().join(format!("f{i}.rs"));
        std::fs::write(&path, "// not saved yet\n").unwrap();
        let uri = url::Url::from_file_path(path.canonicalize().unwrap())
            .unwrap()
            .to_string();
        c.open(&uri, "rust", &text);
        c.diagnostics(&uri);
        let id = c.request(
            "workspace/executeCommand",
            json!({ "command": "locklint.fixAll", "arguments": [uri] }),
        );
        let mut buffer = text.clone();
        let count = loop {
            let m = c.wait(|m| {
                m["method"] == "workspace/applyEdit" || (m["id"] == id && m.get("method").is_none())
            });
            if m["method"] == "workspace/applyEdit" {
                let edits = m["params"]["edit"]["changes"][&uri]
                    .as_array()
                    .unwrap()
                    .clone();
                assert_eq!(edits.len(), 1, "one edit over the changed part");
                buffer = apply_edit(&buffer, &edits[0]);
                c.send(json!({ "jsonrpc": "2.0", "id": m["id"].clone(), "result": { "applied": true } }));
            } else {
                break m["result"].as_u64().unwrap();
            }
        };
        // the same text fixed on disk by the command line
        let cli = tempfile::tempdir().unwrap();
        std::fs::create_dir(cli.path().join(".git")).unwrap();
        std::fs::write(cli.path().join("f.rs"), &text).unwrap();
        Command::new(env!("CARGO_BIN_EXE_locklint"))
            .args(["check", "f.rs", "--fix", "--no-cache"])
            .current_dir(cli.path())
            .output()
            .unwrap();
        let expected = std::fs::read_to_string(cli.path().join("f.rs")).unwrap();
        assert_eq!(buffer, expected, "{}", example.display());
        assert_eq!(count > 0, expected != text, "{}", example.display());
        changed += usize::from(expected != text);
        c.notify(
            "textDocument/didClose",
            json!({ "textDocument": { "uri": uri } }),
        );
    }
    assert!(changed >= 5, "{changed} examples have safe fixes");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("f0.rs")).unwrap(),
        "// not saved yet\n"
    );
}

/// A caller of the lock helper `try_lock` of `src/locks.rs`.
const JOBS: &str = "use super::locks::try_lock;\n\npub async fn nightly(con: &mut redis::aio::MultiplexedConnection, token: &str) {\n    let _ = try_lock(con, \"lock:nightly\", token, 60_000).await;\n}\n";

/// A workspace (a `.git` directory at its root) with [`JOBS`] in `src/jobs.rs` and, if
/// `helper` says so, a lock helper that acquires or not in `src/locks.rs`; its canonical
/// root.
fn helper_workspace(helper: Option<bool>) -> (tempfile::TempDir, std::path::PathBuf) {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(root.join("src/jobs.rs"), JOBS).unwrap();
    if let Some(acquires) = helper {
        std::fs::write(root.join("src/locks.rs"), try_lock_helper(acquires)).unwrap();
    }
    (ws, root)
}

fn uri_of(path: &std::path::Path) -> String {
    url::Url::from_file_path(path).unwrap().to_string()
}

impl Client {
    /// Starts a server whose workspace is `root` and initialises it; the client lets the
    /// server register its file watchers.
    fn on_workspace(root: &std::path::Path) -> Client {
        let mut c = Client::start();
        let id = c.request(
            "initialize",
            json!({ "processId": null, "rootUri": uri_of(root), "capabilities": { "workspace": { "didChangeWatchedFiles": { "dynamicRegistration": true } } } }),
        );
        c.response(id);
        c.notify("initialized", json!({}));
        // the server asks to be told about changes of the files it reads
        let register = c.wait(|m| m["method"] == "client/registerCapability");
        assert_eq!(
            register["params"]["registrations"][0]["method"],
            "workspace/didChangeWatchedFiles"
        );
        c.send(json!({ "jsonrpc": "2.0", "id": register["id"].clone(), "result": null }));
        c
    }

    /// Tells the server that `path` was created (1), changed (2) or deleted (3) on disk.
    fn watched(&mut self, path: &std::path::Path, kind: u8) {
        self.notify(
            "workspace/didChangeWatchedFiles",
            json!({ "changes": [{ "uri": uri_of(path), "type": kind }] }),
        );
    }

    /// Replaces the whole text of `uri`.
    fn replace(&mut self, uri: &str, version: i64, text: &str) {
        self.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": [{ "text": text }] }),
        );
    }
}

#[test]
fn a_helper_changed_in_another_buffer_or_on_disk_changes_its_callers_diagnostics() {
    let (_ws, root) = helper_workspace(Some(true));
    let jobs_text = JOBS;
    let (jobs, locks) = (
        uri_of(&root.join("src/jobs.rs")),
        uri_of(&root.join("src/locks.rs")),
    );
    let mut c = Client::on_workspace(&root);

    c.open(&jobs, "rust", jobs_text);
    assert_eq!(codes(&c.diagnostics(&jobs)), ["lock-result-ignored"]);
    c.open(&locks, "rust", &try_lock_helper(true));
    c.diagnostics(&locks);

    // the helper's unsaved text stops acquiring: the caller's finding goes, though the caller
    // did not change
    c.replace(&locks, 2, &try_lock_helper(false));
    let published = c.diagnostics(&jobs);
    assert!(codes(&published).is_empty(), "{published}");
    assert_eq!(published["params"]["version"], 1);

    // back again
    c.replace(&locks, 3, &try_lock_helper(true));
    assert_eq!(codes(&c.diagnostics(&jobs)), ["lock-result-ignored"]);

    // closed in the editor and changed on disk by another program
    c.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": locks } }),
    );
    std::fs::write(root.join("src/locks.rs"), try_lock_helper(false)).unwrap();
    c.watched(&root.join("src/locks.rs"), 2);
    assert!(codes(&c.diagnostics(&jobs)).is_empty());
    let id = c.request("shutdown", Value::Null);
    c.response(id);
}

#[test]
fn an_edit_reads_no_other_file_until_the_editor_reports_it_changed() {
    let (_ws, root) = helper_workspace(Some(true));
    let jobs = uri_of(&root.join("src/jobs.rs"));
    let mut c = Client::on_workspace(&root);
    c.open(&jobs, "rust", JOBS);
    assert_eq!(codes(&c.diagnostics(&jobs)), ["lock-result-ignored"]);
    // the helper stops acquiring on disk, and nobody says so: an edit of the caller is
    // analysed over the helper as the server read it
    std::fs::write(root.join("src/locks.rs"), try_lock_helper(false)).unwrap();
    c.replace(&jobs, 2, &format!("{JOBS}// edited\n"));
    let published = c.diagnostics(&jobs);
    assert_eq!(published["params"]["version"], 2);
    assert_eq!(codes(&published), ["lock-result-ignored"]);
    // told, the server reads it again
    c.watched(&root.join("src/locks.rs"), 2);
    let published = c.diagnostics(&jobs);
    assert!(codes(&published).is_empty(), "{published}");
    let id = c.request("shutdown", Value::Null);
    c.response(id);
}

#[test]
fn files_created_and_deleted_on_disk_change_the_findings_of_open_documents() {
    let (_ws, root) = helper_workspace(None);
    let jobs = uri_of(&root.join("src/jobs.rs"));
    let helper = root.join("src/locks.rs");
    let mut c = Client::on_workspace(&root);
    c.open(&jobs, "rust", JOBS);
    assert!(codes(&c.diagnostics(&jobs)).is_empty(), "no helper yet");
    std::fs::write(&helper, try_lock_helper(true)).unwrap();
    c.watched(&helper, 1);
    assert_eq!(codes(&c.diagnostics(&jobs)), ["lock-result-ignored"]);
    std::fs::remove_file(&helper).unwrap();
    c.watched(&helper, 3);
    assert!(codes(&c.diagnostics(&jobs)).is_empty());
    let id = c.request("shutdown", Value::Null);
    c.response(id);
}

#[test]
fn after_edits_the_diagnostics_are_what_check_reports_on_the_saved_texts() {
    let (_ws, root) = helper_workspace(Some(false));
    let paths = [root.join("src/jobs.rs"), root.join("src/locks.rs")];
    let uris = paths.each_ref().map(|p| uri_of(p));
    let mut c = Client::on_workspace(&root);
    c.open(&uris[0], "rust", JOBS);
    c.open(&uris[1], "rust", &try_lock_helper(false));
    // the helper acquires again and releases with a plain DEL; the caller also releases
    let helper = format!(
        "{}\npub async fn unlock(con: &mut redis::aio::MultiplexedConnection, key: &str) -> redis::RedisResult<()> {{\n    let _: i64 = redis::cmd(\"DEL\").arg(key).query_async(con).await?;\n    Ok(())\n}}\n",
        try_lock_helper(true)
    );
    let caller = JOBS.replace(
        "60_000).await;",
        "60_000).await;\n    let _ = super::locks::unlock(con, \"lock:nightly\").await;",
    );
    let texts = [caller, helper];
    for (version, edit) in [(2, 1), (3, 0), (4, 1)] {
        let text = if version == 4 {
            texts[1].clone()
        } else {
            format!("{}// version {version}\n", texts[edit])
        };
        c.replace(&uris[edit], version, &text);
    }
    // each document's last version: the caller's, then the helper's, analysed over it
    c.replace(&uris[0], 5, &texts[0]);
    c.replace(&uris[1], 5, &texts[1]);
    let mut last = [Value::Null, Value::Null];
    while last.iter().any(Value::is_null) {
        let m = c.wait(|m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["version"] == 5
        });
        for (k, uri) in uris.iter().enumerate() {
            if m["params"]["uri"] == *uri {
                last[k] = m.clone();
            }
        }
    }
    // saved: `check` reads the same texts from the disk
    for (path, text) in paths.iter().zip(&texts) {
        std::fs::write(path, text).unwrap();
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_locklint"))
        .current_dir(&root)
        .args(["check", "--no-cache", "--format", "json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = report["findings"].as_array().unwrap();
    assert!(!findings.is_empty());
    for (k, path) in paths.iter().enumerate() {
        let name = path.strip_prefix(&root).unwrap();
        let mut expected: Vec<String> = findings
            .iter()
            .filter(|f| std::path::Path::new(f["path"].as_str().unwrap()) == name)
            .map(|f| comparable::comparable_finding(&f.to_string()))
            .collect();
        let mut seen: Vec<String> = last[k]["params"]["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(comparable::comparable_diagnostic)
            .collect();
        expected.sort();
        seen.sort();
        assert_eq!(seen, expected, "{}", name.display());
    }
    let id = c.request("shutdown", Value::Null);
    c.response(id);
}
