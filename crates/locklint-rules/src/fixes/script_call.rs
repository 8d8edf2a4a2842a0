//! Compare-and-delete and compare-and-expire written as a script call in the code's client:
//! the script as a module-level constant, its invocation with the holder's token, the reply
//! type, and the command trait import the replaced call may leave unused.

use super::*;
use locklint_ir::diagnostic::{Edit, Location};
use locklint_ir::source::Span;
use locklint_project::TraceOp;

/// A Lua script the fix refers to by a module-level constant.
pub(crate) struct ScriptConst {
    pub(crate) name: &'static str,
    pub(crate) doc: &'static str,
    pub(crate) lua: &'static str,
}

/// The expression that names `script` at `o`, and the edit that defines it when the file does
/// not yet: the constant is added after the file's leading `use` lines, or reused when the
/// file already has it. Every fix adds it at the same place, so two fixes of one file never
/// both add it (their edits clash; the second one is applied in the next pass and reuses it).
/// Falls back to the literal inside inline modules or when the name is taken.
fn script_expr(o: &TraceOp, script: &ScriptConst) -> (String, Option<Edit>) {
    let literal = format!("{:?}", script.lua);
    let definition = format!("const {}: &str = {literal};", script.name);
    // reuse a module-level definition (at the start of a line; one indented may sit in an
    // inline module, out of this function's scope)
    let names = locklint_frontend::rust::names::of_file(&o.file);
    let top_level = names.defines_at_top_level(&o.file.text, script.name, &definition);
    if top_level && o.func.item_slot.is_some() {
        return (script.name.to_string(), None);
    }
    let taken = names.is_declared(script.name);
    let Some(at) = o.func.item_slot.filter(|_| !taken) else {
        return (literal, None);
    };
    let item = format!("/// {}\n{definition}", script.doc);
    let insertion = if at == 0 {
        format!("{item}\n\n")
    } else {
        format!("\n\n{item}")
    };
    let edit = Edit {
        location: Location {
            file: o.file.clone(),
            span: Span::new(at, at),
        },
        replacement: insertion,
    };
    (script.name.to_string(), Some(edit))
}

pub(crate) fn release_script() -> ScriptConst {
    ScriptConst {
        name: "COMPARE_AND_DELETE",
        doc: "Deletes KEYS[1] only while it holds this holder's token (ARGV[1]).",
        lua: crate::scripts::COMPARE_AND_DELETE,
    }
}

pub(crate) fn renew_script(command: &'static str) -> ScriptConst {
    let (name, doc, lua) = match command {
        "expire" => (
            "COMPARE_AND_EXPIRE",
            "Sets KEYS[1]'s TTL to ARGV[2] s only while it holds this holder's token (ARGV[1]).",
            crate::scripts::COMPARE_AND_EXPIRE,
        ),
        _ => (
            "COMPARE_AND_PEXPIRE",
            "Sets KEYS[1]'s TTL to ARGV[2] ms only while it holds this holder's token (ARGV[1]).",
            crate::scripts::COMPARE_AND_PEXPIRE,
        ),
    };
    ScriptConst { name, doc, lua }
}

/// A variable or field that holds the holder's token, as an argument expression
/// (`&token`, `&self.token`), when one is in scope before the operation.
/// Names of variables and fields that hold the holder's token.
pub(crate) use locklint_ir::vocabulary::{is_token_name, TOKEN_NAMES};

fn token_in_scope(o: &TraceOp) -> Option<String> {
    let f = o.func;
    for name in TOKEN_NAMES {
        if f.params.iter().any(|p| p == name) {
            return Some(name.to_string());
        }
        let text = &o.file.text;
        let used = f
            .uses_of(name)
            .iter()
            .find(|(_, at)| *at < o.op.span.start && *at > f.span.start);
        if f.has_self
            && locklint_frontend::rust::names::of_file(&o.file).reads_self_field(name)
            && used.is_none()
        {
            return Some(format!("&self.{name}"));
        }
        if let Some((_, at)) = used {
            let field = text[..*at].trim_end().ends_with("self.");
            return Some(if field {
                format!("&self.{name}")
            } else {
                format!("&{name}")
            });
        }
    }
    None
}

