//! Writes through ORMs end to end: a lease table written only through sea-orm builders (no SQL
//! text, the table declared by an entity in another file) is in the audit's inventory with its
//! acquire, renewal and release, and `check` agrees; fixes that edit SQL text are never offered
//! for a statement read from an ORM call chain, so `--fix` leaves such files as they are; every
//! ORM fixture, clean ones included, has its writes read.

use std::path::{Path, PathBuf};

#[path = "support/bin.rs"]
mod bin;
use bin::locklint;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const LEASES: &str = "fixtures/audit/orm-lease-table";

fn json(args: &[&str]) -> serde_json::Value {
    let o = locklint(&root(), args);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn line(site: &serde_json::Value) -> (String, u64) {
    (
        site["path"].as_str().unwrap().to_string(),
        site["line"].as_u64().unwrap(),
    )
}

#[test]
fn a_lease_table_written_only_through_sea_orm_is_audited() {
    let doc = json(&[
        "audit",
        LEASES,
        "--project-root",
        LEASES,
        "--format",
        "json",
    ]);
    let locks = doc["locks"].as_array().unwrap();
    assert_eq!(locks.len(), 1, "{doc:#}");
    let lock = &locks[0];
    // the table the entity declares in `entity/worker_lease.rs`, not the module's name
    assert_eq!(lock["name"], "table worker_leases");
    assert_eq!(lock["mechanism"], "lock-table");
    assert_eq!(lock["verdict"], "broken");
    let leases = format!("{LEASES}/src/leases.rs");
    let acquire = &lock["acquires"][0];
    assert_eq!(acquire["command"], "UPSERT worker_leases");
    assert_eq!(acquire["function"], "take");
    assert_eq!(line(&acquire["site"]), (leases.clone(), 14));
    let renewal = &lock["renewals"][0];
    assert_eq!(renewal["function"], "renew");
    assert_eq!(renewal["owner_checked"], true);
    let release = &lock["releases"][0];
    assert_eq!(release["function"], "release");
    assert_eq!(release["command"], "DELETE worker_leases");
    assert_eq!(release["owner_checked"], false);
    assert_eq!(lock["renewals"].as_array().unwrap().len(), 1);
    assert_eq!(lock["releases"].as_array().unwrap().len(), 1);

    // `check` reports the release the audit calls unchecked, and nothing else
    let check = json(&[
        "check",
        LEASES,
        "--project-root",
        LEASES,
        "--format",
        "json",
    ]);
    let findings = check["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{check:#}");
    assert_eq!(findings[0]["rule"], "lock-table-no-owner-check");
    // at the start of the chain that builds the release, with its filter as a related location
    assert_eq!(line(&findings[0]), (leases, 46));
    assert!(findings[0]["fix"].is_null());
}

/// Copies of `files` (paths from the repository root) in a temporary project.
fn project(files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in files {
        let name = Path::new(f).file_name().unwrap();
        std::fs::copy(root().join(f), dir.path().join(name)).unwrap();
    }
    std::fs::write(dir.path().join("locklint.toml"), "").unwrap();
    dir
}

#[test]
fn fixes_never_edit_an_orm_chain() {
    let files = [
        "fixtures/lock-table-steals-live-lock/bad_upsert_takes_live_lock_diesel.rs",
        "fixtures/lock-table-steals-live-lock/bad_update_many_takes_lock_sea_orm.rs",
        "fixtures/lock-table-no-owner-check/bad_release_by_name_diesel.rs",
        "fixtures/lock-table-client-clock/bad_renew_client_time_sea_orm.rs",
    ];
    let dir = project(&files);
    let before: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(root().join(f)).unwrap())
        .collect();
    let report = json(&["check", dir.path().to_str().unwrap(), "--format", "json"]);
    let findings = report["findings"].as_array().unwrap();
    let rules: Vec<&str> = findings
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules.len(),
        4,
        "one finding per file, each on an ORM write: {rules:?}"
    );
    assert!(findings.iter().all(|f| f["fix"].is_null()), "{report:#}");
    let o = locklint(
        &root(),
        &[
            "check",
            dir.path().to_str().unwrap(),
            "--fix",
            "--unsafe-fixes",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "the findings remain");
    for (f, text) in files.iter().zip(before) {
        let name = Path::new(f).file_name().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(name)).unwrap(),
            text,
            "{f}"
        );
    }
}

/// The Rust files of an example (a file, or a directory's files at any depth).
fn rust_files(example: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![example.to_path_buf()];
    while let Some(p) = todo.pop() {
        if p.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out
}

/// Every ORM example (named `*_diesel`, `*_sea_orm`), good ones included, has its writes read:
/// a clean example is clean because its writes are checked, not because they were not seen.
#[test]
fn every_orm_example_has_its_writes_read() {
    use locklint::ir::source::SourceFile;
    let mut examples = 0;
    for rule in std::fs::read_dir(root().join("fixtures")).unwrap() {
        let rule = rule.unwrap().path();
        let Ok(entries) = std::fs::read_dir(&rule) else {
            continue;
        };
        for example in entries {
            let example = example.unwrap().path();
            let name = example.file_name().unwrap().to_string_lossy().to_string();
            let stem = name.split_once('.').map_or(name.as_str(), |(s, _)| s);
            if !(stem.ends_with("_diesel") || stem.ends_with("_sea_orm")) {
                continue;
            }
            examples += 1;
            let writes: usize = rust_files(&example)
                .into_iter()
                .map(|f| {
                    let text = std::fs::read_to_string(&f).unwrap();
                    let ir = locklint::frontend::analyze(0, SourceFile::new(f, text));
                    ir.sql
                        .statements
                        .iter()
                        .filter(|st| st.is_write() && ir.embedded[st.embedded].is_orm())
                        .count()
                })
                .sum();
            assert!(writes > 0, "{}: no ORM write read", example.display());
        }
    }
    assert!(examples >= 19, "{examples} ORM examples");
}
