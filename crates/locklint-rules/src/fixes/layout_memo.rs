//! Layouts remembered by the statement's shape. A file of many fixes of the same shape (a
//! lock taken the same way for a thousand keys) would otherwise parse and print each fixed
//! statement with `syn` and `prettyplease`, most of the time of fixing it.
//!
//! The printer sees a string literal as one word of its width: two statements that differ
//! only in the contents of their string literals, each of the same width in both, are laid
//! out the same. A statement is remembered with each plain ASCII string literal on one line
//! without escapes replaced by a placeholder of its width (`"lock:job:7"` → `"__________"`), and its layout
//! with the literals put back in order. The layout is kept only when the placeholders come
//! back as the same tokens in the same order, so a printer that moved or rewrote a literal
//! gets the statement laid out on its own.

use ra_ap_rustc_lexer::{tokenize, FrontmatterAllowed, LiteralKind, TokenKind};
use std::cell::RefCell;
use std::collections::HashMap;

/// How many layouts a thread remembers before it forgets them all.
const REMEMBERED: usize = 4096;

thread_local! {
    static LAYOUTS: RefCell<HashMap<String, Option<String>>> = RefCell::new(HashMap::new());
}

/// The string literals of Rust source text (spans of `"..."` tokens, not raw or byte
/// strings), in order.
fn string_literals(code: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    for t in tokenize(code, FrontmatterAllowed::No) {
        let end = at + t.len as usize;
        if let TokenKind::Literal {
            kind: LiteralKind::Str { terminated: true },
            ..
        } = t.kind
        {
            out.push((at, end));
        }
        at = end;
    }
    out
}

/// What stands for a literal in the remembered statement: a placeholder of its width when it
/// is plain ASCII on one line without escapes or suffix, else the literal itself.
fn stand_in(literal: &str) -> String {
    let plain = literal.is_ascii()
        && literal.len() >= 2
        && literal.ends_with('"')
        && !literal.contains(['\n', '\\']);
    if plain {
        format!("\"{}\"", "_".repeat(literal.len() - 2))
    } else {
        literal.to_string()
    }
}

/// `code` with each string literal replaced by what stands for it.
fn with_stand_ins(code: &str, literals: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(code.len());
    let mut at = 0;
    for &(start, end) in literals {
        out.push_str(&code[at..start]);
        out.push_str(&stand_in(&code[start..end]));
        at = end;
    }
    out.push_str(&code[at..]);
    out
}

/// A layout of the stand-in statement with the original literals put back; `None` when its
/// string literals are not the stand-ins, one for one and in order.
fn put_back(layout: &str, originals: &[&str]) -> Option<String> {
    let found = string_literals(layout);
    if found.len() != originals.len() {
        return None;
    }
    let mut out = String::with_capacity(layout.len());
    let mut at = 0;
    for (&(start, end), original) in found.iter().zip(originals) {
        if layout[start..end] != stand_in(original) {
            return None;
        }
        out.push_str(&layout[at..start]);
        out.push_str(original);
        at = end;
    }
    out.push_str(&layout[at..]);
    Some(out)
}

/// `layout(stmt)`, remembered for the statements of the same shape at the same indentation
/// (see the module's documentation).
pub(crate) fn laid_out(
    stmt: &str,
    indent: &str,
    layout: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let literals = string_literals(stmt);
    let originals: Vec<&str> = literals.iter().map(|&(s, e)| &stmt[s..e]).collect();
    let shape = with_stand_ins(stmt, &literals);
    let key = format!("{indent}\n{shape}");
    let known = LAYOUTS.with(|m| m.borrow().get(&key).cloned());
    let remembered = match known {
        Some(l) => l,
        None => {
            let l = layout(&shape);
            LAYOUTS.with(|m| {
                let mut m = m.borrow_mut();
                if m.len() >= REMEMBERED {
                    m.clear();
                }
                m.insert(key, l.clone());
            });
            l
        }
    };
    match remembered {
        None => None,
        Some(l) => put_back(&l, &originals).or_else(|| layout(stmt)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A layout that counts its calls and breaks the statement after each comma.
    fn counting(calls: &Cell<usize>) -> impl Fn(&str) -> Option<String> + '_ {
        move |s: &str| {
            calls.set(calls.get() + 1);
            Some(s.replace(", ", ",\n    "))
        }
    }

    #[test]
    fn statements_differing_only_in_literals_of_the_same_width_are_laid_out_once() {
        let calls = Cell::new(0);
        let f = counting(&calls);
        let indent = "        ";
        let a = laid_out(r#"con.set("lock:job:1", "a", 30);"#, indent, &f).unwrap();
        let b = laid_out(r#"con.set("lock:job:2", "b", 30);"#, indent, &f).unwrap();
        assert_eq!(a, "con.set(\"lock:job:1\",\n    \"a\",\n    30);");
        assert_eq!(b, "con.set(\"lock:job:2\",\n    \"b\",\n    30);");
        assert_eq!(calls.get(), 1);
        // another width, another indentation, another number: laid out again
        laid_out(r#"con.set("lock:job:10", "b", 30);"#, indent, &f).unwrap();
        laid_out(r#"con.set("lock:job:3", "b", 30);"#, "    ", &f).unwrap();
        laid_out(r#"con.set("lock:job:3", "b", 31);"#, indent, &f).unwrap();
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn raw_byte_and_non_ascii_literals_are_kept_as_they_are() {
        let calls = Cell::new(0);
        let f = counting(&calls);
        let stmt = r#####"f("ключ", r"___", b"xy", "a\"b", "cd");"#####;
        assert_eq!(
            with_stand_ins(stmt, &string_literals(stmt)),
            r#####"f("ключ", r"___", b"xy", "a\"b", "__");"#####
        );
        let out = laid_out(stmt, "", &f).unwrap();
        assert_eq!(out, stmt.replace(", ", ",\n    "));
        // the raw string looks like a stand-in but is not one of the statement's literals
        let other = r#####"f("ключ", r"___", b"xy", "a\"b", "ef");"#####;
        assert_eq!(
            laid_out(other, "", &f).unwrap(),
            other.replace(", ", ",\n    ")
        );
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn a_layout_that_moves_or_rewrites_a_literal_is_not_used_for_another_statement() {
        let calls = Cell::new(0);
        // swaps the two arguments: the stand-ins come back in another order of widths
        let swap = |s: &str| {
            calls.set(calls.get() + 1);
            let (head, rest) = s.split_once('(')?;
            let (args, tail) = rest.split_once(')')?;
            let (x, y) = args.split_once(", ")?;
            Some(format!("{head}({y}, {x}){tail}"))
        };
        assert_eq!(
            laid_out(r#"f("ab", "c");"#, "", swap).unwrap(),
            r#"f("c", "ab");"#
        );
        assert_eq!(calls.get(), 2);
        // rewrites every literal: never put back
        let rewrite = |_: &str| Some(r#"f("zz", "z");"#.to_string());
        assert_eq!(
            laid_out(r#"f("xy", "w");"#, "", rewrite).unwrap(),
            r#"f("zz", "z");"#
        );
        // no layout is remembered as none
        let none = |_: &str| None;
        assert_eq!(laid_out(r#"g("q");"#, "", none), None);
        assert_eq!(laid_out(r#"g("r");"#, "", |_: &str| Some("x".into())), None);
    }
}
