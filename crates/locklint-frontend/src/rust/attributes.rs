//! Attributes of statements and expressions, left out of function bodies before they are
//! parsed. The walker reads the attributes of items only (`#[test]`, `#[cfg(test)]`, an ORM's
//! table name); those of a `let`, a block or an expression (`#[allow(..)]`,
//! `#[rustfmt::skip]`) tell it nothing, and the parser keeps a syntax node per attribute: a
//! statement carrying tens of thousands of them would hold a tree a hundred times its size.
//! Every body is parsed without them, whether the file is parsed whole or a large body one
//! statement at a time, so the two give the same result.
//!
//! Kept: attributes followed by an item (or by a keyword that may start one: `const`,
//! `unsafe`, `async`), inner attributes (`#![..]`), everything inside a macro's arguments
//! (whose tokens are the macro's to read), and an attribute with nothing after it (the syntax
//! error stays the file's).

use proc_macro2::{Delimiter, Group, TokenStream, TokenTree};

/// Keywords that may start an item: the attributes before them are kept.
const ITEM_START: &[&str] = &[
    "fn",
    "struct",
    "enum",
    "union",
    "impl",
    "mod",
    "use",
    "const",
    "static",
    "trait",
    "type",
    "extern",
    "pub",
    "macro_rules",
    "unsafe",
    "async",
    "auto",
    "default",
];

/// `body` (a function's brace group) without the outer attributes of its statements and
/// expressions; `None` when it has none. `text` is the text `body` was lexed from: a body whose
/// text can hold no attribute (no `#`, no doc comment, which the lexer makes one) is not
/// looked at.
pub fn without_expression_attributes(body: &Group, text: &str) -> Option<Group> {
    let range = body.span().byte_range();
    if !may_hold_attributes(text.get(range)?.as_bytes()) {
        return None;
    }
    let stream = stripped(body.stream())?;
    let mut out = Group::new(body.delimiter(), stream);
    out.set_span(body.span());
    Some(out)
}

/// Whether `text` holds a `#` or something that may open a doc comment (`///`, `//!`, `/**`,
/// `/*!`).
fn may_hold_attributes(text: &[u8]) -> bool {
    memchr::memchr2_iter(b'#', b'/', text).any(|i| {
        text[i] == b'#'
            || matches!(
                (text.get(i + 1), text.get(i + 2)),
                (Some(b'/'), Some(b'/' | b'!')) | (Some(b'*'), Some(b'*' | b'!'))
            )
    })
}

/// `stream` without the attributes this module leaves out, or `None` when nothing is.
fn stripped(stream: TokenStream) -> Option<TokenStream> {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    // created at the first change, with the tokens before it
    let mut out: Option<Vec<TokenTree>> = None;
    let mut i = 0;
    while i < tokens.len() {
        if outer_attribute_at(&tokens, i) {
            let mut end = i;
            while outer_attribute_at(&tokens, end) {
                end += 2;
            }
            if end < tokens.len() && !starts_item(&tokens[end]) {
                out.get_or_insert_with(|| tokens[..i].to_vec());
            } else if let Some(out) = out.as_mut() {
                out.extend_from_slice(&tokens[i..end]);
            }
            i = end;
            continue;
        }
        let inner = match &tokens[i] {
            TokenTree::Group(g) if !macro_arguments(&tokens, i) => stripped(g.stream()).map(|s| {
                let mut inner = Group::new(g.delimiter(), s);
                inner.set_span(g.span());
                TokenTree::Group(inner)
            }),
            _ => None,
        };
        match (inner, out.as_mut()) {
            (Some(tt), Some(out)) => out.push(tt),
            (Some(tt), None) => {
                let mut v = tokens[..i].to_vec();
                v.push(tt);
                out = Some(v);
            }
            (None, Some(out)) => out.push(tokens[i].clone()),
            (None, None) => {}
        }
        i += 1;
    }
    out.map(|v| v.into_iter().collect())
}

