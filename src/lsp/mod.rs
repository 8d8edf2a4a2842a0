//! `locklint lsp`: a language server over stdio for `.rs`, `.sql` and `.lua` documents, saved
//! or not. Diagnostics on open, change and save (each project held in memory by
//! [`crate::index`], files changed on disk read again when the editor reports them); code
//! actions (each fix, `source.fixAll.locklint`, "show documentation"); the rule's page on
//! hover; `locklint.fixAll` through `workspace/applyEdit`. Positions are UTF-16 code units, as
//! LSP counts them by default.
//!
//! | module | what it is |
//! |---|---|
//! | [`transport`] | `Content-Length` framing with bounded sizes, the shared output |
//! | [`protocol`] | telling JSON-RPC requests, notifications and responses apart; error codes |
//! | [`documents`] | open documents, incremental edits, the path a document is analysed under |
//! | [`scheduler`] | one analysis at a time on a large-stack worker thread that owns the analyser |
//! | [`analysis`] | the engine over one document's project held in memory, panics turned into a finding |
//! | [`convert`] | findings and fixes as LSP diagnostics and workspace edits |
//! | [`handlers`] | code actions, hover, commands, from one finished analysis |
//! | [`server`] | the message loop and the protocol's lifecycle |

pub mod analysis;
pub mod convert;
pub mod documents;
pub mod handlers;
pub mod protocol;
pub mod scheduler;
pub mod server;
pub mod transport;

pub use handlers::FIX_ALL_KIND;
pub use server::{run, Config};

use std::process::ExitCode;
use std::time::Duration;

/// How long a document must stay unchanged before it is analysed again: not at all. The
/// server takes in every message that has arrived before it starts an analysis, and runs one
/// at a time, so a burst of edits is analysed once, at its last version, and an edit with
/// nothing behind it at once.
pub const DEBOUNCE: Duration = Duration::ZERO;

/// Serve LSP over stdin/stdout until the client exits or closes the connection.
pub fn serve() -> ExitCode {
    let config = Config {
        debounce: DEBOUNCE,
        analyser: Box::new(analysis::Indexed::default()),
    };
    let code = run(
        std::io::BufReader::new(std::io::stdin()),
        Box::new(std::io::stdout()),
        config,
    );
    ExitCode::from(code)
}
