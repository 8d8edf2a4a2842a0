//! `unconditional-release`: a lock is deleted without an atomic check that the caller still owns it.

use super::matching::{
    call_chain_from, command_name, comparison_and_chain, dependent_read, diagnostic,
    generic_helper_site, key_text, op_site, related, site, with_related, HelperSite, RELEASE_HELP,
};
use super::{Fixes, Rule, RuleInfo};
use crate::fixes::{
    cmd_lead, command_args, guarded_fix, holder_token, is_fred, is_typed_method, release_script,
    script_call, snippet,
};
use crate::Findings;
use locklint_ir::diagnostic::Fix;
use locklint_ir::diagnostic::{Diagnostic, Location, Related, Severity};
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

    fn check(&self, trace: &Trace, facts: &LockFacts, fixes: Fixes<'_>, out: &mut Findings<'_>) {
        for (i, o) in trace.ops.iter().enumerate() {
            if o.op.kind != OpKind::Delete || !o.is_lock || o.op.watched {
                continue;
            }
            let key = key_text(o);
            let cmd = command_name(o);
            let compared = dependent_read(trace, i);
            if let Some(switch) = &o.op.switch {
                out.push(forced_release(o, &key, &cmd, switch));
                continue;
            }
            let message = match compared {
                Some(_) => format!(
                    "lock `{key}` is compared in the client and then deleted by a separate {cmd}; the lock can expire and pass to another holder between the two commands"
                ),
                None => format!(
                    "lock `{key}` is released with a plain {cmd}; if it expired and another process took it, this deletes their lock"
                ),
            };
            // a generic helper's delete of a lock-named wrapper's key, or of a key its caller
            // made: the release is that call, and the delete it ends in is related
            let helper_call = match (o.via.split_first(), generic_helper_site(trace, o)) {
                (Some(chain), _) if o.lock_param => Some(chain),
                (_, Some(HelperSite::Call(first, rest))) => Some((first, rest)),
                (_, Some(HelperSite::Callers)) => continue,
                _ => None,
            };
            let (at, related_spans) = match helper_call {
                Some((first, rest)) => {
                    let mut rel: Vec<_> = compared
                        .map(|r| {
                            let (file, span) = op_site(trace, r);
                            Related {
                                location: Location::new(file, span),
                                label: "compared here".to_string(),
                            }
                        })
                        .into_iter()
                        .collect();
                    rel.extend(call_chain_from(rest));
                    rel.push(related(o, "the plain delete this call ends in"));
                    (first.clone(), rel)
                }
                None => (site(o), comparison_and_chain(compared, o)),
            };
            let d = diagnostic(
                &INFO,
                at,
                "deletes whatever lock is there",
                message,
                RELEASE_HELP.to_string(),
            );
            let mut d = with_related(d, related_spans);
            // the helper deletes every key it is given: rewriting it is not this caller's fix
            if helper_call.is_none() && fixes.wants(&d) {
                d.fix = guarded_release(o, &facts.fix);
            }
            out.push(d);
        }
    }
}

/// A plain delete behind an operator switch (`if force { con.del(&key) }`): a deliberate
/// take-over, worth a note that says so, with no fix (comparing the holder would turn the
/// override off).
fn forced_release(o: &TraceOp, key: &str, cmd: &str, switch: &str) -> Diagnostic {
    let mut d = diagnostic(
        &INFO,
        site(o),
        "deletes whatever lock is there",
        format!(
            "lock `{key}` is broken open by a plain {cmd} behind the operator switch `{switch}`: a deliberate take-over deletes a live holder's lock too, and that holder goes on as if it still held it"
        ),
        format!("keep the switch for operators who know the holder is gone (a crashed worker), and protect the writes the lock guards with a fencing token, so that a holder whose lock was broken cannot write after the take-over; {RELEASE_HELP}"),
    );
    d.severity = Severity::Warning;
    with_related(d, comparison_and_chain(None, o))
}

/// Replace a plain `DEL` / `UNLINK` of a lock with an atomic compare-and-delete: `DELEX key
/// IFEQ token` on Redis 8.4+, a Lua script before. Unsafe when a token is in scope (the
/// guess may be wrong), shown only otherwise.
fn guarded_release(o: &TraceOp, settings: &locklint_project::FixSettings) -> Option<Fix> {
    let cmd = o.op.command.as_str();
    if !matches!(cmd, "del" | "unlink" | "DEL" | "UNLINK") || is_fred(o) {
        return None;
    }
    if command_args(&o.file, o).len() != 1 {
        return None;
    }
    let (token, applicability) = holder_token(o);
    let key = snippet(&o.file, o.op.key_span);
    let (call, message) = if settings.has_delex() {
        let replacement = if is_typed_method(o) {
            if !crate::client::is_redis_rs(o) {
                return None;
            }
            format!("del_ex({key}, redis::ValueComparison::ifeq({token}))")
        } else {
            format!(
                "{}\"DELEX\").arg({key}).arg(\"IFEQ\").arg({token})",
                cmd_lead(o)?
            )
        };
        (
            (o.op.span, replacement, None),
            "delete only while the lock holds this holder's token (`DELEX key IFEQ token`)",
        )
    } else {
        (
            script_call(o, &release_script(), &[&token])?,
            "delete only while the lock holds this holder's token (a compare-and-delete script)",
        )
    };
    guarded_fix(o, call, message, &token, applicability)
}