pub(crate) fn is_fred(o: &TraceOp) -> bool {
    locklint_frontend::rust::names::of_file(&o.file).mentions_fred()
}

/// Remove the command trait import a script fix leaves unused (see
/// [`crate::leftovers::unused_trait_import`]). A script constant inserted at the end of that
/// `use` line takes the line's place.
fn drop_trait_import(o: &TraceOp, replaced: Span, edits: &mut Vec<Edit>) {
    let Some(removal) = crate::leftovers::unused_trait_import(o, replaced) else {
        return;
    };
    let r = removal.location.span;
    let inside = |e: &Edit| {
        e.location.span.start >= r.start
            && e.location.span.start <= r.end
            && e.location.span.end <= r.end
    };
    if let Some(define) = edits.iter_mut().find(|e| inside(e)) {
        if define.location.span.start != define.location.span.end || r.is_empty() {
            return;
        }
        let mut merged = define.replacement.trim_start_matches('\n').to_string();
        merged.push('\n');
        if !removal_leaves_blank(o, r) {
            merged.push('\n');
        }
        *define = edit(&o.file, r, merged);
        return;
    }
    edits.push(removal);
}

/// Whether the text after a removed `use` line starts with a blank line.
pub(crate) fn removal_leaves_blank(o: &TraceOp, r: Span) -> bool {
    o.file
        .text
        .get(r.end..)
        .is_some_and(|t| t.starts_with('\n'))
}

/// How a typed redis-rs command becomes a script invocation: the span from its receiver to
/// the end of the call, and the tail that runs the script on the receiver,
/// `.invoke_async(&mut con)` before an `.await`, else `.invoke(&mut con)`. redis-rs's
/// `invoke`/`invoke_async` send `EVALSHA` and load the script when the server answers
/// `NOSCRIPT` (its `invoke_script` command sends `EVALSHA` alone). A receiver that is a
/// `&mut` parameter is passed as it is (reborrowed); another is borrowed. The reply type
/// comes from the call's turbofish, or is `()` when the statement discards the reply.
fn invocation(o: &TraceOp) -> Option<(Span, String)> {
    let file = &o.file;
    let receiver = o.op.receiver?;
    let recv = snippet(file, receiver).trim();
    if recv.is_empty() || recv.starts_with('&') || recv.starts_with('*') {
        return None;
    }
    let after = file.text.get(o.op.span.end..)?.trim_start();
    let method = if after.starts_with(".await") {
        "invoke_async"
    } else {
        "invoke"
    };
    let call = snippet(file, o.op.span);
    let reply = reply_type(call).or_else(|| {
        let stmt = o.op.stmt?;
        let stmt_text = snippet(file, stmt);
        // `con.del(&key)?;` / `con.del(&key).await?;`: the reply is dropped
        (stmt.start == receiver.start && !stmt_text.contains('=')).then(|| "()".to_string())
    });
    let turbofish = reply.map(|t| format!("::<{t}>")).unwrap_or_default();
    let plain = recv.chars().all(|c| c.is_alphanumeric() || c == '_');
    let con = if plain && crate::client::is_mut_ref_param(o, recv) {
        recv.to_string()
    } else {
        format!("&mut {recv}")
    };
    Some((
        Span::new(receiver.start, o.op.span.end),
        format!(".{method}{turbofish}({con})"),
    ))
}

