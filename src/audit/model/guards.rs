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

/// The struct fields the key `var` of the acquire `o` is stored in after it: by a struct
/// literal in the acquiring function, or through a constructor it calls (`Guard::new(con,
/// key, token)`) whose literal stores that parameter.
fn guard_fields(
    project: &Project,
    scripts: &Scripts,
    o: &TraceOp,
    var: &str,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let whole = o.func.whole;
    let after = |at: usize| at > o.op.span.start && at < whole.end;
    if let Some(stores) = scripts.stores(o.op.id.file) {
        for s in stores
            .stored
            .iter()
            .filter(|s| s.name == var && after(s.at))
        {
            out.push((s.ty.clone(), s.field.clone()));
        }
    }
    let passed = scripts
        .stores(o.op.id.file)
        .map(|s| s.passed.as_slice())
        .unwrap_or_default();
    for c in passed.iter().filter(|p| p.name == var && after(p.at)) {
        for (fi, file) in project.files.iter().enumerate() {
            let Some(stores) = scripts.stores(fi) else {
                continue;
            };
            for s in stores.stored.iter().filter(|s| s.ty == c.ty) {
                let stores_param = file.functions.iter().any(|g| {
                    g.impl_type.as_deref() == Some(c.ty.as_str())
                        && g.name == c.func
                        && g.whole.start <= s.at
                        && s.at < g.whole.end
                        && g.params.get(c.index) == Some(&s.name)
                });
                if stores_param {
                    out.push((s.ty.clone(), s.field.clone()));
                }
            }
        }
    }
    out
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
    let mut held: Vec<(String, String)> = guard_fields(project, scripts, o, &var);
    held.dedup();
    let mut out = Vec::new();
    for (ty, field) in held {
        let s = (ty.as_str(), field.as_str());
        for (fi, file) in project.files.iter().enumerate() {
            for g in &file.functions {
                let releases = g.name == "drop" || vocabulary::names_release(&g.name);
                if g.impl_type.as_deref() != Some(s.0) || !releases {
                    continue;
                }
                // the field's value in a local of the method (a `Drop` that hands the
                // release to a task)
                let locals: Vec<&str> = scripts
                    .stores(fi)
                    .map(|st| {
                        st.from_fields
                            .iter()
                            .filter(|x| x.ty == s.0 && x.func == g.name && x.field == s.1)
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
                        .as_deref()
                        .is_some_and(|(ty, field)| ty == s.0 && field == s.1)
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
