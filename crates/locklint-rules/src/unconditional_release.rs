//! `unconditional-release`: a lock is deleted without an atomic check that the caller still owns it.

use super::matching::{
    command_name, comparison_and_chain, dependent_read, diagnostic, key_text, site, with_related,
    RELEASE_HELP,
};
use super::{Rule, RuleInfo};
use crate::fixes::{
    command_args, drop_trait_import, edit, fix, invocation, is_fred, reflow, release_script,
    script_expr, snippet, token_in_scope,
};
use locklint_ir::diagnostic::Applicability;
use locklint_ir::diagnostic::Fix;
use locklint_ir::diagnostic::{Diagnostic, Severity};
use locklint_ir::Channel;
use locklint_ir::OpKind;
use locklint_project::TraceOp;
use locklint_project::{LockFacts, Trace};

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

    fn check(&self, trace: &Trace, facts: &LockFacts, out: &mut Vec<Diagnostic>) {
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
            d.fix = guarded_release(o, &facts.fix);
            out.push(d);
        }
    }
}

/// Replace a plain `DEL` / `UNLINK` of a lock with an atomic compare-and-delete: `DELEX key
/// IFEQ token` on Redis 8.4+, a Lua script before. Unsafe when a token is in scope (the
/// guess may be wrong), shown only otherwise.
fn guarded_release(o: &TraceOp, settings: &locklint_project::FixSettings) -> Option<Fix> {
    let cmd = o.op.command.as_str();
    if !matches!(cmd, "del" | "unlink" | "DEL" | "UNLINK") || is_fred(o) {
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
    let key = snippet(file, o.op.key_span);
    let delex = settings.has_delex();
    let mut span = o.op.span;
    let mut edits = Vec::new();
    let mut script = || {
        let (expr, define) = script_expr(o, &release_script());
        edits.extend(define);
        expr
    };
    let (replacement, message) = if cmd.chars().all(|c| c.is_ascii_lowercase()) {
        if command_args(file, o)?.len() != 1 || !super::client::is_redis_rs(o) {
            return None;
        }
        if delex {
            (
                format!("del_ex({key}, redis::ValueComparison::ifeq({token}))"),
                "delete only while the lock holds this holder's token (`DELEX key IFEQ token`)",
            )
        } else {
            let (at, call) = invocation(o)?;
            span = at;
            (
                format!(
                    "redis::Script::new({}).key({key}).arg({token}){call}",
                    script()
                ),
                "delete only while the lock holds this holder's token (a compare-and-delete script)",
            )
        }
    } else {
        if command_args(file, o)?.len() != 1 {
            return None;
        }
        let text = snippet(file, o.op.span);
        let base = text.find(['"'])?;
        let lead = &text[..base];
        if delex {
            (
                format!("{lead}\"DELEX\").arg({key}).arg(\"IFEQ\").arg({token})"),
                "delete only while the lock holds this holder's token (`DELEX key IFEQ token`)",
            )
        } else {
            (
                format!(
                    "{lead}\"EVAL\").arg({}).arg(1).arg({key}).arg({token})",
                    script()
                ),
                "delete only while the lock holds this holder's token (a compare-and-delete script)",
            )
        }
    };
    let message = if applicability == Applicability::Unsafe {
        format!("{message}; check that `{token}` is this holder's token")
    } else {
        format!("{message}; pass the token this holder wrote when it acquired the lock")
    };
    edits.push(edit(file, span, replacement));
    if span != o.op.span {
        drop_trait_import(o, span, &mut edits);
    }
    fix(message, applicability, reflow(o, edits))
}
