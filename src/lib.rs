//! locklint: finds distributed-lock misuse in Rust codebases.
//!
//! Data flows one way: [`project`] finds the project a run belongs to, [`discover`] finds its
//! files, [`source`] loads them, a [`frontend`] turns each into the intermediate form of
//! [`ir`], [`locks`] decides project-wide which keys are locks and expands lock helpers at
//! their call sites, each rule in [`rules`] reads those traces and emits
//! [`diagnostic::Diagnostic`]s for the selected files, and [`output`] renders them.

pub mod audit;
pub mod baseline;
pub mod cli;
pub mod config;
pub mod diagnostic;
pub mod discover;
pub mod engine;
pub mod fingerprint;
pub mod fix;
pub mod frontend;
pub mod ir;
pub mod isolate;
pub mod locks;
pub mod lsp;
pub mod output;
pub mod project;
pub mod rules;
pub mod scripts;
pub mod source;
pub mod suggest;
pub mod suppress;
pub mod vocabulary;
