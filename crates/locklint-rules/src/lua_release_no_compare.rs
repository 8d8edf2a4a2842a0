//! `lua-release-no-compare`: a Redis script deletes a lock key without first checking that it
//! still holds the caller's token.

use super::lua_matching::{check, LuaRule};
use super::{Rule, RuleInfo};
use locklint_ir::diagnostic::{Diagnostic, Severity};
use locklint_ir::lua::WriteKind;
use locklint_ir::FileIr;
use locklint_project::Project;

pub struct LuaReleaseNoCompare;

static INFO: RuleInfo = RuleInfo {
    name: "lua-release-no-compare",
    summary: "a Lua script DELs / UNLINKs a lock key without comparing it with the caller's token",
    severity: Severity::Error,
    fixable: true,
    doc: include_str!("../../../rules/lua-release-no-compare.md"),
};

static RULE: LuaRule = LuaRule {
    info: &INFO,
    kind: WriteKind::Release,
    verb: "deletes",
    label: "deletes whatever lock is there",
    read_label: "compared here, but the delete does not depend on the comparison",
    help: concat!(
        "compare before deleting, in the same script: `",
        crate::scripts::compare_and_delete!(),
        "`, with the holder's token as `ARGV[1]`"
    ),
};

impl Rule for LuaReleaseNoCompare {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check_file(&self, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
        check(&RULE, file, project, out);
    }
}
