//! `lua-renew-no-compare`: a Redis script extends a lock key's expiry without first checking
//! that it still holds the caller's token.

use super::lua_matching::{check, LuaRule};
use super::{Rule, RuleInfo};
use locklint_ir::diagnostic::{Diagnostic, Severity};
use locklint_ir::lua::WriteKind;
use locklint_ir::FileIr;
use locklint_project::Project;

pub struct LuaRenewNoCompare;

static INFO: RuleInfo = RuleInfo {
    name: "lua-renew-no-compare",
    summary: "a Lua script PEXPIREs / EXPIREs / SET KEEPTTLs a lock key without comparing it with the caller's token",
    severity: Severity::Error,
    fixable: true,
    doc: include_str!("../../../rules/lua-renew-no-compare.md"),
};

static RULE: LuaRule = LuaRule {
    info: &INFO,
    kind: WriteKind::Renew,
    verb: "extends",
    label: "extends whatever lock is there",
    read_label: "compared here, but the extension does not depend on the comparison",
    help: concat!(
        "compare before extending, in the same script: `",
        crate::scripts::compare_and_renew!("pexpire"),
        "`, with the holder's token as `ARGV[1]` and the TTL in milliseconds as `ARGV[2]`"
    ),
};

impl Rule for LuaRenewNoCompare {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check_file(&self, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
        check(&RULE, file, project, out);
    }
}
