//! Matching shared by the Lua script rules: which unguarded `DEL`/`UNLINK`/expiry calls in a
//! Redis script are about a lock, and the diagnostic for them.

use super::matching::diagnostic;
use super::script_args::CallSites;
use super::RuleInfo;
use locklint_ir::diagnostic::{Diagnostic, Location, Related};
use locklint_ir::lua::{Script, WriteKind};
use locklint_ir::{Event, FileIr, OpKind};
use locklint_project::Project;

/// What one Lua rule reports: which calls, and how it words the finding.
pub struct LuaRule {
    pub info: &'static RuleInfo,
    pub kind: WriteKind,
    /// The verb for messages: `deletes`, `extends`.
    pub verb: &'static str,
    pub label: &'static str,
    /// Label of the read that does not guard the write.
    pub read_label: &'static str,
    pub help: &'static str,
}

/// Why a script's key counts as a lock key, so an unguarded write to it is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    /// The script compares the key's value somewhere, but not before this write; or it
    /// compares one of its keys and then writes every key (`for _, k in ipairs(KEYS) do
    /// redis.call('pexpire', k, ..)` after checking only `KEYS[1]`).
    Checked,
    /// The script is named like a lock script, or is invoked on a lock key.
    LockScript,
}

/// Report every unguarded write of `rule.kind` in the file's Lua scripts.
pub fn check(rule: &LuaRule, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
    // the Rust file's script call sites, read once when a script in it needs them
    let mut sites: Option<CallSites> = None;
    for script in &file.lua.scripts {
        let mut invoked_on_lock: Option<bool> = None;
        let mut facts: Option<super::lua_fix::ScriptFacts> = None;
        for (w, span) in &script.writes {
            if w.kind != rule.kind || w.guarded {
                continue;
            }
            let own_check = script.check_of(&w.key);
            let check = own_check.or_else(|| {
                w.every_key
                    .then(|| script.checked.first().map(|c| c.1))
                    .flatten()
            });
            let reason = if check.is_some() {
                Reason::Checked
            } else if script.lock_named
                || *invoked_on_lock
                    .get_or_insert_with(|| invoked_on_lock_key(script, file, project))
            {
                Reason::LockScript
            } else {
                continue;
            };
            let message = format!(
                "this script {} `{}` with `{}` without checking that it still holds the caller's token; if the lock expired and passed to another holder, it {} their lock",
                rule.verb, w.key, w.command, rule.verb
            );
            let mut d = diagnostic(
                rule.info,
                (file.file.clone(), *span),
                rule.label,
                message,
                rule.help.to_string(),
            );
            let facts = facts.get_or_insert_with(|| {
                super::lua_fix::ScriptFacts::of(file, script, || {
                    let emb = file.embedded.get(script.embedded)?;
                    sites
                        .get_or_insert_with(|| CallSites::of(&file.file))
                        .token_argv(emb.span, &script.names)
                })
            });
            d.fix = super::lua_fix::guard_fix(file, script, w, facts);
            if reason == Reason::Checked {
                if let Some(at) = check {
                    let label = if own_check.is_some() {
                        rule.read_label
                    } else {
                        "compared here, but not for every key the write touches"
                    };
                    d.related.push(Related {
                        location: Location::new(file.file.clone(), at),
                        label: label.to_string(),
                    });
                }
            }
            out.push(d);
        }
    }
}

/// Whether the Rust function that builds the script also invokes it with `.key(..)` on a key
/// that is a lock (by the project-wide lock-key criteria).
pub(crate) fn invoked_on_lock_key(script: &Script, file: &FileIr, project: &Project) -> bool {
    let Some(func) = file
        .embedded
        .get(script.embedded)
        .and_then(|e| e.func)
        .and_then(|f| file.functions.get(f))
    else {
        return false;
    };
    let has_script_op = func
        .events
        .iter()
        .any(|e| matches!(e, Event::Op(o) if o.kind == OpKind::Script));
    if !has_script_op {
        return false;
    }
    project.traces.iter().any(|t| {
        t.ops.iter().any(|o| {
            o.op.kind == OpKind::Script
                && o.is_lock
                && std::ptr::eq(o.func, func)
                && o.file.path == file.file.path
        })
    })
}
