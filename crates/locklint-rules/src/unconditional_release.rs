//! `unconditional-release`: a lock is deleted without an atomic check that the caller still owns it.

use super::matching::{
    command_name, comparison_and_chain, dependent_read, diagnostic, key_text, site, with_related,
    RELEASE_HELP,
};
use super::{Rule, RuleInfo};
use locklint_ir::diagnostic::{Diagnostic, Severity};
use locklint_ir::OpKind;
use locklint_project::{Facts, Trace};

pub struct UnconditionalRelease;

static INFO: RuleInfo = RuleInfo {
    name: "unconditional-release",
    summary: "a lock is released with DEL / UNLINK / GETDEL without an atomic token comparison",
    severity: Severity::Error,
    fixable: true,
    doc: include_str!("../../../rules/unconditional-release.md"),
};

impl Rule for UnconditionalRelease {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check(&self, trace: &Trace, facts: &Facts, out: &mut Vec<Diagnostic>) {
        for (i, o) in trace.ops.iter().enumerate() {
            if o.op.kind != OpKind::Delete || !o.is_lock || o.op.watched {
                continue;
            }
            let key = key_text(o);
            let cmd = command_name(o);
            let compared = dependent_read(trace, i);
            let message = match compared {
                Some(_) => format!(
                    "lock `{key}` is compared in the client and then deleted by a separate {cmd}; the lock can expire and pass to another holder between the two commands"
                ),
                None => format!(
                    "lock `{key}` is released with a plain {cmd}; if it expired and another process took it, this deletes their lock"
                ),
            };
            let d = diagnostic(
                &INFO,
                site(o),
                "deletes whatever lock is there",
                message,
                RELEASE_HELP.to_string(),
            );
            let mut d = with_related(d, comparison_and_chain(compared, o));
            d.fix = super::fixes::guarded_release(o, &facts.fix);
            out.push(d);
        }
    }
}
