//! `locklint lsp`: a language server over stdio for `.rs`, `.sql` and `.lua` files.
//! Diagnostics on open, change and save; code actions (each fix, `source.fixAll.locklint`,
//! "show documentation"); the rule's page on hover; `locklint.fixAll` through
//! `workspace/applyEdit`. Positions are UTF-16 code units, as LSP counts them by default.

use crate::diagnostic::{Applicability, Diagnostic, Severity};
use crate::engine::{self, ConfigSource, Options};
use lsp_server::{Connection, Message, Notification, Request, RequestId, Response};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// The code action kind that applies every safe fix of a file.
pub const FIX_ALL_KIND: &str = "source.fixAll.locklint";

fn capabilities() -> Value {
    json!({
        "textDocumentSync": { "openClose": true, "change": 1, "save": { "includeText": false } },
        "codeActionProvider": { "codeActionKinds": ["quickfix", FIX_ALL_KIND] },
        "hoverProvider": true,
        "executeCommandProvider": { "commands": ["locklint.fixAll", "locklint.explain"] },
    })
}

/// 0-based line and UTF-16 character of a byte offset.
fn position(text: &str, offset: usize) -> Value {
    let offset = offset.min(text.len());
    let mut at = offset;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let line_start = text[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line = text[..line_start].matches('\n').count();
    let character: usize = text[line_start..at].chars().map(char::len_utf16).sum();
    json!({ "line": line, "character": character })
}

/// The byte offset of an LSP position.
fn offset(text: &str, pos: &Value) -> usize {
    let line = pos["line"].as_u64().unwrap_or(0) as usize;
    let character = pos["character"].as_u64().unwrap_or(0) as usize;
    let mut start = 0;
    for _ in 0..line {
        match text[start..].find('\n') {
            Some(i) => start += i + 1,
            None => return text.len(),
        }
    }
    let mut units = 0;
    for (i, c) in text[start..].char_indices() {
        if units >= character || c == '\n' {
            return start + i;
        }
        units += c.len_utf16();
    }
    text.len()
}

fn range(text: &str, start: usize, end: usize) -> Value {
    json!({ "start": position(text, start), "end": position(text, end) })
}

fn uri_of(path: &Path) -> String {
    let abs = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    url::Url::from_file_path(&abs)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| format!("file://{}", abs.display()))
}

fn path_of(uri: &str) -> Option<PathBuf> {
    url::Url::parse(uri).ok()?.to_file_path().ok()
}

struct Server {
    connection: Connection,
    /// Open documents: path → (uri, text).
    docs: HashMap<PathBuf, (String, String)>,
    next_id: i32,
}

impl Server {
    fn analyse(&self, path: &Path) -> Vec<Diagnostic> {
        let Some((_, text)) = self.docs.get(path) else {
            return Vec::new();
        };
        if !crate::frontend::is_supported(path) {
            return Vec::new();
        }
        let overlay: HashMap<PathBuf, String> = [(path.to_path_buf(), text.clone())].into();
        let report = engine::run(&Options {
            paths: vec![path.to_path_buf()],
            config: ConfigSource::Discover,
            overlay: Some(Arc::new(overlay)),
            ..Default::default()
        });
        let same = |p: &Path| p.canonicalize().ok() == path.canonicalize().ok();
        report
            .findings
            .into_iter()
            .filter(|d| same(&d.primary.file.path))
            .collect()
    }

    fn lsp_diagnostic(d: &Diagnostic) -> Value {
        let text = &d.primary.file.text;
        let related: Vec<Value> = d
            .related
            .iter()
            .map(|r| {
                json!({
                    "location": {
                        "uri": uri_of(&r.location.file.path),
                        "range": range(&r.location.file.text, r.location.span.start, r.location.span.end),
                    },
                    "message": r.label,
                })
            })
            .collect();
        json!({
            "range": range(text, d.primary.span.start, d.primary.span.end),
            "severity": match d.severity { Severity::Error => 1, Severity::Warning => 2 },
            "code": d.rule,
            "source": "locklint",
            "message": format!("{}\nhelp: {}", d.message, d.help),
            "relatedInformation": related,
        })
    }

    fn publish(&self, path: &Path) {
        let Some((uri, _)) = self.docs.get(path) else {
            return;
        };
        let diagnostics: Vec<Value> = self
            .analyse(path)
            .iter()
            .map(Self::lsp_diagnostic)
            .collect();
        self.notify(
            "textDocument/publishDiagnostics",
            json!({ "uri": uri, "diagnostics": diagnostics }),
        );
    }

