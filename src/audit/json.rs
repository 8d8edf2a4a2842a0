//! The JSON document, version 1:
//!
//! ```text
//! {
//!   "version": 1,
//!   "locks": [{
//!     "name": "lock:invoice:{}",
//!     "mechanism": "redis-set-nx-px" | "redis-setnx-expire" | "redis-setnx-no-expiry" | "redis-get-then-set"
//!                | "advisory-session" | "advisory-transaction" | "lock-table"
//!                | "runtime-redis" | "runtime-advisory" | "runtime-table" | "runtime-lock"
//!                | "redlock",
//!     "mechanism_label": "Redis SET NX EX" (the mechanism as the code writes it: `SET NX EX`
//!                        when every acquire's expiry is in seconds),
//!     "acquires": [{"site": {"path", "line", "column"}, "function", "command", "ttl",
//!                   "token": "unique" | "constant" | "none", "checked": true | false | null,
//!                   "called_from": [site]}],   (the calls through which callers reach a
//!                                               helper's acquire, outermost first)
//!     "releases": [{"site", "function", "command", "atomic", "owner_checked"}],
//!     "renewals": [{"site", "function", "command", "owner_checked"}],
//!     "renewed": bool,
//!     "fencing": {"minted": [site], "checked_writes": [site], "unchecked_writes": [site]},
//!     "protects": [{"site", "function", "target", "idempotent", "fenced", "same_session",
//!                   "external"}],   (external: an object store, queue or HTTP effect)
//!     "purpose": {"value": "efficiency" | "correctness", "source": "config" | "inferred"},
//!     "verdict": "no-lock-needed" | "fine-for-efficiency" | "fine-for-correctness"
//!              | "unsafe-for-correctness" | "broken",
//!     "reasons": [string], "next_steps": [string],
//!     "findings": [{"rule", "severity", "site", "message"}]
//!   }],
//!   "summary": {"locks", "files", "by_verdict": {verdict: count}, "by_mechanism": {mechanism: count}}
//! }
//! ```
//!
//! Paths are relative to the current directory; lines and columns are 1-based. Fields are only
//! added within a version.

use super::{Audit, Lock, Summary, JSON_VERSION};
use serde::Serialize;

#[derive(Serialize)]
struct Document<'a> {
    version: u32,
    locks: &'a [Lock],
    summary: Summary,
}

pub fn render(audit: &Audit) -> String {
    let doc = Document {
        version: JSON_VERSION,
        locks: &audit.locks,
        summary: audit.summary(),
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".to_string());
    s.push('\n');
    s
}
