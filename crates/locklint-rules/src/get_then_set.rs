//! `get-then-set`: a lock key is read, and a separate command writes it on a path that depends on the read.

use super::matching::{
    call_chain, command_name, dependent_read, diagnostic, key_text, related, site, with_related,
};
use super::{Fixes, Rule, RuleInfo};
use crate::Findings;
use locklint_ir::diagnostic::Severity;
use locklint_ir::OpKind;
use locklint_project::{LockFacts, Trace};

pub struct GetThenSet;

static INFO: RuleInfo = RuleInfo {
    name: "get-then-set",
    summary: "a lock key is read and then written by a separate command (a check-then-act race)",
    severity: Severity::Error,
    fixable: false,
    doc: include_str!("../../../rules/get-then-set.md"),
};

impl Rule for GetThenSet {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check(&self, trace: &Trace, _facts: &LockFacts, _fixes: Fixes<'_>, out: &mut Findings<'_>) {
        for (i, w) in trace.ops.iter().enumerate() {
            let plain_write = matches!(
                w.op.kind,
                OpKind::Write {
                    nx: false,
                    compare: false,
                    ..
                }
            );
            if !plain_write || !w.is_lock || w.op.watched {
                continue;
            }
            let Some(read) = dependent_read(trace, i) else {
                continue;
            };
            let key = key_text(w);
            let d = diagnostic(
                &INFO,
                site(w),
                "written here after the read",
                format!(
                    "lock `{key}` is read with {} and then written by a separate {}; two processes can both see it free and both take the lock",
                    command_name(read),
                    command_name(w)
                ),
                format!(
                    "take the lock in one atomic command, `SET {key} <unique token> NX PX <ttl>`, and go on only when it replies OK"
                ),
            );
            let mut rel = vec![related(read, "read here")];
            rel.extend(call_chain(w));
            out.push(with_related(d, rel));
        }
    }
}
