//! locklint: finds distributed-lock misuse in Rust codebases.
//!
//! Data flows one way: [`project`] finds the project a run belongs to, [`discover`] finds its
//! files, [`source`] loads them, a [`frontend`] turns each into the intermediate form of
//! [`ir`], [`locks`] decides project-wide which keys are locks and expands lock helpers at
//! their call sites, each rule in [`rules`] reads those traces and emits
//! [`diagnostic::Diagnostic`]s for the selected files, and [`output`] renders them. [`index`]
//! holds a project in memory for analyses that follow each other (the language server).

pub mod allocator;

pub mod answer;
pub mod audit;
pub mod baseline;
pub mod cache;
pub mod cli;
pub mod config;
pub mod discover;
pub mod engine;
pub mod fingerprint;
pub mod fix;
pub mod index;
pub mod lsp;
pub mod output;
pub mod packages;
mod parsing;
pub mod project;
mod scans;
mod shape;
pub mod suppress;

// The layers below the command line, each a crate of its own (a lower crate cannot name a
// higher one): the intermediate form and its sources, the front-ends, the project facts, the
// rules. Re-exported under the names the rest of this crate uses.
pub use locklint_frontend as frontend;
pub use locklint_ir as ir;
pub use locklint_ir::{diagnostic, isolate, source, suggest, vocabulary};
pub use locklint_project as locks;
pub use locklint_rules as rules;
pub use locklint_rules::scripts;
