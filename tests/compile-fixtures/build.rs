//! Generates one module per Rust fixture: `fixtures/<rule>/bad_*.rs`, `good_*.rs` and the
//! fixed `bad_*.rs.fixed` / `bad_*.rs.<flavour>.fixed`, so that a new fixture is compiled without anyone listing it.
//! A directory example (`bad_*/`, `good_*/`) is one module whose `.rs` files are its submodules.
//! `fixtures/parse-error/` is left out: its files are broken on purpose. The fixed modules
//! deny warnings (a fix must not leave an unused binding or import behind).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Fixture directories whose files are not meant to compile.
const NOT_RUST: &[&str] = &["parse-error", "audit"];

/// Examples written against crates this crate does not depend on, by the end of their name
/// (`bad_release_by_name_diesel.rs`, `good_claim_sea_orm/`): diesel (its PostgreSQL backend,
/// with diesel-async for the async code) and sea-orm (sea-query, its derive macros and its
/// sqlx driver) would more than double the crates this crate builds, for ORM write chains
/// whose shape the front-end reads without their types; `_sea_orm_sql` examples run SQL text
/// through sea-orm's `Statement` and hold no ORM write (`tests/orm.rs` asks every `_sea_orm`
/// example for one). They are analysed like every other example, not compiled. Likewise
/// `_external_wrapper` examples: they call a Redis wrapper crate that is outside the project on
/// purpose (its methods are read by their names), which defining it here would bring in.
const NOT_COMPILED: &[&str] = &["_diesel", "_sea_orm", "_sea_orm_sql", "_external_wrapper"];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let fixtures = manifest.join("../../fixtures");
    println!("cargo:rerun-if-changed={}", fixtures.display());
    println!("cargo:rerun-if-env-changed=SQLX_PREPARE");
    // `sqlx::query!` in the fixtures reads the checked-in `.sqlx` data, never a live database,
    // unless that data is being regenerated (scripts/sqlx-prepare-fixtures.sh).
    if std::env::var_os("SQLX_PREPARE").is_none() {
        println!("cargo:rustc-env=SQLX_OFFLINE=true");
    }

    let mut rules: Vec<PathBuf> = read_dir(&fixtures)
        .into_iter()
        .filter(|p| p.is_dir() && !NOT_RUST.iter().any(|n| p.ends_with(n)))
        .collect();
    rules.sort();
    let mut out = String::new();
    let (mut sources, mut fixed) = (0usize, 0usize);
    for rule in rules {
        let mut files: Vec<(String, PathBuf)> = read_dir(&rule)
            .into_iter()
            .filter_map(|p| {
                let name = p.file_name()?.to_str()?.to_string();
                if !(name.starts_with("bad_") || name.starts_with("good_")) || not_compiled(&name) {
                    return None;
                }
                // a directory example: its Rust files are sibling modules of one module
                if p.is_dir() {
                    sources += rust_files(&p).len();
                    return Some((ident(&name), p));
                }
                // `bad_x.rs.fixed`, or `bad_x.rs.<flavour>.fixed` for a fix flavour such
                // as `redis-8.4`
                let module = if let Some((stem, rest)) = name.split_once(".rs.") {
                    let flavour = rest.strip_suffix("fixed")?.trim_end_matches('.');
                    fixed += 1;
                    match flavour {
                        "" => format!("{stem}_fixed"),
                        flavour => format!("{stem}_fixed_{flavour}"),
                    }
                } else {
                    let stem = name.strip_suffix(".rs")?;
                    sources += 1;
                    stem.to_string()
                };
                Some((ident(&module), p))
            })
            .collect();
        if files.is_empty() {
            continue;
        }
        files.sort();
        let rule_name = rule
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        writeln!(out, "pub mod {} {{", ident(rule_name)).unwrap();
        for (module, file) in files {
            if file.is_dir() {
                writeln!(out, "    pub mod {module} {{").unwrap();
                for inner in rust_files(&file) {
                    let stem = inner.file_stem().and_then(|s| s.to_str()).unwrap_or("m");
                    write_module(&mut out, "        ", &ident(stem), inner.clone(), false);
                }
                writeln!(out, "    }}").unwrap();
            } else {
                let is_fixed = file.extension().is_some_and(|e| e == "fixed");
                write_module(&mut out, "    ", &module, file, is_fixed);
            }
        }
        writeln!(out, "}}").unwrap();
    }
    writeln!(
        out,
        "/// How many `bad_*.rs` / `good_*.rs` fixtures this crate compiles."
    )
    .unwrap();
    writeln!(out, "pub const SOURCE_FIXTURES: usize = {sources};").unwrap();
    writeln!(
        out,
        "/// How many fixed fixtures (`bad_*.rs.fixed`, `bad_*.rs.<flavour>.fixed`) this crate compiles."
    )
    .unwrap();
    writeln!(out, "pub const FIXED_FIXTURES: usize = {fixed};").unwrap();
    writeln!(
        out,
        "/// Examples left out by the end of their name (crates this crate does not depend on)."
    )
    .unwrap();
    writeln!(out, "pub const NOT_COMPILED: &[&str] = &{NOT_COMPILED:?};").unwrap();
    let dest =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it")).join("fixtures.rs");
    std::fs::write(dest, out).expect("write the generated module list");
}

fn write_module(out: &mut String, indent: &str, module: &str, file: PathBuf, is_fixed: bool) {
    let path = file.canonicalize().unwrap_or(file);
    if is_fixed {
        // fixed code compiles without warnings: a fix leaves nothing unused; fixtures are
        // snippets, so items nothing calls are fine
        writeln!(out, "{indent}#[deny(warnings)]").unwrap();
        writeln!(out, "{indent}#[allow(dead_code, clippy::all)]").unwrap();
    } else {
        writeln!(out, "{indent}#[allow(warnings, clippy::all)]").unwrap();
    }
    writeln!(out, "{indent}#[path = {:?}]", path.display().to_string()).unwrap();
    writeln!(out, "{indent}pub mod {module};").unwrap();
}

/// Whether an example (`bad_x_diesel.rs`, `good_y_sea_orm/`) is left out: see [`NOT_COMPILED`].
fn not_compiled(name: &str) -> bool {
    let stem = name.split_once('.').map_or(name, |(stem, _)| stem);
    NOT_COMPILED.iter().any(|s| stem.ends_with(s))
}

/// The `.rs` files of a directory example, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = read_dir(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    files
}

fn read_dir(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
        Err(e) => panic!("cannot read {}: {e}", dir.display()),
    }
}

fn ident(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}
