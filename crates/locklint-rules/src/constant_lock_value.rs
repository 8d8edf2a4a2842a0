//! `constant-lock-value`: the acquire writes a constant instead of a per-holder token.

use super::matching::{call_chain, diagnostic, key_text, with_related};
use super::{Fixes, Rule, RuleInfo};
use crate::fixes::{edit, fix};
use crate::Findings;
use locklint_ir::diagnostic::Applicability;
use locklint_ir::diagnostic::Fix;
use locklint_ir::diagnostic::Severity;
use locklint_ir::Value;
use locklint_project::TraceOp;
use locklint_project::{LockFacts, Trace};

pub struct ConstantLockValue;

static INFO: RuleInfo = RuleInfo {
    name: "constant-lock-value",
    summary: "a lock is acquired with a constant value instead of a unique per-holder token",
    severity: Severity::Warning,
    fixable: true,
    doc: include_str!("../../../rules/constant-lock-value.md"),
};

impl Rule for ConstantLockValue {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check(&self, trace: &Trace, _facts: &LockFacts, fixes: Fixes<'_>, out: &mut Findings<'_>) {
        for o in &trace.ops {
            if !o.op.kind.is_acquire() || !o.is_lock {
                continue;
            }
            let Some((Value::Constant(text), file, span)) = &o.value else {
                continue;
            };
            let key = key_text(o);
            let d = diagnostic(
                &INFO,
                (file.clone(), *span),
                "the same value for every holder",
                format!(
                    "lock `{key}` is taken with the constant value `{text}`; every holder writes the same value, so a holder cannot tell its own lock from another's"
                ),
                "store a unique token per holder (for example `uuid::Uuid::new_v4().to_string()`) and compare it when releasing or renewing".to_string(),
            );
            let mut d = with_related(d, call_chain(o));
            if fixes.wants(&d) {
                d.fix = random_token(o);
            }
            out.push(d);
        }
    }
}

/// The constant value of an acquire replaced by a random token.
fn random_token(o: &TraceOp) -> Option<Fix> {
    let (_, file, vspan) = o.value.as_ref()?;
    fix(
        "write a random token instead of the constant (keep it to release and renew the lock)"
            .to_string(),
        Applicability::DisplayOnly,
        vec![edit(file, *vspan, "uuid::Uuid::new_v4().to_string()")],
    )
}
