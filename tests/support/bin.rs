//! The package's binaries as the integration tests run them: in a given directory, with an
//! environment that does not leak the caller's colour or cache settings, and offline for
//! `cargo metadata`.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// A command for one of the package's binaries, run in `dir`.
pub fn command(bin: &str, dir: &Path) -> Command {
    let mut c = Command::new(bin);
    c.current_dir(dir)
        .env("CARGO_NET_OFFLINE", "true")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("LOCKLINT_CACHE_DIR");
    c
}

/// `locklint <args>` in `dir`.
pub fn locklint(dir: &Path, args: &[&str]) -> Output {
    command(env!("CARGO_BIN_EXE_locklint"), dir)
        .args(args)
        .output()
        .expect("run locklint")
}

/// `cargo locklint <args>` in `dir` (the `cargo-locklint` binary as cargo calls it).
pub fn cargo_locklint(dir: &Path, args: &[&str]) -> Output {
    command(env!("CARGO_BIN_EXE_cargo-locklint"), dir)
        .arg("locklint")
        .args(args)
        .output()
        .expect("run cargo-locklint")
}

/// The rules of the findings on `file` in a JSON report.
pub fn rules_in(json: &str, file: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["path"].as_str().is_some_and(|p| p.ends_with(file)))
        .map(|f| f["rule"].as_str().unwrap().to_string())
        .collect()
}
