//! The value a key takes where it is chosen: a literal or a const of any file, or, for a
//! parameter of a wrapper function, the value each caller passes, followed up the callers'
//! own parameters. Shared by advisory-lock keys bound as `$n` ([`super::advisory_keys`]) and
//! the lock names given to a `locklint-runtime` locker inside a wrapper ([`super::runtime`]).

use super::*;
use crate::ir::{Call, FnId, KeyRef, Part};

/// How deep wrapper parameters are followed up the callers.
const MAX_WRAPPERS: usize = 4;

/// One way a key resolves.
pub(super) struct KeyOrigin<'a> {
    /// The value (`7001`, `hashtext('nightly')`), or the caller's expression when it has no
    /// fixed value (`{job_id}`); `None` when it stays unresolved.
    pub args: Option<String>,
    /// Whether the value is fixed.
    pub fixed: bool,
    /// The calls through which the key came, from the call of the wrapper outwards.
    pub via: Vec<(FnId, &'a Call)>,
}

/// What the value `key` of function `func` is: a fixed value (written by `render`: `7001`,
/// `'nightly'` for SQL), or for a parameter of a wrapper, what each caller passes, per chain
/// of callers (the caller's own expression when nothing above it fixes the value).
pub(super) fn values<'a>(
    project: &Project<'a>,
    func: FnId,
    key: &KeyRef,
    render: fn(&str) -> String,
) -> Vec<KeyOrigin<'a>> {
    values_within(project, func, key, render, 0)
}

fn values_within<'a>(
    project: &Project<'a>,
    func: FnId,
    key: &KeyRef,
    render: fn(&str) -> String,
    depth: usize,
) -> Vec<KeyOrigin<'a>> {
    let k = project.resolve_key(key);
    if let Some(t) = k.constant_text() {
        return vec![KeyOrigin {
            args: Some(render(&t)),
            fixed: true,
            via: Vec::new(),
        }];
    }
    let whole_param = matches!(k.parts.as_slice(), [Part::Hole(_)]);
    if let (true, Some((index, _))) = (whole_param, &k.param) {
        if depth < MAX_WRAPPERS {
            let callers = project.callers_of(func);
            if !callers.is_empty() {
                let mut out = Vec::new();
                for (caller, call) in callers {
                    let Some(arg) = call.args.get(*index) else {
                        continue;
                    };
                    for mut v in values_within(project, caller, arg, render, depth + 1) {
                        // the caller's own expression when nothing above it fixes the value
                        if v.args.is_none() {
                            v.args = Some(project.resolve_key(arg).display());
                        }
                        v.via.insert(0, (caller, call));
                        out.push(v);
                    }
                }
                if !out.is_empty() {
                    return out;
                }
            }
        }
    }
    vec![KeyOrigin {
        args: None,
        fixed: false,
        via: Vec::new(),
    }]
}
