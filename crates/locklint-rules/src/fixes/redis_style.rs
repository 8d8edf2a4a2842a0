//! Redis commands rewritten in the code's own style (typed redis-rs methods, `redis::cmd`
//! builders, fred): an acquire with its expiry, a TTL written as the integer type the client
//! takes, a statement or chain link removed.

use super::*;
use locklint_ir::diagnostic::{Applicability, Edit};
use locklint_ir::source::{FileRef, Span};
use locklint_ir::{Channel, OpKind};
use locklint_project::TraceOp;

/// How a fix writes a TTL.
pub(crate) trait WrittenTtl {
    fn is_literal(&self) -> bool;
    /// The text as a value of the integer type `ty`, cast when it is not a literal.
    fn typed(&self, ty: &str) -> String;
}

impl WrittenTtl for Ttl {
    fn is_literal(&self) -> bool {
        self.text.chars().all(|c| c.is_ascii_digit() || c == '_')
    }

    fn typed(&self, ty: &str) -> String {
        // `x as i64` becomes `x as u64` rather than a double cast
        for int in ["i32", "i64", "u32", "u64", "usize", "isize"] {
            if let Some(base) = self.text.strip_suffix(&format!(" as {int}")) {
                if !base.contains(' ') {
                    return format!("{base} as {ty}");
                }
            }
        }
        if self.is_literal() || self.text.ends_with(&format!("as {ty}")) {
            self.text.clone()
        } else if self
            .text
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | ':' | '(' | ')'))
        {
            format!("{} as {ty}", self.text)
        } else {
            format!("({}) as {ty}", self.text)
        }
    }
}

/// Arguments of a command as source texts (see [`locklint_project::ttl::command_args`]).
pub(crate) fn command_args(file: &FileRef, o: &TraceOp) -> Vec<String> {
    locklint_project::ttl::command_args(file, o.op)
        .into_iter()
        .map(|(text, _)| text)
        .collect()
}

/// The expiry a separate `EXPIRE`/`PEXPIRE` sets.
pub(crate) fn expire_ttl(o: &TraceOp) -> Option<Ttl> {
    let cmd = o.op.command.to_ascii_lowercase();
    if !matches!(cmd.as_str(), "expire" | "pexpire") {
        return None;
    }
    o.ttl()
}

/// The whitespace that separates the links of a method chain ending at `end`, to keep a
/// multi-line chain multi-line.
pub(crate) fn chain_separator(file: &FileRef, span: Span) -> String {
    let text = snippet(file, span);
    let Some(dot) = text.rfind(".arg(") else {
        return String::new();
    };
    let before = &text[..dot];
    let ws_start = before.trim_end().len();
    let ws = &before[ws_start..];
    if ws.contains('\n') {
        ws.to_string()
    } else {
        String::new()
    }
}

/// Edits that make an acquire without expiry carry `ttl`, in the acquire's style, with how
/// safe they are as far as the acquire itself goes.
pub(crate) fn acquire_with_expiry(o: &TraceOp, ttl: &Ttl) -> Option<(Vec<Edit>, Applicability)> {
    if !matches!(
        o.op.kind,
        OpKind::Write {
            nx: true,
            expiry: None,
            ..
        }
    ) {
        return None;
    }
    let file = &o.file;
    let text = snippet(file, o.op.span);
    let mut applicability = if o.op.in_macro {
        Applicability::DisplayOnly
    } else {
        Applicability::Safe
    };
    let word = ttl.unit.word();
    if matches!(o.op.command.as_str(), "set_nx" | "set_options") && !crate::client::is_redis_rs(o) {
        return None;
    }
    let edits = match o.op.command.as_str() {
        "set_nx" => {
            // rename the method and add the options argument, leaving the arguments (and any
            // comment between them) as they are
            if !text.starts_with("set_nx") || !text.ends_with(')') {
                return None;
            }
            applicability = worst(applicability, reply_applicability(o));
            let options = format!(
                "redis::SetOptions::default().conditional_set(redis::ExistenceCheck::NX).with_expiration(redis::SetExpiry::{word}({}))",
                ttl.typed("u64")
            );
            let close = o.op.span.end - 1;
            let args = text[..text.len() - 1].trim_end();
            let start = o.op.span.start;
            vec![
                edit(
                    file,
                    Span::new(start, start + "set_nx".len()),
                    "set_options",
                ),
                if args.ends_with(',') {
                    let at = start + args.len();
                    edit(file, Span::new(at, at), format!(" {options},"))
                } else {
                    edit(file, Span::new(close, close), format!(", {options}"))
                },
            ]
        }
        "set_options" => {
            // the options argument: after the value, up to the closing parenthesis
            let (_, vspan) = o.op.value.as_ref()?;
            let rest_span = Span::new(vspan.end, o.op.span.end.checked_sub(1)?);
            let rest = snippet(file, rest_span);
            let opts = rest.trim_start().strip_prefix(',')?.trim();
            if opts.is_empty() || opts.contains(',') {
                return None;
            }
            let at = rest_span.start + rest.find(opts)? + opts.len();
            vec![edit(
                file,
                Span::new(at, at),
                format!(
                    ".with_expiration(redis::SetExpiry::{word}({}))",
                    ttl.typed("u64")
                ),
            )]
        }
        // fred: set(key, value, expiration, options, get)
        "set" => {
            let (_, vspan) = o.op.value.as_ref()?;
            let rest = snippet(file, Span::new(vspan.end, o.op.span.end));
            let after_comma = rest.trim_start().strip_prefix(',')?;
            let lead = rest.len() - after_comma.len();
            let trimmed = after_comma.trim_start();
            let start = vspan.end + lead + (after_comma.len() - trimmed.len());
            if !trimmed.starts_with("None") {
                return None;
            }
            let next = trimmed["None".len()..].trim_start();
            if !next.starts_with(',') {
                return None;
            }
            vec![edit(
                file,
                Span::new(start, start + "None".len()),
                format!(
                    "Some(fred::types::Expiration::{word}({}))",
                    ttl.typed("i64")
                ),
            )]
        }
        "SET ... NX" | "SETNX" => {
            if !text.ends_with(')') {
                return None;
            }
            let sep = chain_separator(file, o.op.span);
            let mut edits = Vec::new();
            let mut tail = String::new();
            if o.op.command == "SETNX" {
                let lower = text.to_ascii_lowercase();
                let at = lower.find("\"setnx\"")?;
                let s = o.op.span.start + at;
                edits.push(edit(file, Span::new(s, s + "\"setnx\"".len()), "\"SET\""));
                tail.push_str(&format!("{sep}.arg(\"NX\")"));
                applicability = worst(applicability, reply_applicability(o));
            }
            tail.push_str(&format!("{sep}.arg(\"{word}\"){sep}.arg({})", ttl.text));
            edits.push(edit(file, Span::new(o.op.span.end, o.op.span.end), tail));
            edits
        }
        _ => return None,
    };
    if let Channel::Pipeline { .. } = o.op.channel {
        applicability = Applicability::DisplayOnly;
    }
    Some((reflow(o, edits), applicability))
}

