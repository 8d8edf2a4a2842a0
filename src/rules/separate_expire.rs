//! `separate-expire`: the expiry of a lock is set by a second command after the acquire.

use super::matching::{
    call_chain, command_name, diagnostic, in_pipeline, key_text, related, site, with_related,
};
use super::{Rule, RuleInfo};
use crate::diagnostic::{Diagnostic, Severity};
use crate::ir::OpKind;
use crate::locks::{Facts, Trace};

pub struct SeparateExpire;

static INFO: RuleInfo = RuleInfo {
    name: "separate-expire",
    summary: "a lock's expiry is set by a separate command after SETNX / SET NX",
    severity: Severity::Error,
    fixable: false,
    doc: include_str!("../../rules/separate-expire.md"),
};

impl Rule for SeparateExpire {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check(&self, trace: &Trace, _facts: &Facts, out: &mut Vec<Diagnostic>) {
        for (i, e) in trace.ops.iter().enumerate() {
            if e.op.kind != OpKind::Expire || !e.is_lock {
                continue;
            }
            let acquire = trace
                .earlier_on_key(i)
                .filter(|o| {
                    matches!(
                        o.op.kind,
                        OpKind::Write {
                            nx: true,
                            expiry: None,
                            ..
                        }
                    )
                })
                .last();
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
            out.push(with_related(d, rel));
        }
    }
}
