//! `locklint lsp` end to end: a real client conversation over stdio (initialize, didOpen,
//! publishDiagnostics, codeAction, hover, executeCommand → workspace/applyEdit, shutdown).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

struct Client {
    child: Child,
    stdin: ChildStdin,
    incoming: Receiver<Value>,
    next_id: i64,
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
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("Content-Length: ") {
                        len = v.parse().unwrap();
                    }
                }
                let mut body = vec![0; len];
                if r.read_exact(&mut body).is_err() {
                    return;
                }
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
            stdin,
            incoming: rx,
            next_id: 0,
        }
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
    let status = c.child.wait().unwrap();
    assert!(status.success());
}
