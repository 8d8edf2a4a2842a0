//! Renderers: every output format reads the same [`Report`](crate::engine::Report).

pub mod human;
pub mod json;

/// The output formats of `locklint check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Source snippets with labels and help, and a summary line.
    Human,
    /// One JSON document (see README, "JSON output").
    Json,
}