/// `#` followed by a bracket group: an outer attribute (inner ones have `!` between).
fn outer_attribute_at(tokens: &[TokenTree], i: usize) -> bool {
    matches!(
        (tokens.get(i), tokens.get(i + 1)),
        (Some(TokenTree::Punct(p)), Some(TokenTree::Group(g)))
            if p.as_char() == '#' && g.delimiter() == Delimiter::Bracket
    )
}

fn starts_item(tt: &TokenTree) -> bool {
    matches!(tt, TokenTree::Ident(i) if ITEM_START.iter().any(|k| i == k))
}

/// Whether the group at `i` holds a macro's arguments (`name!(..)`, `path::name! {..}`,
/// `macro_rules! name {..}`).
fn macro_arguments(tokens: &[TokenTree], i: usize) -> bool {
    super::macros::is_body_after(&tokens[..i.min(tokens.len())])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body of the first function of `src`, stripped, printed as tokens.
    fn strip(src: &str) -> Option<String> {
        let tokens: TokenStream = src.parse().unwrap();
        let body = tokens
            .into_iter()
            .find_map(|tt| match tt {
                TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => Some(g),
                _ => None,
            })
            .unwrap();
        let out = without_expression_attributes(&body, src);
        proc_macro2::extra::invalidate_current_thread_spans();
        out.map(|g| g.stream().to_string())
    }

    #[test]
    fn attributes_of_statements_and_expressions_are_left_out() {
        let out = strip("fn f() { #[allow(unused)] let a = #[rustfmt::skip] #[x] 1; }").unwrap();
        assert_eq!(out, "let a = 1 ;");
    }

    #[test]
    fn attributes_in_nested_blocks_and_arguments_are_left_out() {
        let out = strip("fn f() { if a { #[allow(x)] g(#[y] 1, [#[z] 2]); } }").unwrap();
        assert_eq!(out, "if a { g (1 , [2]) ; }");
    }

    #[test]
    fn item_attributes_are_kept() {
        let src = "fn f() { #[allow(x)] let a = 1; #[cfg(test)] mod m {} #[derive(Debug)] pub struct S; #[test] fn t() {} }";
        let out = strip(src).unwrap();
        assert_eq!(
            out,
            "let a = 1 ; # [cfg (test)] mod m { } # [derive (Debug)] pub struct S ; # [test] fn t () { }"
        );
    }

    #[test]
    fn macro_arguments_inner_attributes_and_dangling_attributes_are_kept() {
        assert_eq!(strip("fn f() { m!(#[a] x); n! { #[b] y } }"), None);
        assert_eq!(strip("fn f() { #![allow(x)] g(); }"), None);
        assert_eq!(strip("fn f() { g(); #[a] }"), None);
        let rules = "fn f() { macro_rules! m { ($(#[$a:meta])*) => {} } }";
        assert_eq!(strip(rules), None);
    }

    #[test]
    fn a_negation_before_a_group_is_not_a_macro() {
        let out = strip("fn f() { if !(a) { #[allow(x)] g(); } }").unwrap();
        assert_eq!(out, "if ! (a) { g () ; }");
    }

    #[test]
    fn a_body_without_a_hash_is_not_read() {
        assert_eq!(strip("fn f() { let a = \"no attributes\"; }"), None);
        assert_eq!(strip("fn f() { let a = \"#[x]\"; }"), None);
    }

    #[test]
    fn doc_comments_of_statements_are_attributes_left_out() {
        let out = strip("fn f() {\n    /// the count\n    let a = 1;\n}").unwrap();
        assert_eq!(out, "let a = 1 ;");
        let out = strip("fn f() { /** the count */ let a = 1 / 2; }").unwrap();
        assert_eq!(out, "let a = 1 / 2 ;");
        assert!(!may_hold_attributes(b"let a = 1 / 2; // note"));
    }
}
