//! `lock-result-ignored`: the reply of an acquire is thrown away, so work runs whether or not the lock was taken.

use super::matching::{diagnostic, key_text, related, with_related};
use super::{Fixes, Rule, RuleInfo};
use crate::Findings;
use locklint_ir::diagnostic::Severity;
use locklint_ir::ResultUse;
use locklint_project::{LockFacts, Trace};

pub struct LockResultIgnored;

static INFO: RuleInfo = RuleInfo {
    name: "lock-result-ignored",
    summary: "the reply of a lock acquire is discarded, so work proceeds even when the lock is held elsewhere",
    severity: Severity::Error,
    fixable: false,
    doc: include_str!("../../../rules/lock-result-ignored.md"),
};

impl Rule for LockResultIgnored {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check(&self, trace: &Trace, _facts: &LockFacts, _fixes: Fixes<'_>, out: &mut Findings<'_>) {
        for o in &trace.ops {
            if !o.op.kind.is_acquire() || !o.is_lock {
                continue;
            }
            let ResultUse::Ignored(reason) = &o.result else {
                continue;
            };
            let key = key_text(o);
            let d = diagnostic(
                &INFO,
                o.reply_site(),
                "acquire result ignored",
                format!(
                    "the reply of the acquire of lock `{key}` is not checked ({reason}); the work goes on even when another process holds the lock"
                ),
                "read the reply (true / OK means acquired) and skip or retry the work when the lock was not acquired".to_string(),
            );
            let rel = if o.via.is_empty() {
                Vec::new()
            } else {
                vec![related(o, "the acquire")]
            };
            out.push(with_related(d, rel));
        }
    }
}
