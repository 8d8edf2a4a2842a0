//! One project, one answer: on the projects of `tests/projects/` (a virtual Cargo workspace
//! whose lock helper, consts, script, schema and Lua file live apart from their uses, and a
//! project of `.sql` and `.lua` files with `locklint.toml`), the findings of each file are the
//! same whatever selects it: the whole tree, the file alone, its package through `cargo
//! locklint -p`, `check` from each directory, `--changed-since`, and the language server with
//! only that file open. Facts come from the whole project; findings from the selection only.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "support/bin.rs"]
mod bin;
#[path = "support/comparable.rs"]
mod comparable;
#[path = "support/projects.rs"]
mod projects;
use bin::{cargo_locklint, locklint};
use comparable::{comparable_diagnostic, comparable_finding};
use projects::project;

/// Findings per file (path relative to the project root), each finding as normalised JSON.
type PerFile = BTreeMap<String, Vec<String>>;

fn both(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every `path` in a finding written relative to the project root (it is relative to `cwd`).
fn normalise(v: &mut Value, cwd: &Path, root: &Path) {
    match v {
        Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                if k == "path" {
                    if let Some(p) = x.as_str() {
                        *x = Value::String(relative_to(&cwd.join(p), root));
                    }
                } else {
                    normalise(x, cwd, root);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| normalise(x, cwd, root)),
        _ => {}
    }
}

fn relative_to(p: &Path, root: &Path) -> String {
    let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    p.strip_prefix(root)
        .unwrap_or(&p)
        .to_string_lossy()
        .replace('\\', "/")
}

/// The findings of a JSON report run in `cwd`, per file.
fn per_file(o: &Output, cwd: &Path, root: &Path) -> PerFile {
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "the run failed: {}",
        both(o)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", both(o)));
    let mut out = PerFile::new();
    for f in v["findings"].as_array().unwrap() {
        let mut f = f.clone();
        normalise(&mut f, cwd, root);
        let path = f["path"].as_str().unwrap().to_string();
        out.entry(path).or_default().push(f.to_string());
    }
    out
}

/// The part of `all` whose files `keep` selects.
fn only(all: &PerFile, keep: impl Fn(&str) -> bool) -> PerFile {
    all.iter()
        .filter(|(p, _)| keep(p))
        .map(|(p, v)| (p.clone(), v.clone()))
        .collect()
}

/// The files locklint reads in the project, relative to its root.
fn files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("rs" | "sql" | "lua")
            ) {
                out.push(relative_to(&p, root));
            }
        }
    }
    out.sort();
    out
}

/// The directories holding those files (the root included).
fn dirs(root: &Path) -> Vec<String> {
    let mut out: Vec<String> = vec![String::new()];
    for f in files(root) {
        let mut p = Path::new(&f).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            out.push(d.to_string_lossy().to_string());
            p = d.parent();
        }
    }
    out.sort();
    out.dedup();
    out
}

fn whole_tree(root: &Path) -> PerFile {
    per_file(&locklint(root, &["check", "--format", "json"]), root, root)
}

fn rules_of(all: &PerFile, file: &str) -> Vec<String> {
    all.get(file)
        .into_iter()
        .flatten()
        .map(|f| {
            let v: Value = serde_json::from_str(f).unwrap();
            format!(
                "{}:{}",
                v["rule"].as_str().unwrap(),
                v["severity"].as_str().unwrap()
            )
        })
        .collect()
}

// ------------------------------------------------------------------ the same answer

fn same_answer_alone_and_from_every_directory(name: &str) -> (tempfile::TempDir, PathBuf, PerFile) {
    let (tmp, root) = project(name);
    let all = whole_tree(&root);
    for f in files(&root) {
        let alone = per_file(
            &locklint(&root, &["check", &f, "--format", "json"]),
            &root,
            &root,
        );
        assert_eq!(alone, only(&all, |p| p == f), "{f} checked alone");
    }
    for d in dirs(&root) {
        let cwd = root.join(&d);
        let here = per_file(&locklint(&cwd, &["check", "--format", "json"]), &cwd, &root);
        let prefix = if d.is_empty() {
            String::new()
        } else {
            format!("{d}/")
        };
        assert_eq!(
            here,
            only(&all, |p| p.starts_with(&prefix)),
            "check from `{d}`"
        );
    }
    (tmp, root, all)
}

