//! `separate-expire`: the expiry of a lock is set by a second command after the acquire.

use super::fixes::{self, worst};
use super::matching::{
    call_chain, command_name, diagnostic, in_pipeline, key_text, related, site, with_related,
};
use super::{Fixes, Rule, RuleInfo};
use crate::Findings;
use locklint_ir::diagnostic::{Applicability, Fix, Severity};
use locklint_ir::{Channel, OpKind, ResultUse};
use locklint_project::{LockFacts, Trace, TraceOp};

pub struct SeparateExpire;

static INFO: RuleInfo = RuleInfo {
    name: "separate-expire",
    summary: "a lock's expiry is set by a separate command after SETNX / SET NX",
    severity: Severity::Error,
    fixable: true,
    doc: include_str!("../../../rules/separate-expire.md"),
};

impl Rule for SeparateExpire {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check(&self, trace: &Trace, _facts: &LockFacts, fixes: Fixes<'_>, out: &mut Findings<'_>) {
        for (i, e) in trace.ops.iter().enumerate() {
            if e.op.kind != OpKind::Expire || !e.is_lock {
                continue;
            }
            let acquire = trace.earlier_on_key(i).rev().find(|o| {
                matches!(
                    o.op.kind,
                    OpKind::Write {
                        nx: true,
                        expiry: None,
                        ..
                    }
                )
            });
            let Some(acquire) = acquire else { continue };
            let key = key_text(e);
            let both_piped = in_pipeline(e).is_some() && in_pipeline(acquire).is_some();
            let message = if both_piped {
                format!(
                    "the expiry of lock `{key}` is a separate {} in the same pipeline as the acquire; it runs even when the acquire lost, extending another holder's lock",
                    command_name(e)
                )
            } else {
                format!(
                    "the expiry of lock `{key}` is set by a separate {} after the acquire; a crash between the two leaves a lock that never expires",
                    command_name(e)
                )
            };
            let d = diagnostic(
                &INFO,
                site(e),
                "separate expiry",
                message,
                format!(
                    "remove this command and acquire with the expiry in one command: `SET {key} <unique token> NX PX <ttl>`"
                ),
            );
            let mut rel = vec![related(acquire, "acquired here without an expiry")];
            rel.extend(call_chain(e));
            let mut d = with_related(d, rel);
            if fixes.wants(&d) {
                d.fix = fold_expiry(acquire, e);
            }
            out.push(d);
        }
    }
}

/// Move the expiry into the acquire and delete the separate expiry command. Safe when both
/// are plain statements of one function outside a pipeline; shown only otherwise.
fn fold_expiry(acquire: &TraceOp, e: &TraceOp) -> Option<Fix> {
    let ttl = fixes::expire_ttl(e)?;
    let (mut edits, mut applicability) = fixes::acquire_with_expiry(acquire, &ttl)?;
    let same_function = std::ptr::eq(acquire.func, e.func)
        && acquire.file.path == e.file.path
        && acquire.op.span.end <= e.op.span.start;
    if !same_function || e.op.in_macro {
        applicability = Applicability::DisplayOnly;
    }
    match e.op.channel {
        Channel::Pipeline { .. } => {
            edits.push(fixes::edit(
                &e.file,
                fixes::chain_link_removal(&e.file, e.op.span)?,
                "",
            ));
            applicability = Applicability::DisplayOnly;
        }
        Channel::Direct => {
            let stmt = e.op.stmt?;
            edits.push(fixes::edit(
                &e.file,
                fixes::widen_to_empty_if(&e.file, fixes::statement_removal(&e.file, stmt)),
                "",
            ));
            if !matches!(e.result, ResultUse::Ignored(_)) {
                // the expiry's reply is read: deleting it needs a decision
                applicability = Applicability::DisplayOnly;
            }
        }
    }
    if same_function && fixes::bound_between(&e.file, &ttl, acquire.op.span.end, e.op.span.start) {
        applicability = Applicability::DisplayOnly;
    }
    if edits.iter().any(|x| x.location.file.path != e.file.path) {
        applicability = Applicability::DisplayOnly;
    }
    let applicability = worst(applicability, Applicability::Safe);
    fixes::fix(
        format!(
            "set the expiry in the acquire (`{} {}`) and remove the separate {}",
            ttl.unit.word(),
            ttl.text,
            command_name(e)
        ),
        applicability,
        edits,
    )
}
