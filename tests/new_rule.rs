//! `scripts/new-rule.sh`, the scaffold for a new rule, run on a copy of the files it changes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "support/sources.rs"]
mod sources;
use sources::RULE_PAGE_SECTIONS;

const CHANGED: &[&str] = &[
    "crates/locklint-rules/src/lib.rs",
    "rules/README.md",
    "README.md",
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A directory holding copies of the files the scaffold changes, in the repository's layout.
fn copy_of_checkout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in CHANGED {
        let to = dir.path().join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo().join(f), &to).unwrap();
    }
    std::fs::create_dir_all(dir.path().join("fixtures")).unwrap();
    dir
}

fn scaffold(root: &Path, args: &[&str]) -> Output {
    Command::new("bash")
        .arg(repo().join("scripts/new-rule.sh"))
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap()
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap()
}

fn rule_file(root: &Path, module: &str) -> PathBuf {
    root.join(format!("crates/locklint-rules/src/{module}.rs"))
}

#[test]
fn a_new_trace_rule_is_registered_documented_and_indexed() {
    let dir = copy_of_checkout();
    let root = dir.path();
    let o = scaffold(
        root,
        &[
            "lock-key-too-long",
            "trace",
            "warning",
            "a lock key is longer than the server allows",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let code = std::fs::read_to_string(rule_file(root, "lock_key_too_long")).unwrap();
    let parsed = syn::parse_file(&code).expect("the generated rule is valid Rust");
    let names: Vec<String> = parsed
        .items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Struct(s) => Some(s.ident.to_string()),
            syn::Item::Static(s) => Some(s.ident.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["LockKeyTooLong", "INFO"]);
    assert!(code.contains("name: \"lock-key-too-long\""));
    assert!(code.contains("severity: Severity::Warning"));
    assert!(code.contains("fn check(&self, trace: &Trace, facts: &LockFacts, fixes: Fixes"));
    assert!(code.contains("include_str!(\"../../../rules/lock-key-too-long.md\")"));

    // registered: the module among the others in order, the rule last in the registry
    let lib = read(root, "crates/locklint-rules/src/lib.rs");
    let lib_ast = syn::parse_file(&lib).expect("the registry is still valid Rust");
    let mods: Vec<String> = lib_ast
        .items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect();
    assert!(mods.contains(&"lock_key_too_long".to_string()));
    let mut sorted = mods.clone();
    sorted.sort();
    assert_eq!(mods, sorted, "module declarations stay in order");
    let registry = &lib[lib.find("static RULES").unwrap()..];
    let registry = &registry[..registry.find("];").unwrap()];
    assert!(registry
        .trim_end()
        .ends_with("&lock_key_too_long::LockKeyTooLong,"));

    // the page has the sections every rule page needs
    let page = read(root, "rules/lock-key-too-long.md");
    assert!(page.starts_with("# lock-key-too-long\n"));
    for section in RULE_PAGE_SECTIONS {
        assert!(page.contains(section), "page lacks {section}");
    }

    // indexed before the meta rules in both tables
    let index = read(root, "rules/README.md");
    let row = index
        .find("| [lock-key-too-long] | warning | a lock key is longer than the server allows |")
        .expect("row in rules/README.md");
    assert!(row < index.find("| [parse-error] |").unwrap());
    assert!(index.contains("[lock-key-too-long]: lock-key-too-long.md"));
    let readme = read(root, "README.md");
    let row = readme
        .find("| [`lock-key-too-long`](rules/lock-key-too-long.md) |")
        .expect("row in the README's rules table");
    assert!(row < readme.find("| [`parse-error`]").unwrap());
    assert!(root.join("fixtures/lock-key-too-long").is_dir());
}

#[test]
fn a_file_rule_reads_files() {
    let dir = copy_of_checkout();
    let root = dir.path();
    let o = scaffold(
        root,
        &[
            "lock-table-without-key",
            "file",
            "error",
            "a lock table has no unique key on the lock name",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let code = std::fs::read_to_string(rule_file(root, "lock_table_without_key")).unwrap();
    syn::parse_file(&code).expect("the generated rule is valid Rust");
    assert!(code.contains("fn check_file(&self, file: &FileIr, project: &Project"));
    assert!(code.contains("severity: Severity::Error"));
}

#[test]
fn bad_names_and_existing_rules_are_refused_without_changing_anything() {
    let dir = copy_of_checkout();
    let root = dir.path();
    let before: Vec<String> = CHANGED.iter().map(|f| read(root, f)).collect();
    for (args, says) in [
        (
            ["Lock_Thing", "trace", "error", "s"],
            "is not a kebab-case name",
        ),
        (["lockthing", "trace", "error", "s"], "is not a kebab-case"),
        (["lock-thing", "walk", "error", "s"], "kind must be"),
        (["lock-thing", "trace", "fatal", "s"], "severity must be"),
        (
            ["lock-thing", "trace", "error", "a \"quoted\" word"],
            "summary",
        ),
        (["separate-expire", "trace", "error", "s"], "exists already"),
    ] {
        let o = scaffold(root, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let after: Vec<String> = CHANGED.iter().map(|f| read(root, f)).collect();
    assert_eq!(before, after);
    assert!(!root.join("rules/lock-thing.md").exists());
}
