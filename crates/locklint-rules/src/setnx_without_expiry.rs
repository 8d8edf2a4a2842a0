//! `setnx-without-expiry`: a lock is acquired with no expiry and nothing sets one later.

use super::fixes::{self, worst};
use super::matching::{call_chain, diagnostic, key_text, site, with_related};
use super::{Fixes, Rule, RuleInfo};
use crate::Findings;
use locklint_ir::diagnostic::{Applicability, Fix, Severity};
use locklint_ir::OpKind;
use locklint_project::{LockFacts, Trace, TraceOp};

pub struct SetnxWithoutExpiry;

static INFO: RuleInfo = RuleInfo {
    name: "setnx-without-expiry",
    summary: "a lock is acquired with SETNX / SET NX and never given an expiry",
    severity: Severity::Error,
    fixable: true,
    doc: include_str!("../../../rules/setnx-without-expiry.md"),
};

impl Rule for SetnxWithoutExpiry {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check(&self, trace: &Trace, facts: &LockFacts, fixes: Fixes<'_>, out: &mut Findings<'_>) {
        for o in &trace.ops {
            let no_expiry = matches!(
                o.op.kind,
                OpKind::Write {
                    nx: true,
                    expiry: None,
                    ..
                }
            );
            // a later separate expiry is reported by `separate-expire` instead
            if !no_expiry || !o.is_lock || facts.acquires_expired_later.contains(&o.op.id) {
                continue;
            }
            let key = key_text(o);
            let d = diagnostic(
                &INFO,
                site(o),
                "acquired without an expiry",
                format!("lock `{key}` is taken with no expiry; if the holder crashes, the lock is held forever"),
                format!(
                    "set the expiry in the same command: `SET {key} <unique token> NX PX <ttl>` (redis-rs `set_options` with `ExistenceCheck::NX` and `SetExpiry::PX`)"
                ),
            );
            let mut d = with_related(d, call_chain(o));
            if fixes.wants(&d) {
                d.fix = add_expiry(o, facts);
            }
            out.push(d);
        }
    }
}

/// Give the acquire the default expiry (`--default-ttl`): a judgement call, so unsafe.
fn add_expiry(o: &TraceOp, facts: &LockFacts) -> Option<Fix> {
    let ttl = fixes::Ttl::millis(facts.fix.default_ttl_ms);
    let (edits, applicability) = fixes::acquire_with_expiry(o, &ttl)?;
    fixes::fix(
        format!(
            "acquire with an expiry of {} ms (`PX {}`); choose a TTL longer than the work the lock protects",
            facts.fix.default_ttl_ms, ttl.text
        ),
        worst(applicability, Applicability::Unsafe),
        edits,
    )
}
