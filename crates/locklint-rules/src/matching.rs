//! Matching shared by the rules: building diagnostics from trace operations, finding the
//! read a write depends on, and describing operations in messages.

use super::RuleInfo;
use locklint_ir::diagnostic::{Diagnostic, Location, Related};
use locklint_ir::source::{FileRef, Span};
use locklint_ir::vocabulary;
use locklint_ir::{Call, Channel, Event, Function, OpKind};
use locklint_project::{KeyMade, Trace, TraceOp};

/// A diagnostic for `info` at a span, with the helper call chain as related spans.
pub fn diagnostic(
    info: &'static RuleInfo,
    at: (FileRef, Span),
    label: impl Into<String>,
    message: String,
    help: String,
) -> Diagnostic {
    Diagnostic {
        rule: info.name,
        severity: info.severity,
        primary: Location::new(at.0, at.1),
        label: label.into(),
        message,
        help,
        related: Vec::new(),
        fix: None,
    }
}

/// The operation's own location.
pub fn site(o: &TraceOp) -> (FileRef, Span) {
    (o.file.clone(), o.op.span)
}

/// A related span pointing at an operation.
pub fn related(o: &TraceOp, label: impl Into<String>) -> Related {
    Related {
        location: Location::new(o.file.clone(), o.op.span),
        label: label.into(),
    }
}

/// Related spans for the calls that led from the root function to the operation.
pub fn call_chain(o: &TraceOp) -> Vec<Related> {
    call_chain_from(&o.via)
}

/// Related spans for these calls of a chain.
pub fn call_chain_from(via: &[(FileRef, Span)]) -> Vec<Related> {
    via.iter()
        .map(|(f, s)| Related {
            location: Location::new(f.clone(), *s),
            label: "through this call".to_string(),
        })
        .collect()
}

/// Where a command of a generic helper is reported, when the command's key is a parameter of
/// a function that does not name a lock (`fn remove_file(conn, name) { cmd("DEL").arg(name) }`
/// reached from `remove_file(conn, &self.lock_file)`): the command is the helper's for every
/// key it is given, and the lock is the caller's.
pub enum HelperSite<'o> {
    /// At the call whose argument made the key; the calls after it lead to the command.
    Call(&'o (FileRef, Span), &'o [(FileRef, Span)]),
    /// The key is the root's own parameter and the root has callers: their traces report it.
    Callers,
}

/// [`HelperSite`] of an operation of `trace`, if it is a generic helper's: not one that also
/// acquires the key it is handed (that function holds the lock itself).
pub fn generic_helper_site<'o>(trace: &Trace, o: &'o TraceOp) -> Option<HelperSite<'o>> {
    let made = o.key_made?;
    let named = |name: &str| vocabulary::is_lock_fn_name(name) || vocabulary::names_lock(name);
    let param_names_lock = o.op.key.param.as_ref().is_some_and(|(_, p)| named(p));
    if named(&o.func.name) || param_names_lock {
        return None;
    }
    // the operations on the same key, found through the trace's index of them
    let at = trace
        .indexes_of(o.op.id)
        .iter()
        .copied()
        .find(|&j| std::ptr::eq(&trace.ops[j], o));
    let acquires_it = at.is_some_and(|i| {
        trace
            .earlier_on_key(i)
            .chain(trace.later_on_key(i))
            .any(|a| {
                a.op.kind.is_acquire()
                    && a.op.id.file == o.op.id.file
                    && a.op.id.func == o.op.id.func
                    && trace.same_key(a, o)
            })
    });
    if acquires_it {
        return None;
    }
    match made {
        KeyMade::ByCallers => Some(HelperSite::Callers),
        KeyMade::At(i) => {
            let (first, rest) = o.via.get(i..)?.split_first()?;
            Some(HelperSite::Call(first, rest))
        }
    }
}

/// Where an operation is seen from its trace's root: the call that handed a generic helper
/// its key (see [`generic_helper_site`]), else the operation itself.
pub fn op_site(trace: &Trace, o: &TraceOp) -> (FileRef, Span) {
    match generic_helper_site(trace, o) {
        Some(HelperSite::Call(at, _)) => at.clone(),
        _ => site(o),
    }
}

/// Related spans of an unguarded release or renewal: the client-side comparison it depends on
/// (if any), then the calls that led to it.
pub fn comparison_and_chain(compared: Option<&TraceOp>, o: &TraceOp) -> Vec<Related> {
    let mut rel: Vec<Related> = compared
        .map(|r| related(r, "compared here"))
        .into_iter()
        .collect();
    rel.extend(call_chain(o));
    rel
}

