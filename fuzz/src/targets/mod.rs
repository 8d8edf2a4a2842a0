//! The fuzz targets: one function `fn(&[u8])` per front-end, run through the same public API as
//! the CLI. A target signals a failure by panicking; the harness also counts any panic on any
//! thread, the time and the memory an input takes.
//!
//! To add a target, write a module with a `pub const TARGET: Target` and list it in
//! [`TARGETS`].

mod config;
mod embedded;
mod files;
mod lsp;
mod lua;
mod rust;
mod selftest;
mod sql;

pub use files::{check_text, scratch_dir};

use crate::rng::Rng;
use std::path::Path;

/// One fuzz target.
pub struct Target {
    /// Command-line name.
    pub name: &'static str,
    pub about: &'static str,
    /// Extension of saved failing inputs.
    pub ext: &'static str,
    /// Seed inputs from the corpus: called with each corpus file's path and bytes; returns the
    /// input made from it, or `None` when the file does not fit the target.
    pub seed: fn(&Path, &[u8]) -> Option<Vec<u8>>,
    /// Seed inputs of its own, run before the corpus.
    pub builtin: &'static [&'static str],
    /// A structure-aware generator (`rng`, maximum length), if the target has one.
    pub generate: Option<fn(&mut Rng, usize) -> Vec<u8>>,
    /// Delimiters and keywords inserted in runs by the mutator.
    pub dictionary: &'static [&'static str],
    /// Run one input; panics on a failure.
    pub run: fn(&[u8]),
}

/// Every target, in the order `all` runs them.
pub const TARGETS: &[Target] = &[
    rust::TARGET,
    sql::TARGET,
    lua::TARGET,
    embedded::TARGET,
    config::TARGET,
    lsp::TARGET,
];

/// Targets not run by `all`: `selftest` checks the harness itself.
pub const HIDDEN: &[Target] = &[selftest::TARGET];

pub fn find(name: &str) -> Option<&'static Target> {
    TARGETS.iter().chain(HIDDEN).find(|t| t.name == name)
}

/// Whether `path` has extension `ext` (`.rs` also matches `x.rs.fixed`).
pub(crate) fn has_ext(path: &Path, ext: &str) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let name = name.strip_suffix(".fixed").unwrap_or(name);
    let name = name.strip_suffix(".redis-8.4").unwrap_or(name);
    name.ends_with(&format!(".{ext}"))
}