#[test]
fn a_workspace_gives_each_file_the_same_findings_however_it_is_selected() {
    let (_tmp, root, all) = same_answer_alone_and_from_every_directory("workspace");
    // the findings that rest on facts from other files and crates
    let invoices = rules_of(&all, "crates/billing/src/invoices.rs");
    assert!(
        invoices.contains(&"unfenced-write:error".to_string()),
        "the schema in the root's migrations/ makes the write an error: {invoices:?}"
    );
    assert!(
        invoices.iter().any(|r| r.starts_with("separate-expire")),
        "the const key from keys.rs is a lock: {invoices:?}"
    );
    assert!(
        rules_of(&all, "crates/billing/src/keys.rs")
            .contains(&"lua-release-no-compare:error".to_string()),
        "the script const run from invoices.rs"
    );
    assert!(
        rules_of(&all, "crates/locks/src/lib.rs")
            .iter()
            .any(|r| r.starts_with("unconditional-release")),
        "the helper of another crate"
    );
    assert!(!rules_of(&all, "scripts/renew.lua").is_empty());
    // each package through cargo
    for package in ["billing", "locks", "shipping"] {
        let o = cargo_locklint(&root, &["-p", package, "--format", "json"]);
        assert_eq!(
            per_file(&o, &root, &root),
            only(&all, |p| p.starts_with(&format!("crates/{package}/"))),
            "cargo locklint -p {package}"
        );
    }
    // every package: the members, not the root's own files
    let o = cargo_locklint(&root, &["--workspace", "--format", "json"]);
    assert_eq!(
        per_file(&o, &root, &root),
        only(&all, |p| p.starts_with("crates/")),
        "cargo locklint --workspace"
    );
    // from inside a package, its package
    let cwd = root.join("crates/billing/src");
    let o = cargo_locklint(&cwd, &["--format", "json"]);
    assert_eq!(
        per_file(&o, &cwd, &root),
        only(&all, |p| p.starts_with("crates/billing/")),
        "cargo locklint inside billing"
    );
}

#[test]
fn a_project_of_sql_and_lua_files_gives_each_file_the_same_findings_however_it_is_selected() {
    let (_tmp, _root, all) = same_answer_alone_and_from_every_directory("plain");
    // the fence column is named by the root's configuration, the table declared in schema/
    let close = rules_of(&all, "queries/close_run.sql");
    assert_eq!(close, vec!["unfenced-write:error"], "{all:?}");
    assert!(!rules_of(&all, "scripts/release.lua").is_empty());
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", both(&o));
}

/// A line that changes nothing: a comment in the file's language.
fn comment(file: &str) -> &'static str {
    if file.ends_with(".rs") {
        "\n// touched\n"
    } else {
        "\n-- touched\n"
    }
}

#[test]
fn changed_since_selects_the_changed_files_of_the_project() {
    for name in ["workspace", "plain"] {
        let (_tmp, root) = project(name);
        git(&root, &["init", "-q"]);
        git(&root, &["add", "."]);
        git(&root, &["commit", "-q", "-m", "project"]);
        for f in files(&root) {
            let path = root.join(&f);
            let before = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, format!("{before}{}", comment(&f))).unwrap();
            let all = whole_tree(&root);
            let o = locklint(
                &root,
                &["check", "--changed-since", "HEAD", "--format", "json"],
            );
            assert_eq!(
                per_file(&o, &root, &root),
                only(&all, |p| p == f),
                "{name}: --changed-since with {f} changed"
            );
            std::fs::write(&path, before).unwrap();
        }
    }
}