/// Add related spans, skipping duplicates of the primary span.
pub fn with_related(mut d: Diagnostic, rel: impl IntoIterator<Item = Related>) -> Diagnostic {
    for r in rel {
        let dup = r.location == d.primary || d.related.iter().any(|x| x.location == r.location);
        if !dup {
            d.related.push(r);
        }
    }
    d
}

/// The earlier read of the same key that `trace.ops[i]`'s path depends on.
pub fn dependent_read<'t, 'a>(trace: &'t Trace<'a>, i: usize) -> Option<&'t TraceOp<'a>> {
    let me = &trace.ops[i];
    me.deps
        .iter()
        .flat_map(|d| trace.indexes_of(*d))
        .copied()
        .filter(|&j| j < i)
        .filter(|&j| {
            let o = &trace.ops[j];
            o.op.kind == OpKind::Read && trace.same_key(o, me)
        })
        .max()
        .map(|j| &trace.ops[j])
}

/// The command as users know it, upper case (`set_nx` → `SETNX`); a wrapper's method named
/// like a command as written, with the command it is read as (`` `delete_key` (a `DEL`) ``).
pub fn command_name(o: &TraceOp) -> String {
    let c = o.op.command.as_str();
    if o.op.described {
        let read_as = match o.op.kind {
            OpKind::Delete => "DEL",
            OpKind::Read => "GET",
            OpKind::Expire => "EXPIRE",
            _ => "SET ... NX EX",
        };
        return format!("`{c}` (a `{read_as}`)");
    }
    let upper = match c {
        "set_nx" => "SETNX".to_string(),
        "set_options" => "SET".to_string(),
        "set_ex" => "SETEX".to_string(),
        "pset_ex" => "PSETEX".to_string(),
        "expire_at" => "EXPIREAT".to_string(),
        "pexpire_at" => "PEXPIREAT".to_string(),
        "get_del" => "GETDEL".to_string(),
        "get_ex" => "GETEX".to_string(),
        "del_ex" => "DELEX".to_string(),
        other => other.to_ascii_uppercase(),
    };
    format!("`{upper}`")
}

/// The key as shown in messages.
pub fn key_text(o: &TraceOp) -> String {
    let d = o.key.display();
    if d.is_empty() {
        "(unknown key)".to_string()
    } else {
        d
    }
}

pub fn in_pipeline(o: &TraceOp) -> Option<bool> {
    match o.op.channel {
        Channel::Pipeline { atomic, .. } => Some(atomic),
        Channel::Direct => None,
    }
}

/// Help text for an atomic compare-and-delete release.
pub const RELEASE_HELP: &str = concat!(
    "release atomically with the holder's token: a Lua script `",
    crate::scripts::compare_and_delete!(),
    "`, or `DELEX key IFEQ token` on Redis 8.4+ (redis-rs `del_ex` with `ValueComparison::ifeq`)"
);

/// Help text for an atomic compare-and-pexpire renewal.
pub const RENEW_HELP: &str = concat!(
    "renew atomically with the holder's token: a Lua script `",
    crate::scripts::compare_and_renew!("pexpire"),
    "`"
);

/// The index of the first event of `f` after the call `call` (past its arguments, closures
/// included).
pub fn after_call(f: &Function, call: &Call) -> usize {
    f.events
        .iter()
        .filter(|e| e.id().index > call.id.index)
        .find(|e| match e {
            Event::Call(d) => d.span.start >= call.span.end,
            Event::Op(o) => o.span.start >= call.span.end,
            Event::ConnEnd(x) => x.span.start >= call.span.end,
            // a statement's place is the call that runs it
            Event::Sql { .. } => false,
        })
        .map_or(usize::MAX, |e| e.id().index)
}

/// [`after_call`] for the call at event index `index` of `f` (`usize::MAX` when there is none).
pub fn after_call_at(f: &Function, index: usize) -> usize {
    f.events
        .iter()
        .find_map(|e| match e {
            Event::Call(c) if c.id.index == index => Some(after_call(f, c)),
            _ => None,
        })
        .unwrap_or(usize::MAX)
}

/// A `const`/`static` name (`RELEASE_LOCK`): spelt in capitals, it names one item across
/// files, where a local's or a field's name (`release`) names one only where it is declared.
pub fn is_constant_name(name: &str) -> bool {
    name.chars().any(|c| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}
