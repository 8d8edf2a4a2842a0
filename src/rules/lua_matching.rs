//! Matching shared by the Lua script rules: which unguarded `DEL`/`UNLINK`/expiry calls in a
//! Redis script are about a lock, and the diagnostic for them.

use super::matching::diagnostic;
use super::RuleInfo;
use crate::diagnostic::{Applicability, Diagnostic, Edit, Fix, Location, Related};
use crate::frontend::lua::KeyWrite;
use crate::frontend::lua::{Script, WriteKind};
use crate::ir::{Event, FileIr, OpKind};
use crate::locks::Project;
use crate::source::Span;

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
    /// The script compares the key's value somewhere, but not before this write.
    Checked,
    /// The script is named like a lock script, or is invoked on a lock key.
    LockScript,
}

/// Report every unguarded write of `rule.kind` in the file's Lua scripts.
pub fn check(rule: &LuaRule, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
    for script in &file.lua.scripts {
        let mut invoked_on_lock: Option<bool> = None;
        let mut argv1: Option<Argv1> = None;
        for (w, span) in &script.writes {
            if w.kind != rule.kind || w.guarded {
                continue;
            }
            let reason = if script.check_of(&w.key).is_some() {
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
            let argv1 = argv1.get_or_insert_with(|| {
                Argv1::of(
                    file.embedded
                        .get(script.embedded)
                        .map_or("", |e| e.text.as_str()),
                )
            });
            d.fix = guard_fix(file, script, w, argv1);
            if reason == Reason::Checked {
                if let Some(at) = script.check_of(&w.key) {
                    d.related.push(Related {
                        location: Location::new(file.file.clone(), at),
                        label: rule.read_label.to_string(),
                    });
                }
            }
            out.push(d);
        }
    }
}

/// Whether the Rust function that builds the script also invokes it with `.key(..)` on a key
/// that is a lock (by the project-wide lock-key criteria).
fn invoked_on_lock_key(script: &Script, file: &FileIr, project: &Project) -> bool {
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

/// How a script uses `ARGV[1]` (read once per script).
struct Argv1 {
    /// It compares `ARGV[1]` with something.
    compared: bool,
    /// It uses `ARGV[2]` but not `ARGV[1]`.
    free: bool,
}

impl Argv1 {
    fn of(text: &str) -> Self {
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        Argv1 {
            compared: compact.contains("==ARGV[1]")
                || compact.contains("~=ARGV[1]")
                || compact.contains("ARGV[1]==")
                || compact.contains("ARGV[1]~="),
            free: !compact.contains("ARGV[1]") && compact.contains("ARGV[2]"),
        }
    }
}

/// Make the write conditional on the caller's token, in place:
/// `if redis.call('get', KEYS[1]) == ARGV[1] then <write> end` for a statement, or
/// `(redis.call('get', KEYS[1]) == ARGV[1] and <write> or 0)` inside an expression. Unsafe
/// when the script already takes the token as `ARGV[1]` (compares it, writes it, or leaves
/// `ARGV[1]` free next to `ARGV[2]`); shown only when the caller has to start passing it.
fn guard_fix(file: &FileIr, script: &Script, w: &KeyWrite, argv1: &Argv1) -> Option<Fix> {
    let emb = file.embedded.get(script.embedded)?;
    let text = &emb.text;
    let (start, end) = w.range;
    let call = text.get(start..end)?;
    let before = text.get(..start)?;
    let line_before = before.rsplit('\n').next().unwrap_or("").trim_end();
    let expression = ["return", "=", "(", ",", "and", "or", "not"]
        .iter()
        .any(|p| line_before.ends_with(p))
        && !line_before.ends_with("then");
    let writes_argv1 = call.replace(' ', "").contains(",ARGV[1]");
    let mut applicability = if argv1.compared || writes_argv1 || argv1.free {
        Applicability::Unsafe
    } else {
        Applicability::DisplayOnly
    };
    if emb.origin != "file" {
        let literal = file
            .file
            .text
            .get(emb.span.start..emb.span.end)
            .unwrap_or("");
        if !(literal.ends_with('"') || literal.ends_with('#')) {
            applicability = Applicability::DisplayOnly;
        }
    }
    let check = format!("redis.call('get', {}) == ARGV[1]", w.key);
    let otherwise = if w.command.to_ascii_uppercase().starts_with("SET") {
        "false"
    } else {
        "0"
    };
    let (prefix, suffix) = if expression {
        (format!("({check} and "), format!(" or {otherwise})"))
    } else {
        (format!("if {check} then "), " end".to_string())
    };
    let s = emb.map.to_source(start);
    let e = emb.map.span(start, end).end;
    let edits = vec![
        Edit {
            location: Location::new(file.file.clone(), Span::new(s, s)),
            replacement: prefix,
        },
        Edit {
            location: Location::new(file.file.clone(), Span::new(e, e)),
            replacement: suffix,
        },
    ];
    Some(Fix {
        message: format!(
            "{} only while `{}` holds the caller's token (`ARGV[1]`)",
            w.command, w.key
        ),
        applicability,
        edits,
    })
}
