//! A lock's TTL as the code writes it, derived in one place for the audit (which reports it)
//! and the fixes (which move a separate expiry into the acquire): the `PX`/`EX` option of an
//! acquire (typed `SetExpiry::PX(n)`, builder `.arg("PX").arg(n)`, fred `Expiration::PX(n)`),
//! the seconds of `SETEX`/`PSETEX`, or those of a separate `EXPIRE`/`PEXPIRE`.

use locklint_ir::source::{FileRef, Span};
use locklint_ir::Op;

/// The unit of an expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Millis,
}

impl Unit {
    /// The option word of `SET` for this unit.
    pub fn word(self) -> &'static str {
        match self {
            Unit::Seconds => "EX",
            Unit::Millis => "PX",
        }
    }
}

/// An expiry as the code writes it.
#[derive(Debug, Clone)]
pub struct Ttl {
    /// The expression's source text (`30_000`, `ttl.as_millis() as u64`).
    pub text: String,
    /// Where the expression is in its file (empty for a TTL no code wrote).
    pub span: Span,
    pub unit: Unit,
    /// The value, when the expression is an integer literal.
    pub value: Option<u64>,
}

impl Ttl {
    /// A TTL in milliseconds that no code wrote (a default), as a grouped literal.
    pub fn millis(ms: u64) -> Ttl {
        Ttl {
            text: group_digits(ms),
            span: Span::default(),
            unit: Unit::Millis,
            value: Some(ms),
        }
    }

    fn written(text: &str, span: Span, unit: Unit) -> Ttl {
        Ttl {
            text: text.to_string(),
            span,
            unit,
            value: literal_value(text),
        }
    }
}

/// `30000` → `30_000`.
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    if s.len() <= 4 {
        return s;
    }
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push('_');
        }
        out.push(c);
    }
    out
}

/// The value of an integer literal (`30_000`, `30u64`).
fn literal_value(text: &str) -> Option<u64> {
    const SUFFIXES: &[&str] = &["u32", "u64", "usize", "i32", "i64", "isize", "u128", "i128"];
    let digits = SUFFIXES
        .iter()
        .find_map(|s| text.strip_suffix(s))
        .unwrap_or(text);
    if !digits.starts_with(|c: char| c.is_ascii_digit())
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    digits.replace('_', "").parse().ok()
}

/// The arguments of a command after its name as source texts with their spans: a typed
/// method's arguments, or a builder's `.arg(..)`s.
pub fn command_args(file: &FileRef, op: &Op) -> Vec<(String, Span)> {
    op.args
        .iter()
        .map(|s| (file.text.get(s.start..s.end).unwrap_or("").to_string(), *s))
        .collect()
}

/// Which argument of a command sets a TTL, and in which unit: the seconds of `EXPIRE` and
/// `SETEX`, the milliseconds of `PEXPIRE` and `PSETEX`.
fn ttl_argument(op: &Op) -> Option<(usize, Unit)> {
    let builder = op.command.chars().any(|c| c.is_ascii_uppercase());
    match op.command.to_ascii_lowercase().as_str() {
        "expire" => Some((1, Unit::Seconds)),
        "pexpire" => Some((1, Unit::Millis)),
        // `SETEX key seconds value`; redis-rs `set_ex(key, value, seconds)`
        "setex" | "set_ex" => Some((if builder { 1 } else { 2 }, Unit::Seconds)),
        "psetex" | "pset_ex" => Some((if builder { 1 } else { 2 }, Unit::Millis)),
        _ => None,
    }
}

