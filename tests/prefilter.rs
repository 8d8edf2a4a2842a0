//! The prefilter never costs a finding: `check` gives the same JSON with and without
//! `--no-prefilter` on every fixture directory and test project, and on a generated workspace
//! whose lock helper, consts, key builder, struct and schema sit in files that name no client,
//! so that only the names the parsed files need bring them in. Calls resolve among the
//! functions of the packages the caller depends on.

use serde_json::Value;
use std::path::{Path, PathBuf};

#[path = "support/bin.rs"]
mod bin;
use bin::locklint;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `check --format json` of `dir` as its own project, with or without the prefilter.
fn check(dir: &Path, prefilter: bool) -> Value {
    let mut args = vec![
        "check",
        "--no-cache",
        "--format",
        "json",
        "--project-root",
        ".",
    ];
    if !prefilter {
        args.push("--no-prefilter");
    }
    args.push(".");
    let out = locklint(dir, &args);
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "{}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

fn findings(report: &Value) -> Vec<(String, String, u64)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["rule"].as_str().unwrap().to_string(),
                f["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Whether `found` holds a finding of `rule` in the file at `path`.
fn has(found: &[(String, String, u64)], path: &str, rule: &str) -> bool {
    found.iter().any(|(p, r, _)| p == path && r == rule)
}

#[test]
fn every_fixture_directory_and_test_project_gives_the_same_findings_without_the_prefilter() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.extend(["tests/projects/workspace", "tests/projects/plain"].map(|d| root().join(d)));
    dirs.sort();
    let mut total = 0;
    for dir in &dirs {
        let with = check(dir, true);
        let without = check(dir, false);
        assert_eq!(with, without, "{}", dir.display());
        total += findings(&with).len();
    }
    assert!(total > 100, "the fixtures hold findings: {total}");
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The manifest of `crates/<name>`, with its `[dependencies]` lines.
fn manifest(dir: &Path, name: &str, dependencies: &str) {
    write(
        dir,
        &format!("crates/{name}/Cargo.toml"),
        &format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\n\n[dependencies]\n{dependencies}"
        ),
    );
}

/// The manifests of a workspace of `crates/*` with a `store` crate that depends on redis.
fn store_workspace(dir: &Path) {
    write(
        dir,
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/*\"]\nresolver = \"2\"\n",
    );
    manifest(dir, "store", "redis = \"1\"\n");
}

/// A workspace where `app`, which names no client, takes locks through `store`'s wrappers with
/// a key built from a const in a file that names no client either; `other` defines a function
/// of a wrapper's name but is no dependency of `app`, and holds a syntax error.
fn generated_workspace(dir: &Path) {
    store_workspace(dir);
    write(
        dir,
        "crates/store/src/pool.rs",
        r#"use redis::AsyncCommands;

pub struct Pool {
    pub con: redis::aio::MultiplexedConnection,
}

impl Pool {
    /// Takes `key` with `value`, no expiry.
    pub async fn put_if_absent(&self, key: &str, value: &str) -> bool {
        let mut con = self.con.clone();
        con.set_nx(key, value).await.unwrap_or(false)
    }

    pub async fn remove(&self, key: &str) {
        let mut con = self.con.clone();
        let _: () = con.del(key).await.unwrap();
    }
}

pub async fn take(pool: &Pool, key: &str, value: &str) -> bool {
    pool.put_if_absent(key, value).await
}
"#,
    );
    write(
        dir,
        "crates/store/src/lib.rs",
        "pub mod pool;\npub mod naming;\n",
    );
    write(
        dir,
        "crates/store/src/naming.rs",
        r#"/// Where the invoice jobs keep their guard.
pub const INVOICE_GUARD: &str = "lock:invoice";

pub fn guard_name(id: u64) -> String {
    format!("{INVOICE_GUARD}:{id}")
}
"#,
    );
    manifest(dir, "other", "");
    write(
        dir,
        "crates/other/src/lib.rs",
        r#"pub struct Memo;

pub async fn take(memo: &Memo, key: &str, value: &str) -> bool {
    let _ = memo;
    !key.is_empty() && !value.is_empty()
}

pub mod broken;
"#,
    );
    write(
        dir,
        "crates/other/src/broken.rs",
        "/// A helper that does not parse; it holds nothing a rule reads.\npub fn broken( {\n",
    );
    manifest(dir, "app", "store = { path = \"../store\" }\n");
    write(
        dir,
        "crates/app/src/lib.rs",
        r#"use store::naming::guard_name;
use store::pool::{take, Pool};

pub struct Worker {
    pub pool: Pool,
}

impl Worker {
    pub async fn run(&self, id: u64) {
        let key = guard_name(id);
        if take(&self.pool, &key, "1").await {
            finish(id);
            self.pool.remove(&key).await;
        }
    }
}

fn finish(id: u64) {
    let _ = id;
}
"#,
    );
    write(
        dir,
        "migrations/001_jobs.sql",
        "CREATE TABLE jobs (id BIGINT PRIMARY KEY, fence BIGINT NOT NULL DEFAULT 0);\n",
    );
}

#[test]
fn names_needed_from_files_without_lock_code_bring_those_files_in() {
    let d = tempfile::tempdir().unwrap();
    generated_workspace(d.path());
    let with = check(d.path(), true);
    let without = check(d.path(), false);
    let found = findings(&with);
    // the caller in `app` names no client: its finding comes through the wrapper it calls
    assert!(
        has(&found, "crates/app/src/lib.rs", "constant-lock-value"),
        "{found:?}"
    );
    // the plain delete sits in the pool's generic `remove`: the release is the caller's
    assert!(
        has(&found, "crates/app/src/lib.rs", "unconditional-release"),
        "{found:?}"
    );
    // a syntax error is reported only where lock code can be: the broken helper of `other`
    // is read only when every file is parsed
    let broken = |r: &Value| {
        findings(r)
            .into_iter()
            .filter(|(p, r, _)| p == "crates/other/src/broken.rs" && r == "parse-error")
            .count()
    };
    assert_eq!(broken(&with), 0);
    assert_eq!(broken(&without), 1);
    let lock_findings = |r: &Value| {
        findings(r)
            .into_iter()
            .filter(|(_, r, _)| r != "parse-error")
            .collect::<Vec<_>>()
    };
    assert_eq!(lock_findings(&with), lock_findings(&without));
}

#[test]
fn a_call_resolves_among_the_packages_its_caller_depends_on() {
    let d = tempfile::tempdir().unwrap();
    generated_workspace(d.path());
    let found = findings(&check(d.path(), true));
    assert!(
        found.iter().any(|(p, _, _)| p == "crates/app/src/lib.rs"),
        "`other`'s namesake, no dependency of `app`, leaves the call resolved: {found:?}"
    );
    // once `app` depends on `other` too, the call of `take` is ambiguous and nothing is
    // reported through it (the release goes through `Pool::remove`, which only `store` has)
    manifest(
        d.path(),
        "app",
        "store = { path = \"../store\" }\nother = { path = \"../other\" }\n",
    );
    let found = findings(&check(d.path(), true));
    let in_app: Vec<&str> = found
        .iter()
        .filter(|(p, _, _)| p == "crates/app/src/lib.rs")
        .map(|(_, r, _)| r.as_str())
        .collect();
    assert_eq!(in_app, ["unconditional-release"], "{found:?}");
    assert_eq!(findings(&check(d.path(), false)).len(), found.len() + 1);
}

/// A workspace whose lock key is a struct field set by a `Self { .. }` literal in a file that
/// names the struct only by its path in an `impl`, whose wrapper is called with a comment
/// before its parentheses from a crate that names no client, and where another dependency
/// has a method and an `extern` declaration of the wrapper's name.
fn literal_and_namesakes_workspace(dir: &Path) {
    store_workspace(dir);
    write(
        dir,
        "crates/store/src/lib.rs",
        "pub mod locker;\npub mod setup;\n",
    );
    write(
        dir,
        "crates/store/src/locker.rs",
        r#"use redis::AsyncCommands;

pub type Conn = redis::aio::MultiplexedConnection;

pub struct Locker {
    pub key: String,
    pub con: Conn,
}

impl Locker {
    pub async fn acquire(&self, value: &str) -> bool {
        let mut con = self.con.clone();
        con.set_nx(&self.key, value).await.unwrap_or(false)
    }

    pub async fn release(&self) {
        let mut con = self.con.clone();
        let _: () = con.del(&self.key).await.unwrap();
    }
}

pub async fn run_locked<F: FnOnce()>(locker: &Locker, value: &str, work: F) {
    if locker.acquire(value).await {
        work();
        locker.release().await;
    }
}
"#,
    );
    write(
        dir,
        "crates/store/src/setup.rs",
        r#"use crate::locker::Conn;

impl crate::locker::Locker {
    /// The locker of the nightly reports.
    pub fn reports(con: Conn) -> Self {
        Self {
            key: "lock:report".to_string(),
            con,
        }
    }
}
"#,
    );
    manifest(dir, "other", "");
    write(
        dir,
        "crates/other/src/lib.rs",
        r#"pub struct Jobs;

impl Jobs {
    /// A method of the wrapper's name: no path call reaches it.
    pub async fn run_locked(&self, value: &str, work: fn()) {
        let _ = value;
        work();
    }
}

extern "C" {
    /// A declaration of the wrapper's name: no function of the project.
    pub fn run_locked(locker: u64, value: u64, work: u64);
}
"#,
    );
    manifest(
        dir,
        "app",
        "store = { path = \"../store\" }\nother = { path = \"../other\" }\n",
    );
    write(
        dir,
        "crates/app/src/lib.rs",
        r#"use store::locker::{run_locked, Locker};

pub async fn nightly(locker: &Locker) {
    run_locked /* the nightly run */ (locker, "1", || publish()).await;
}

fn publish() {}
"#,
    );
}

#[test]
fn calls_struct_literals_and_namesakes_are_found_by_how_they_stand() {
    let d = tempfile::tempdir().unwrap();
    literal_and_namesakes_workspace(d.path());
    let with = check(d.path(), true);
    let found = findings(&with);
    // the caller's constant value reaches the lock through the wrapper: the call was found
    // behind its comment, and neither the method nor the declaration of `other` competes
    assert!(
        has(&found, "crates/app/src/lib.rs", "constant-lock-value"),
        "{found:?}"
    );
    // the key is the field's value, set by the `Self { .. }` literal of `setup.rs`
    let messages: Vec<&str> = with["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert!(
        messages.iter().all(|m| m.contains("`lock:report`")),
        "{messages:?}"
    );
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(with["findings"], check(d.path(), false)["findings"]);
}