    fn notify(&self, method: &str, params: Value) {
        let _ = self
            .connection
            .sender
            .send(Message::Notification(Notification::new(
                method.to_string(),
                params,
            )));
    }

    fn respond(&self, id: RequestId, result: Value) {
        let _ = self
            .connection
            .sender
            .send(Message::Response(Response::new_ok(id, result)));
    }

    /// A workspace edit for fixes: text edits grouped by file.
    fn workspace_edit(fixes: &[&crate::diagnostic::Fix]) -> Value {
        let mut changes: HashMap<String, Vec<Value>> = HashMap::new();
        for f in fixes {
            for e in &f.edits {
                changes
                    .entry(uri_of(&e.location.file.path))
                    .or_default()
                    .push(json!({
                        "range": range(&e.location.file.text, e.location.span.start, e.location.span.end),
                        "newText": e.replacement,
                    }));
            }
        }
        json!({ "changes": changes })
    }

    /// Safe fixes of a file whose edits do not overlap.
    fn safe_fixes(findings: &[Diagnostic]) -> Vec<&crate::diagnostic::Fix> {
        let mut taken: Vec<(PathBuf, usize, usize)> = Vec::new();
        let mut out = Vec::new();
        for f in findings.iter().filter_map(|d| d.fix.as_ref()) {
            if f.applicability != Applicability::Safe {
                continue;
            }
            let overlaps = f.edits.iter().any(|e| {
                taken.iter().any(|(p, s, en)| {
                    *p == e.location.file.path
                        && e.location.span.start < *en
                        && *s < e.location.span.end
                })
            });
            if overlaps {
                continue;
            }
            for e in &f.edits {
                taken.push((
                    e.location.file.path.clone(),
                    e.location.span.start,
                    e.location.span.end,
                ));
            }
            out.push(f);
        }
        out
    }

