//! `unconditional-renew`: a held lock's expiry is extended without an atomic ownership check.

use super::matching::{call_chain, command_name, dependent_read, diagnostic, key_text, related, site, with_related, RENEW_HELP};
use super::{Rule, RuleInfo};
use crate::diagnostic::{Diagnostic, Severity};
use crate::ir::OpKind;
use crate::locks::{Facts, Trace};

pub struct UnconditionalRenew;

static INFO: RuleInfo = RuleInfo {
    name: "unconditional-renew",
    summary: "a lock is renewed with EXPIRE / PEXPIRE without an atomic ownership check",
    severity: Severity::Error,
    fixable: false,
    doc: include_str!("../../rules/unconditional-renew.md"),
};

impl Rule for UnconditionalRenew {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check(&self, trace: &Trace, facts: &Facts, out: &mut Vec<Diagnostic>) {
        for (i, o) in trace.ops.iter().enumerate() {
            let renews = o.op.kind == OpKind::Expire || o.op.kind.is_renewing_write();
            // an expiry right after an acquire without one is `separate-expire`
            if !renews || !o.is_lock || o.op.watched || facts.expiries_after_acquire.contains(&o.op.id) {
                continue;
            }
            let key = key_text(o);
            let cmd = command_name(o);
            let compared = dependent_read(trace, i);
            let message = match compared {
                Some(_) => format!(
                    "lock `{key}` is compared in the client and then renewed by a separate {cmd}; the lock can pass to another holder between the two commands and this extends their lock"
                ),
                None => format!(
                    "lock `{key}` is renewed with a plain {cmd}; if it expired and another process took it, this extends their lock"
                ),
            };
            let d = diagnostic(&INFO, site(o), "extends whatever lock is there", message, RENEW_HELP.to_string());
            let mut rel: Vec<_> = compared.map(|r| related(r, "compared here")).into_iter().collect();
            rel.extend(call_chain(o));
            out.push(with_related(d, rel));
        }
    }
}
