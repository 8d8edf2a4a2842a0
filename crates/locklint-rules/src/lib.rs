//! The rule registry. Each rule is one file that reads [`Trace`]s and emits diagnostics.

mod advisory_lock_on_pool;
mod advisory_lock_unbalanced;
mod client;
mod constant_lock_value;
mod cross_slot_lock_keys;
mod findings;
mod fixes;
mod get_then_set;
mod hash_slots;
pub mod leftovers;
mod lock_result_ignored;
mod lock_table_client_clock;
mod lock_table_no_owner_check;
mod lock_table_steals_live_lock;
mod lua_fix;
mod lua_matching;
mod lua_release_no_compare;
mod lua_renew_no_compare;
mod matching;
pub mod problems;
mod script_args;
pub mod scripts;
mod separate_expire;
mod setnx_without_expiry;
pub mod sql_matching;
mod unconditional_release;
mod unconditional_renew;
mod unfenced_write;

/// Where a call ends among its function's events (shared with the audit, which attributes
/// writes to the lock held while they run as `unfenced-write` does), and whether a script's
/// name is a constant's (shared with the audit's script look-up).
pub use matching::{after_call, after_call_at, is_constant_name};

pub use findings::Findings;

use locklint_ir::diagnostic::{Diagnostic, Severity};
use locklint_ir::FileIr;
use locklint_project::{LockFacts, Project, Trace};

/// Static description of a rule: its stable public name, summary and documentation page.
#[derive(Debug)]
pub struct RuleInfo {
    /// Stable public ID, used verbatim in every output.
    pub name: &'static str,
    pub summary: &'static str,
    pub severity: Severity,
    /// Whether the rule offers fixes.
    pub fixable: bool,
    /// The rule's page from `rules/`.
    pub doc: &'static str,
}

/// Which findings a trace rule builds fixes for. A defect inside a lock helper is found once per
/// expansion of the helper, from every call of it; the engine checks every trace with
/// [`Fixes::Skip`], keeps one finding per defect, and checks the trace that finding came from
/// again asking for that finding's fix only, so each fix is built once.
#[derive(Clone, Copy)]
pub enum Fixes<'a> {
    /// Build no fixes.
    Skip,
    /// Build the fix of the findings this accepts (it is asked with the finding, fix unset).
    For(&'a dyn Fn(&Diagnostic) -> bool),
}

impl Fixes<'_> {
    /// Whether to build the fix of `d`.
    pub fn wants(&self, d: &Diagnostic) -> bool {
        match self {
            Fixes::Skip => false,
            Fixes::For(wanted) => wanted(d),
        }
    }
}

/// A lint rule. Redis rules read the traces of the project ([`Rule::check`]); SQL and Lua rules
/// read each file's parsed statements and scripts ([`Rule::check_file`]).
pub trait Rule: Sync + Send {
    fn info(&self) -> &'static RuleInfo;
    /// Check one trace (a function with its lock helpers expanded); build the fixes of the
    /// findings `fixes` wants (the findings must be the same either way).
    fn check(
        &self,
        _trace: &Trace,
        _facts: &LockFacts,
        _fixes: Fixes<'_>,
        _out: &mut Findings<'_>,
    ) {
    }
    /// Check one file's SQL and Lua (and anything else file-level).
    fn check_file(&self, _file: &FileIr, _project: &Project, _out: &mut Vec<Diagnostic>) {}
}

/// Findings about files that could not be read as source.
pub static PARSE_ERROR: RuleInfo = RuleInfo {
    name: "parse-error",
    summary: "a file could not be parsed, so it was not analysed",
    severity: Severity::Warning,
    fixable: false,
    doc: include_str!("../../../rules/parse-error.md"),
};

/// Findings about suppression comments (made by `suppress`, which reads the comments).
pub static WITHOUT_REASON: RuleInfo = RuleInfo {
    name: "suppression-without-reason",
    summary: "a suppression comment gives no reason",
    severity: Severity::Warning,
    fixable: false,
    doc: include_str!("../../../rules/suppression-without-reason.md"),
};

pub static UNUSED: RuleInfo = RuleInfo {
    name: "unused-suppression",
    summary: "a suppression comment suppresses nothing",
    severity: Severity::Warning,
    fixable: true,
    doc: include_str!("../../../rules/unused-suppression.md"),
};

pub static UNKNOWN_RULE: RuleInfo = RuleInfo {
    name: "suppression-unknown-rule",
    summary: "a suppression comment names a rule that does not exist",
    severity: Severity::Warning,
    fixable: false,
    doc: include_str!("../../../rules/suppression-unknown-rule.md"),
};

/// Every trace rule, in documentation order.
pub fn all() -> &'static [&'static dyn Rule] {
    static RULES: &[&dyn Rule] = &[
        &get_then_set::GetThenSet,
        &setnx_without_expiry::SetnxWithoutExpiry,
        &separate_expire::SeparateExpire,
        &constant_lock_value::ConstantLockValue,
        &lock_result_ignored::LockResultIgnored,
        &unconditional_release::UnconditionalRelease,
        &unconditional_renew::UnconditionalRenew,
        &unfenced_write::UnfencedWrite,
        &lock_table_steals_live_lock::LockTableStealsLiveLock,
        &lock_table_no_owner_check::LockTableNoOwnerCheck,
        &lock_table_client_clock::LockTableClientClock,
        &advisory_lock_unbalanced::AdvisoryLockUnbalanced,
        &advisory_lock_on_pool::AdvisoryLockOnPool,
        &lua_release_no_compare::LuaReleaseNoCompare,
        &lua_renew_no_compare::LuaRenewNoCompare,
        &cross_slot_lock_keys::CrossSlotLockKeys,
    ];
    RULES
}

/// Every rule's description, including `parse-error`.
pub fn infos() -> Vec<&'static RuleInfo> {
    let mut v: Vec<&'static RuleInfo> = all().iter().map(|r| r.info()).collect();
    v.push(&PARSE_ERROR);
    v.push(&WITHOUT_REASON);
    v.push(&UNUSED);
    v.push(&UNKNOWN_RULE);
    v
}

/// Checks rule names given in `place` (`--select`, a suppression ...): the first unknown one
/// is an error naming the closest known rule.
pub fn validate(names: &[String], place: &str) -> Result<(), String> {
    let infos = infos();
    for n in names {
        if infos.iter().any(|i| i.name == n) {
            continue;
        }
        let best = locklint_ir::suggest::closest(n, infos.iter().map(|i| i.name))
            .map(|k| format!(" (did you mean `{k}`?)"))
            .unwrap_or_default();
        return Err(format!(
            "unknown rule `{n}` in {place}{best}; `locklint rules` lists them"
        ));
    }
    Ok(())
}

/// Look a rule up by its public name.
pub fn find(name: &str) -> Option<&'static RuleInfo> {
    infos().into_iter().find(|i| i.name == name)
}
