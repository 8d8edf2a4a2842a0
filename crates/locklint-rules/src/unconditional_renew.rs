//! `unconditional-renew`: a held lock's expiry is extended without an atomic ownership check.

use super::matching::{
    command_name, comparison_and_chain, dependent_read, diagnostic, key_text, site, with_related,
    RENEW_HELP,
};
use super::{Fixes, Rule, RuleInfo};
use crate::fixes::{command_args, guarded_fix, holder_token, is_fred, renew_script, script_call};
use crate::Findings;
use locklint_ir::diagnostic::Fix;
use locklint_ir::diagnostic::Severity;
use locklint_ir::vocabulary;
use locklint_ir::OpKind;
use locklint_project::{scoped_identity, LockFacts, Trace, TraceOp};

pub struct UnconditionalRenew;

static INFO: RuleInfo = RuleInfo {
    name: "unconditional-renew",
    summary: "a lock is renewed with EXPIRE / PEXPIRE without an atomic ownership check",
    severity: Severity::Error,
    fixable: true,
    doc: include_str!("../../../rules/unconditional-renew.md"),
};

impl Rule for UnconditionalRenew {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check(&self, trace: &Trace, facts: &LockFacts, fixes: Fixes<'_>, out: &mut Findings<'_>) {
        for (i, o) in trace.ops.iter().enumerate() {
            let overwrite = o.op.kind.is_plain_write_with_expiry()
                && dependent_read(trace, i).is_none()
                && overwrites_held_lock(trace, i, o, facts);
            let renews = o.op.kind == OpKind::Expire || o.op.kind.is_renewing_write() || overwrite;
            // an expiry right after an acquire without one is `separate-expire`
            if !renews
                || !o.is_lock
                || o.op.watched
                || facts.expiries_after_acquire.contains(&o.op.id)
            {
                continue;
            }
            let key = key_text(o);
            let cmd = command_name(o);
            let compared = dependent_read(trace, i);
            let message = match compared {
                _ if overwrite => format!(
                    "lock `{key}` is renewed by overwriting it with a plain {cmd}; if it expired and another process took it, this takes their lock over"
                ),
                Some(_) => format!(
                    "lock `{key}` is compared in the client and then renewed by a separate {cmd}; the lock can pass to another holder between the two commands and this extends their lock"
                ),
                None => format!(
                    "lock `{key}` is renewed with a plain {cmd}; if it expired and another process took it, this extends their lock"
                ),
            };
            let d = diagnostic(
                &INFO,
                site(o),
                "extends whatever lock is there",
                message,
                RENEW_HELP.to_string(),
            );
            let mut d = with_related(d, comparison_and_chain(compared, o));
            if fixes.wants(&d) && !overwrite {
                d.fix = guarded_renew(o);
            }
            out.push(d);
        }
    }
}

/// A plain `SET ... PX` of a key that is elsewhere acquired with NX, or written by a function
/// whose name says it renews: a renewal that overwrites whatever holder is there.
fn overwrites_held_lock(trace: &Trace, i: usize, o: &TraceOp, facts: &LockFacts) -> bool {
    let acquired_here = trace.earlier_on_key(i).any(|e| e.op.kind.is_acquire());
    let acquired_elsewhere = scoped_identity(o).is_some_and(|id| facts.acquired_nx.contains(&id));
    let renewer = vocabulary::names_renewal(&o.func.name);
    acquired_here || acquired_elsewhere || (renewer && o.is_lock)
}

/// Replace a plain `EXPIRE` / `PEXPIRE` renewal of a lock with an atomic compare-and-expire
/// script. Unsafe when a token is in scope, shown only otherwise.
fn guarded_renew(o: &TraceOp) -> Option<Fix> {
    let lua_cmd = match o.op.command.as_str() {
        "expire" | "EXPIRE" => "expire",
        "pexpire" | "PEXPIRE" => "pexpire",
        _ => return None,
    };
    if is_fred(o) {
        return None;
    }
    let args = command_args(&o.file, o);
    if args.len() != 2 {
        return None;
    }
    let (token, applicability) = holder_token(o);
    let call = script_call(o, &renew_script(lua_cmd), &[&token, args[1].trim()])?;
    let message = format!(
        "renew only while the lock holds this holder's token (a compare-and-{lua_cmd} script)"
    );
    guarded_fix(o, call, &message, &token, applicability)
}
