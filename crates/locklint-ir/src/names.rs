//! What a Rust file's text declares and names as a whole (filled by the Rust front-end's one
//! lexer pass, `frontend::rust::names`): the questions fixes ask of the whole file (is this
//! constant already defined? is the name taken? is there a `self.token` field? is this fred
//! code?) answered from one index instead of a search of the text per finding.

use crate::source::Span;
use std::collections::{HashMap, HashSet};

/// The names of one Rust text (comments and string contents left out).
#[derive(Debug, Default)]
pub struct RustNames {
    /// Names of `const` and `static` items anywhere in the file.
    pub declared: HashSet<String>,
    /// `const` items that start a line (module level, not indented): name → the spans of
    /// their lines.
    pub top_level_consts: HashMap<String, Vec<Span>>,
    /// Fields read through `self.`.
    pub self_fields: HashSet<String>,
    /// Whether a path goes through `fred::`.
    pub fred: bool,
    /// Whether a path goes through `redis::`.
    pub redis_path: bool,
    /// Whether a `use` of redis-rs brings its command traits into scope.
    pub redis_traits: bool,
}

/// What a `use redis::...` item names that brings redis-rs's command traits into scope: the four
/// traits, then the imports that bring them all.
pub const REDIS_TRAIT_IMPORTS: &[&str] = &[
    "Commands",
    "AsyncCommands",
    "TypedCommands",
    "AsyncTypedCommands",
    "prelude",
    "*",
];

impl RustNames {
    /// Whether a `const` or `static` item anywhere in the file has this name.
    pub fn is_declared(&self, name: &str) -> bool {
        self.declared.contains(name)
    }

    /// Whether a line of `text` (the text these names were found in) starts with `definition`,
    /// a `const name ...` item at module level.
    pub fn defines_at_top_level(&self, text: &str, name: &str, definition: &str) -> bool {
        self.top_level_consts.get(name).is_some_and(|lines| {
            lines.iter().any(|l| {
                text.get(l.start..l.end)
                    .is_some_and(|t| t.starts_with(definition))
            })
        })
    }

    /// Whether the file reads `self.<field>`.
    pub fn reads_self_field(&self, field: &str) -> bool {
        self.self_fields.contains(field)
    }

    /// Whether the file names a path through `fred::` (the fred client).
    pub fn mentions_fred(&self) -> bool {
        self.fred
    }

    /// Whether the file names a path through `redis::` (redis-rs).
    pub fn mentions_redis_path(&self) -> bool {
        self.redis_path
    }

    /// Whether the file imports redis-rs's command traits (`use redis::AsyncCommands`,
    /// `redis::prelude::*`, `redis::*` ...), which its typed command methods need.
    pub fn imports_redis_traits(&self) -> bool {
        self.redis_traits
    }
}
