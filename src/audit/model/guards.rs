//! Releases run by a guard: the function that takes a lock stores the lock's key in a field of
//! a struct it builds (`Held { con, key, token }`), and that struct's `Drop` or a method named
//! for releasing (`release(self)`, `unlock`) deletes the key held in that field, with a plain
//! `DEL` or a script. The struct is matched by its name among the methods of every file; a key
//! that is not a plain local or parameter where it is stored is not followed.

use super::scripts::Scripts;
use super::*;
use crate::ir::Op;

/// The local or parameter an operation's key is written as (`&key`, `key.as_str()`).
fn key_variable(file: &crate::source::SourceFile, op: &Op) -> Option<String> {
    let text = file.snippet(op.key_span).trim();
    let text = text.strip_prefix('&').unwrap_or(text).trim();
    let text = text
        .strip_suffix(".as_str()")
        .or_else(|| text.strip_suffix(".clone()"))
        .unwrap_or(text);
    let ident = !text.is_empty()
        && !text.starts_with(|c: char| c.is_ascii_digit())
        && text.chars().all(|c| c.is_alphanumeric() || c == '_');
    ident.then(|| text.to_string())
}

/// A delete or script run by a guard on the key it holds: its file, function and operation.
pub(super) struct GuardRelease<'a> {
    pub(super) file: &'a FileIr,
    pub(super) func: &'a Function,
    pub(super) op: &'a Op,
}

/// The releases guards run for the lock the acquire `o` takes.
pub(super) fn guard_releases<'a>(
    project: &'a Project,
    scripts: &Scripts,
    o: &TraceOp,
) -> Vec<GuardRelease<'a>> {
    let Some(var) = key_variable(&o.file, o.op) else {
        return Vec::new();
    };
    let Some(stores) = scripts.stores(o.op.id.file) else {
        return Vec::new();
    };
    let whole = o.func.whole;
    let mut out = Vec::new();
    for s in stores
        .stored
        .iter()
        .filter(|s| s.name == var && s.at > o.op.span.start && s.at < whole.end)
    {
        for (fi, file) in project.files.iter().enumerate() {
            for g in &file.functions {
                let releases = g.name == "drop" || vocabulary::names_release(&g.name);
                if g.impl_type.as_deref() != Some(s.ty.as_str()) || !releases {
                    continue;
                }
                // the field's value in a local of the method (a `Drop` that hands the
                // release to a task)
                let locals: Vec<&str> = scripts
                    .stores(fi)
                    .map(|st| {
                        st.from_fields
                            .iter()
                            .filter(|x| x.ty == s.ty && x.func == g.name && x.field == s.field)
                            .map(|x| x.local.as_str())
                            .collect()
                    })
                    .unwrap_or_default();
                for e in &g.events {
                    let Event::Op(op) = e else { continue };
                    let deletes = matches!(
                        op.kind,
                        OpKind::Delete | OpKind::CompareDelete | OpKind::Script
                    );
                    let on_field = op
                        .key
                        .field
                        .as_ref()
                        .is_some_and(|(ty, field)| *ty == s.ty && *field == s.field)
                        || key_variable(&file.file, op)
                            .is_some_and(|v| locals.contains(&v.as_str()));
                    if deletes && on_field {
                        out.push(GuardRelease { file, func: g, op });
                    }
                }
            }
        }
    }
    out
}