    fn code_actions(&self, params: &Value) -> Value {
        let Some(path) = params["textDocument"]["uri"].as_str().and_then(path_of) else {
            return json!([]);
        };
        let Some((uri, text)) = self.docs.get(&path) else {
            return json!([]);
        };
        let start = offset(text, &params["range"]["start"]);
        let end = offset(text, &params["range"]["end"]);
        let only: Vec<&str> = params["context"]["only"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let wants = |kind: &str| only.is_empty() || only.iter().any(|o| kind.starts_with(o));
        let findings = self.analyse(&path);
        let mut actions = Vec::new();
        if wants("quickfix") {
            for d in findings
                .iter()
                .filter(|d| d.primary.span.start <= end && start <= d.primary.span.end)
            {
                if let Some(fix) = d
                    .fix
                    .as_ref()
                    .filter(|f| f.applicability != Applicability::DisplayOnly)
                {
                    let unsafe_note = if fix.applicability == Applicability::Unsafe {
                        " (review: unsafe fix)"
                    } else {
                        ""
                    };
                    actions.push(json!({
                        "title": format!("{}{unsafe_note}", fix.message),
                        "kind": "quickfix",
                        "isPreferred": fix.applicability == Applicability::Safe,
                        "diagnostics": [Self::lsp_diagnostic(d)],
                        "edit": Self::workspace_edit(&[fix]),
                    }));
                }
                actions.push(json!({
                    "title": format!("Show documentation for {}", d.rule),
                    "kind": "quickfix",
                    "diagnostics": [Self::lsp_diagnostic(d)],
                    "command": { "title": "Show documentation", "command": "locklint.explain", "arguments": [d.rule] },
                }));
            }
        }
        if wants(FIX_ALL_KIND) && !only.is_empty() {
            let fixes = Self::safe_fixes(&findings);
            if !fixes.is_empty() {
                actions.push(json!({
                    "title": "Fix all safe locklint findings",
                    "kind": FIX_ALL_KIND,
                    "edit": Self::workspace_edit(&fixes),
                }));
            }
        }
        let _ = uri;
        Value::Array(actions)
    }

    fn hover(&self, params: &Value) -> Value {
        let Some(path) = params["textDocument"]["uri"].as_str().and_then(path_of) else {
            return Value::Null;
        };
        let Some((_, text)) = self.docs.get(&path) else {
            return Value::Null;
        };
        let at = offset(text, &params["position"]);
        let findings = self.analyse(&path);
        let Some(d) = findings
            .iter()
            .find(|d| d.primary.span.start <= at && at <= d.primary.span.end)
        else {
            return Value::Null;
        };
        let doc = crate::rules::find(d.rule).map(|i| i.doc).unwrap_or("");
        json!({
            "contents": { "kind": "markdown", "value": format!("**locklint: {}** — {}\n\n{doc}", d.rule, d.message) },
            "range": range(text, d.primary.span.start, d.primary.span.end),
        })
    }

    fn execute(&mut self, params: &Value) -> Value {
        let args = params["arguments"].as_array().cloned().unwrap_or_default();
        match params["command"].as_str() {
            Some("locklint.explain") => {
                let rule = args.first().and_then(Value::as_str).unwrap_or("");
                crate::rules::find(rule)
                    .map(|i| Value::String(i.doc.to_string()))
                    .unwrap_or(Value::Null)
            }
            Some("locklint.fixAll") => {
                let Some(path) = args.first().and_then(Value::as_str).and_then(path_of) else {
                    return Value::Null;
                };
                let findings = self.analyse(&path);
                let fixes = Self::safe_fixes(&findings);
                if !fixes.is_empty() {
                    self.next_id += 1;
                    let req = Request::new(
                        RequestId::from(self.next_id),
                        "workspace/applyEdit".to_string(),
                        json!({ "label": "locklint: fix all", "edit": Self::workspace_edit(&fixes) }),
                    );
                    let _ = self.connection.sender.send(Message::Request(req));
                }
                json!(fixes.len())
            }
            _ => Value::Null,
        }
    }

    fn on_notification(&mut self, n: Notification) {
        let p = &n.params;
        let uri = p["textDocument"]["uri"].as_str().unwrap_or("").to_string();
        let Some(path) = path_of(&uri) else { return };
        match n.method.as_str() {
            "textDocument/didOpen" => {
                let text = p["textDocument"]["text"].as_str().unwrap_or("").to_string();
                self.docs.insert(path.clone(), (uri, text));
                self.publish(&path);
            }
            "textDocument/didChange" => {
                if let Some(text) = p["contentChanges"]
                    .as_array()
                    .and_then(|c| c.last())
                    .and_then(|c| c["text"].as_str())
                {
                    self.docs.insert(path.clone(), (uri, text.to_string()));
                    self.publish(&path);
                }
            }
            "textDocument/didSave" => self.publish(&path),
            "textDocument/didClose" => {
                self.notify(
                    "textDocument/publishDiagnostics",
                    json!({ "uri": uri, "diagnostics": [] }),
                );
                self.docs.remove(&path);
            }
            _ => {}
        }
    }
}

/// Serve LSP over stdin/stdout until the client shuts the server down.
pub fn serve() -> ExitCode {
    let (connection, io_threads) = Connection::stdio();
    if let Err(e) = connection.initialize(capabilities()) {
        eprintln!("error: the language client did not initialise: {e}");
        return ExitCode::from(crate::cli::EXIT_ERROR);
    }
    let mut server = Server {
        connection,
        docs: HashMap::new(),
        next_id: 0,
    };
    while let Ok(msg) = server.connection.receiver.recv() {
        match msg {
            Message::Request(req) => {
                if server.connection.handle_shutdown(&req).unwrap_or(true) {
                    break;
                }
                let result = match req.method.as_str() {
                    "textDocument/codeAction" => server.code_actions(&req.params),
                    "textDocument/hover" => server.hover(&req.params),
                    "workspace/executeCommand" => server.execute(&req.params),
                    _ => Value::Null,
                };
                server.respond(req.id, result);
            }
            Message::Notification(n) => server.on_notification(n),
            Message::Response(_) => {}
        }
    }
    drop(server);
    let _ = io_threads.join();
    ExitCode::from(crate::cli::EXIT_CLEAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_utf16_units() {
        let text = "a\nçé𝄞x\n";
        let x = text.find('x').unwrap();
        assert_eq!(position(text, x), json!({ "line": 1, "character": 4 }));
        assert_eq!(offset(text, &json!({ "line": 1, "character": 4 })), x);
        assert_eq!(
            offset(text, &json!({ "line": 9, "character": 0 })),
            text.len()
        );
    }
}