/// The reply type a typed command names in its turbofish (`del::<_, i64>(..)` → `i64`);
/// `None` without one, or when it is left to inference.
pub(crate) fn reply_type(call: &str) -> Option<String> {
    let name_end = call.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    let rest = call[name_end..]
        .trim_start()
        .strip_prefix("::")?
        .trim_start();
    let inner = rest.strip_prefix('<')?;
    let mut depth = 0usize;
    let mut last_comma = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            '>' if depth == 0 => {
                let last = inner[last_comma..i].trim();
                return (!last.is_empty() && last != "_").then(|| last.to_string());
            }
            '>' => depth -= 1,
            ',' if depth == 0 => last_comma = i + 1,
            _ => {}
        }
    }
    None
}

/// The holder's token a guarded command compares with, and how far a fix built on it can be
/// trusted: unsafe with a token-named value in scope (the user confirms it is this holder's),
/// display-only with a placeholder, inside a macro or in a pipeline.
pub(crate) fn holder_token(o: &TraceOp) -> (String, Applicability) {
    let (token, applicability) = match token_in_scope(o) {
        Some(t) => (t, Applicability::Unsafe),
        None => ("&token".to_string(), Applicability::DisplayOnly),
    };
    if o.op.in_macro || matches!(o.op.channel, locklint_ir::Channel::Pipeline { .. }) {
        return (token, Applicability::DisplayOnly);
    }
    (token, applicability)
}

/// Whether the command at `o` is a typed method (`con.del(..)`), not `cmd("DEL")`.
pub(crate) fn is_typed_method(o: &TraceOp) -> bool {
    o.op.command.chars().all(|c| c.is_ascii_lowercase())
}

/// The command at `o` rewritten as a call of `script` on its key with `args` (the holder's
/// token first), in the code's own style: a typed redis-rs call becomes
/// `redis::Script::new(..).key(key).arg(..)` invoked as the command was; `cmd("..")` becomes
/// `cmd("EVAL")` with the script, one key and the arguments. The span replaced, the
/// replacement, and the edit that defines the script's constant when the file lacks it.
pub(crate) fn script_call(
    o: &TraceOp,
    script: &ScriptConst,
    args: &[&str],
) -> Option<(Span, String, Option<Edit>)> {
    let key = snippet(&o.file, o.op.key_span);
    let args: String = args.iter().map(|a| format!(".arg({a})")).collect();
    if is_typed_method(o) {
        if !crate::client::is_redis_rs(o) {
            return None;
        }
        let (at, call) = invocation(o)?;
        let (lua, define) = script_expr(o, script);
        Some((
            at,
            format!("redis::Script::new({lua}).key({key}){args}{call}"),
            define,
        ))
    } else {
        let lead = cmd_lead(o)?;
        let (lua, define) = script_expr(o, script);
        Some((
            o.op.span,
            format!("{lead}\"EVAL\").arg({lua}).arg(1).arg({key}){args}"),
            define,
        ))
    }
}

/// The text of a `cmd("..")` command up to its name's opening quote (`redis::cmd(`).
pub(crate) fn cmd_lead<'o>(o: &'o TraceOp) -> Option<&'o str> {
    let text = snippet(&o.file, o.op.span);
    Some(&text[..text.find('"')?])
}

/// The fix replacing the guarded command at `span`: the script's definition if needed, the
/// replacement, the trait import a replaced typed call may leave unused, laid out. The
/// message ends with what the applicability asks of the user about `token`.
pub(crate) fn guarded_fix(
    o: &TraceOp,
    (span, replacement, define): (Span, String, Option<Edit>),
    message: &str,
    token: &str,
    applicability: Applicability,
) -> Option<Fix> {
    let message = if applicability == Applicability::Unsafe {
        format!("{message}; check that `{token}` is this holder's token")
    } else {
        format!("{message}; pass the token this holder wrote when it acquired the lock")
    };
    let mut edits: Vec<Edit> = define.into_iter().collect();
    edits.push(edit(&o.file, span, replacement));
    if span != o.op.span {
        drop_trait_import(o, span, &mut edits);
    }
    fix(message, applicability, reflow(o, edits))
}