// ------------------------------------------------------------------ the language server

fn frame(msg: Value) -> Vec<u8> {
    let body = msg.to_string();
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

#[derive(Clone, Default)]
struct Written(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Written {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The diagnostics the language server publishes for `file` when it is the only open
/// document (the client names `root` as its workspace, or no workspace at all).
fn lsp_diagnostics(root: &Path, file: &str, workspace: bool) -> Vec<Value> {
    let path = root.join(file);
    let uri = url::Url::from_file_path(&path).unwrap().to_string();
    let text = std::fs::read_to_string(&path).unwrap();
    let language = match path.extension().and_then(|e| e.to_str()) {
        Some("rs") => "rust",
        Some("sql") => "sql",
        _ => "lua",
    };
    let root_uri = if workspace {
        Value::String(url::Url::from_file_path(root).unwrap().to_string())
    } else {
        Value::Null
    };
    let input: Vec<u8> = [
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "rootUri": root_uri, "capabilities": {} } }),
        json!({ "jsonrpc": "2.0", "method": "initialized", "params": {} }),
        json!({ "jsonrpc": "2.0", "method": "textDocument/didOpen", "params": { "textDocument": { "uri": uri, "languageId": language, "version": 1, "text": text } } }),
        // answered once the document is analysed
        json!({ "jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": { "textDocument": { "uri": uri }, "position": { "line": 0, "character": 0 } } }),
        json!({ "jsonrpc": "2.0", "id": 3, "method": "shutdown" }),
    ]
    .into_iter()
    .flat_map(frame)
    .collect();
    let out = Written::default();
    let code = locklint::lsp::run(
        Cursor::new(input),
        Box::new(out.clone()),
        locklint::lsp::Config {
            debounce: std::time::Duration::ZERO,
            analyser: Box::new(locklint::lsp::analysis::Indexed::default()),
        },
    );
    assert_eq!(code, 0);
    let written = out.0.lock().unwrap().clone();
    let mut reader = locklint::lsp::transport::Reader::new(Cursor::new(written));
    let mut published = None;
    while let locklint::lsp::transport::Frame::Body(b) = reader.read_frame() {
        let m: Value = serde_json::from_slice(&b).unwrap();
        if m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri {
            published = Some(m["params"]["diagnostics"].as_array().unwrap().clone());
        }
    }
    published.expect("diagnostics published")
}

#[test]
fn the_language_server_shows_an_open_file_what_the_command_line_reports() {
    for name in ["workspace", "plain"] {
        let (_tmp, root) = project(name);
        let all = whole_tree(&root);
        for f in files(&root) {
            let mut expected: Vec<String> = all
                .get(&f)
                .into_iter()
                .flatten()
                .map(|f| comparable_finding(f))
                .collect();
            expected.sort();
            for workspace in [true, false] {
                let mut seen: Vec<String> = lsp_diagnostics(&root, &f, workspace)
                    .iter()
                    .map(comparable_diagnostic)
                    .collect();
                seen.sort();
                assert_eq!(
                    seen, expected,
                    "{name}: {f} (workspace folder: {workspace})"
                );
            }
        }
    }
}

// ------------------------------------------------------------------ selection and root

