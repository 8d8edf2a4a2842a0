//! `unconditional-renew`: a held lock's expiry is extended without an atomic ownership check.

use super::matching::{
    command_name, comparison_and_chain, dependent_read, diagnostic, key_text, site, with_related,
    RENEW_HELP,
};
use super::{Rule, RuleInfo};
use crate::fixes::{
    command_args, drop_trait_import, edit, fix, invocation, is_fred, reflow, renew_script,
    script_expr, snippet, token_in_scope,
};
use locklint_ir::diagnostic::Applicability;
use locklint_ir::diagnostic::Edit;
use locklint_ir::diagnostic::Fix;
use locklint_ir::diagnostic::{Diagnostic, Severity};
use locklint_ir::vocabulary;
use locklint_ir::Channel;
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

    fn check(&self, trace: &Trace, facts: &LockFacts, out: &mut Vec<Diagnostic>) {
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
            d.fix = if overwrite { None } else { guarded_renew(o) };
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
    let cmd = o.op.command.as_str();
    let lua_cmd = match cmd {
        "expire" | "EXPIRE" => "expire",
        "pexpire" | "PEXPIRE" => "pexpire",
        _ => return None,
    };
    if is_fred(o) {
        return None;
    }
    let (token, mut applicability) = match token_in_scope(o) {
        Some(t) => (t, Applicability::Unsafe),
        None => ("&token".to_string(), Applicability::DisplayOnly),
    };
    if o.op.in_macro || matches!(o.op.channel, Channel::Pipeline { .. }) {
        applicability = Applicability::DisplayOnly;
    }
    let file = &o.file;
    let args = command_args(file, o)?;
    if args.len() != 2 {
        return None;
    }
    let key = snippet(file, o.op.key_span);
    let ttl = args[1].trim();
    let (lua, define) = script_expr(o, &renew_script(lua_cmd));
    let mut span = o.op.span;
    let replacement = if cmd.chars().all(|c| c.is_ascii_lowercase()) {
        if !super::client::is_redis_rs(o) {
            return None;
        }
        let (at, call) = invocation(o)?;
        span = at;
        format!("redis::Script::new({lua}).key({key}).arg({token}).arg({ttl}){call}")
    } else {
        let text = snippet(file, o.op.span);
        let base = text.find(['"'])?;
        let lead = &text[..base];
        format!("{lead}\"EVAL\").arg({lua}).arg(1).arg({key}).arg({token}).arg({ttl})")
    };
    let message = if applicability == Applicability::Unsafe {
        format!("renew only while the lock holds this holder's token (a compare-and-{lua_cmd} script); check that `{token}` is this holder's token")
    } else {
        format!("renew only while the lock holds this holder's token (a compare-and-{lua_cmd} script); pass the token this holder wrote when it acquired the lock")
    };
    let mut edits: Vec<Edit> = define.into_iter().collect();
    edits.push(edit(file, span, replacement));
    if span != o.op.span {
        drop_trait_import(o, span, &mut edits);
    }
    fix(message, applicability, reflow(o, edits))
}