/// The TTL an operation sets, as the code writes it: `None` when it sets none that the code
/// shows (no expiry, or one this does not read).
pub fn of(file: &FileRef, op: &Op) -> Option<Ttl> {
    if let Some((index, unit)) = ttl_argument(op) {
        let args = command_args(file, op);
        let (text, span) = args.get(index)?;
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        return Some(Ttl::written(text, *span, unit));
    }
    let snippet = file.text.get(op.span.start..op.span.end).unwrap_or("");
    [("PX", Unit::Millis), ("EX", Unit::Seconds)]
        .into_iter()
        .find_map(|(marker, unit)| {
            let span = after_marker(snippet, marker)?;
            let span = Span::new(op.span.start + span.start, op.span.start + span.end);
            let text = file.text.get(span.start..span.end).unwrap_or("");
            Some(Ttl::written(text, span, unit))
        })
}

/// The TTL of options a command takes through a local binding, read from the binding's
/// initialiser (`Op::option_spans`, recorded by the walker): `let opts =
/// SetOptions::default().with_expiration(SetExpiry::EX(86_400));` then
/// `con.set_options(&key, &token, opts)`.
pub fn of_options(file: &FileRef, op: &Op) -> Option<Ttl> {
    op.option_spans.iter().find_map(|init| {
        let text = file.text.get(init.start..init.end)?;
        [("PX", Unit::Millis), ("EX", Unit::Seconds)]
            .into_iter()
            .find_map(|(marker, unit)| {
                let at = after_marker(text, marker)?;
                let span = Span::new(init.start + at.start, init.start + at.end);
                Some(Ttl::written(
                    file.text.get(span.start..span.end)?,
                    span,
                    unit,
                ))
            })
    })
}

/// The expression after the option word `marker` in a command's text (`"PX").arg(30_000)`,
/// `PX(ttl_ms)`), relative to the text: up to the `)` or `,` that ends it.
fn after_marker(text: &str, marker: &str) -> Option<Span> {
    let upper = text.to_ascii_uppercase();
    let mut from = 0;
    while let Some(i) = upper[from..].find(marker) {
        let at = from + i;
        from = at + marker.len();
        // a whole word: `PX` but not `PXAT`, not `SPX`
        let before = upper[..at].chars().last();
        let after = upper[at + marker.len()..].chars().next();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            || after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        let mut rest = &text[at + marker.len()..];
        loop {
            let t = rest
                .trim_start_matches([' ', '\t', '\n', '\r', '"', '\'', ')', '(', ',', '.', '&']);
            let t = t.strip_prefix("arg").unwrap_or(t);
            if t.len() == rest.len() {
                break;
            }
            rest = t;
        }
        let start = text.len() - rest.len();
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth == 0 => {
                    end = i;
                    break;
                }
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let expr = rest[..end].trim_end();
        return Some(Span::new(start, start + expr.len()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_grouped_like_rust_literals() {
        assert_eq!(group_digits(30_000), "30_000");
        assert_eq!(group_digits(1500), "1500");
        assert_eq!(group_digits(1_234_567), "1_234_567");
    }

    #[test]
    fn the_expression_after_an_option_word_is_the_ttl() {
        let at = |text: &str, marker: &str| {
            after_marker(text, marker).map(|s| text[s.start..s.end].to_string())
        };
        assert_eq!(
            at(
                "cmd(\"SET\").arg(&k).arg(t).arg(\"NX\").arg(\"PX\").arg(30_000)",
                "PX"
            )
            .as_deref(),
            Some("30_000")
        );
        assert_eq!(
            at(
                "set_options(k, t, o.with_expiration(SetExpiry::PX(ttl.as_millis() as u64)))",
                "PX"
            )
            .as_deref(),
            Some("ttl.as_millis() as u64")
        );
        assert_eq!(at("cmd(\"PXAT\").arg(k)", "PX"), None);
        assert_eq!(at("cmd(\"EXPIRE\").arg(k)", "EX"), None);
    }

    #[test]
    fn only_integer_literals_have_a_value() {
        assert_eq!(literal_value("30_000"), Some(30_000));
        assert_eq!(literal_value("45u64"), Some(45));
        assert_eq!(literal_value("TTL_MS"), None);
        assert_eq!(literal_value("30 * 1000"), None);
        assert_eq!(literal_value("ttl"), None);
    }
}