#[test]
fn files_outside_the_selection_give_facts_never_findings_or_notes() {
    let (_tmp, root) = project("workspace");
    // a file that does not parse and one that is not text, outside the selection
    // a lock helper that does not parse
    std::fs::write(
        root.join("crates/shipping/src/broken.rs"),
        "use redis::AsyncCommands;\nasync fn release(c: &mut redis::aio::MultiplexedConnection) {\n    let _: () = c.del(\"lock:ship\").await.unwrap(\n",
    )
    .unwrap();
    std::fs::write(root.join("crates/shipping/src/blob.rs"), b"\0\0\0").unwrap();
    let o = locklint(&root, &["check", "crates/billing", "--format", "json"]);
    let found = per_file(&o, &root, &root);
    assert!(
        found.keys().all(|p| p.starts_with("crates/billing/")),
        "{found:?}"
    );
    assert!(!found.is_empty());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("shipping"), "{stderr}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["files"], 3, "the selected files are counted");
    // checked themselves, they are reported
    let o = locklint(&root, &["check", "crates/shipping", "--format", "json"]);
    assert!(per_file(&o, &root, &root).contains_key("crates/shipping/src/broken.rs"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("blob.rs: skipped: binary file"));
}

#[test]
fn the_project_root_can_be_named() {
    let (_tmp, root) = project("workspace");
    let file = "crates/billing/src/invoices.rs";
    let all = whole_tree(&root);
    // the billing package alone does not know the schema of the root's migrations/
    let o = locklint(
        &root,
        &[
            "check",
            file,
            "--project-root",
            "crates/billing",
            "--format",
            "json",
        ],
    );
    let narrow = per_file(&o, &root, &root);
    assert_ne!(narrow.get(file), all.get(file));
    assert!(!rules_of(&narrow, file).contains(&"unfenced-write:error".to_string()));
    // the same root as detected gives the same answer
    let o = locklint(
        &root,
        &["check", file, "--project-root", ".", "--format", "json"],
    );
    assert_eq!(per_file(&o, &root, &root), only(&all, |p| p == file));
    // cargo locklint takes it too
    let o = cargo_locklint(
        &root,
        &[
            "-p",
            "billing",
            "--project-root",
            "crates/billing",
            "--format",
            "json",
        ],
    );
    assert_eq!(per_file(&o, &root, &root).get(file), narrow.get(file));
    let o = locklint(&root, &["check", file, "--project-root", "nowhere"]);
    assert_eq!(o.status.code(), Some(2), "{}", both(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--project-root nowhere: not a directory"));
}

fn snapshot_of(root: &Path) -> BTreeMap<String, String> {
    files(root)
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(root.join(&f)).unwrap();
            (f, text)
        })
        .collect()
}

#[test]
fn fix_edits_the_selected_files_only() {
    let (_tmp, root) = project("workspace");
    let before = snapshot_of(&root);
    let file = "crates/billing/src/invoices.rs";
    let o = locklint(&root, &["check", "--fix", "--unsafe-fixes", file]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", both(&o));
    let after = snapshot_of(&root);
    for (f, text) in &before {
        if f != file {
            assert_eq!(&after[f], text, "{f} was not selected");
        }
    }
    assert_ne!(
        after[file],
        before[file],
        "the selected file was fixed: {}",
        both(&o)
    );
    // the whole tree fixes the other files too
    let o = locklint(&root, &["check", "--fix", "--unsafe-fixes"]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", both(&o));
    let whole = snapshot_of(&root);
    assert!(
        before.keys().any(|f| f != file && whole[f] != before[f]),
        "fixes elsewhere in the project"
    );
}

#[test]
fn the_audit_lists_the_locks_of_the_selection_with_facts_from_the_project() {
    let (_tmp, root) = project("workspace");
    let names = |o: &Output| -> Vec<String> {
        assert_eq!(o.status.code(), Some(0), "{}", both(o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["locks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_string())
            .collect()
    };
    let all = names(&locklint(&root, &["audit", "--format", "json"]));
    let shipping = names(&locklint(
        &root,
        &["audit", "crates/shipping", "--format", "json"],
    ));
    assert!(!shipping.is_empty());
    assert!(shipping.iter().all(|n| n.contains("ship:")), "{shipping:?}");
    let billing = names(&cargo_locklint(
        &root,
        &["audit", "-p", "billing", "--format", "json"],
    ));
    assert!(
        billing.iter().any(|n| n.contains("shipment")),
        "a lock taken through the helper of another crate: {billing:?}"
    );
    for n in shipping.iter().chain(&billing) {
        assert!(all.contains(n), "{n} is in the whole project's audit");
    }
}
