//! `lock-table-no-owner-check`: a lock row is released or renewed by name only, without
//! checking that the caller still owns it.

use super::sql_matching::{
    filter_mentions, has_owner_check, lock_table, lock_write, sql_diagnostic, LockWrite,
};
use super::{Rule, RuleInfo};
use crate::diagnostic::{Diagnostic, Severity};
use crate::ir::FileIr;
use crate::locks::Project;

pub struct LockTableNoOwnerCheck;

static INFO: RuleInfo = RuleInfo {
    name: "lock-table-no-owner-check",
    summary: "a lock-table release or renewal is keyed by name only, without `owner = ...`",
    severity: Severity::Error,
    fixable: false,
    doc: include_str!("../../rules/lock-table-no-owner-check.md"),
};

impl Rule for LockTableNoOwnerCheck {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check_file(&self, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
        for st in &file.sql.statements {
            let Some(lt) = lock_table(st, &project.schema) else {
                continue;
            };
            let Some(filter) = &st.filter else { continue };
            let owner = lt.owner.as_deref().unwrap_or("owner");
            if has_owner_check(st, owner) {
                continue;
            }
            let expiry: Vec<&str> = lt.expiry.iter().map(String::as_str).collect();
            let (label, message) = match lock_write(st, &lt) {
                // a reaper that only removes expired rows is fine
                LockWrite::Release if filter_mentions(st, &expiry) => continue,
                LockWrite::Release => (
                    "matches the row by name only",
                    format!("this release of a `{}` lock row does not check `{owner}`; if the lock expired and another process took it, this releases their lock", lt.table),
                ),
                LockWrite::Renew => (
                    "matches the row by name only",
                    format!("this renewal of a `{}` lock row does not check `{owner}`; if the lock expired and another process took it, this extends their lock", lt.table),
                ),
                _ => continue,
            };
            out.push(sql_diagnostic(
                &INFO,
                file,
                filter.span,
                label,
                message,
                format!("add `AND {owner} = $n` with the holder's own token, and treat zero affected rows as a lost lock"),
            ));
        }
    }
}