/// The span that deleting a statement removes: its whole lines when nothing else is on them.
pub(crate) fn statement_removal(file: &FileRef, stmt: Span) -> Span {
    let text = &file.text;
    let line_start = file.line_span(stmt.start).start;
    let line_end = (file.line_span(stmt.end).end + 1).min(text.len());
    let before_blank = text[line_start..stmt.start].trim().is_empty();
    let after_blank = text[stmt.end..line_end].trim().is_empty();
    if before_blank && after_blank {
        Span::new(line_start, line_end)
    } else {
        stmt
    }
}

/// Widen a removal that empties `if flag { .. }` (a plain condition, no `else`) to the whole
/// `if`, so no empty block is left behind.
pub(crate) fn widen_to_empty_if(file: &FileRef, removal: Span) -> Span {
    let text = &file.text;
    let before = &text[..removal.start];
    let after = &text[removal.end..];
    let Some(open) = before.trim_end().strip_suffix('{') else {
        return removal;
    };
    let Some(close_rest) = after.trim_start().strip_prefix('}') else {
        return removal;
    };
    let line_start = open.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let head = open[line_start..].trim();
    let Some(cond) = head.strip_prefix("if ") else {
        return removal;
    };
    let cond = cond.trim().trim_start_matches('!');
    let plain = !cond.is_empty()
        && cond
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.');
    let rest_line = close_rest.split('\n').next().unwrap_or("");
    if !plain || !rest_line.trim().is_empty() {
        return removal;
    }
    let end = text.len() - close_rest.len() + rest_line.len();
    let end = if text[end..].starts_with('\n') {
        end + 1
    } else {
        end
    };
    Span::new(line_start, end)
}

/// The span that removes a command from a method chain: `.expire(..)` and the whitespace
/// before it, and a directly following `.ignore()`.
pub(crate) fn chain_link_removal(file: &FileRef, span: Span) -> Option<Span> {
    let text = &file.text;
    let before = text[..span.start].trim_end();
    let dot = before.strip_suffix('.')?;
    let start = dot.trim_end().len();
    let mut end = span.end;
    let after = &text[end..];
    let trimmed = after.trim_start();
    if let Some(rest) = trimmed.strip_prefix(".ignore()") {
        end += after.len() - rest.len();
    }
    Some(Span::new(start, end))
}

/// Identifiers a TTL expression reads that are bound by a `let` between `from` and `to`:
/// moving the expression before them would not compile.
pub(crate) fn bound_between(file: &FileRef, ttl: &Ttl, from: usize, to: usize) -> bool {
    if from >= to {
        return false;
    }
    let between = &file.text[from..to];
    ttl.text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| {
            w.chars().next().is_some_and(|c| c.is_ascii_lowercase()) && *w != "self" && *w != "as"
        })
        .any(|w| {
            between.contains(&format!("let {w} "))
                || between.contains(&format!("let {w}:"))
                || between.contains(&format!("let mut {w}"))
                || between.contains(&format!("let {w}="))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_texts_are_cast_when_not_literals() {
        let t = |s: &str| Ttl {
            text: s.to_string(),
            span: Span::default(),
            unit: locklint_project::ttl::Unit::Seconds,
            value: None,
        };
        assert_eq!(t("60").typed("u64"), "60");
        assert_eq!(t("TTL_SECS").typed("u64"), "TTL_SECS as u64");
        assert_eq!(t("a + 1").typed("u64"), "(a + 1) as u64");
        assert_eq!(t("x as u64").typed("u64"), "x as u64");
        assert_eq!(
            t("d.as_millis() as i64").typed("u64"),
            "d.as_millis() as u64"
        );
    }
}
