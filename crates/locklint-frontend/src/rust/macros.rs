//! Where a macro invocation's body is, in token trees: the group after `name!` (`m!(..)`,
//! `path::m! {..}`) or after `macro_rules! name`, where `name` is not a keyword: `if !(a)`,
//! `while !{ .. }`, `return !(x)` are negations. Macro bodies are tokens the parser keeps as
//! written: the walker reads some of them itself, nothing takes blocks or attributes out of
//! them, and their tokens build no nodes of the syntax tree.

use proc_macro2::TokenTree;

/// Whether the group that follows `before` (the tokens before it at its level, in order) is a
/// macro invocation's body.
pub fn is_body_after(before: &[TokenTree]) -> bool {
    let at = |back: usize| before.len().checked_sub(back).and_then(|j| before.get(j));
    let bang =
        |tt: Option<&TokenTree>| matches!(tt, Some(TokenTree::Punct(p)) if p.as_char() == '!');
    match (at(3), at(2), at(1)) {
        (_, Some(TokenTree::Ident(name)), b) if bang(b) => can_name_a_macro(&name.to_string()),
        (Some(TokenTree::Ident(m)), b, Some(TokenTree::Ident(_))) if bang(b) => m == "macro_rules",
        _ => false,
    }
}

/// Whether a word before `!` can be a macro's name: not a keyword that an expression with a
/// leading `!` may follow.
pub fn can_name_a_macro(word: &str) -> bool {
    !matches!(
        word,
        "as" | "async"
            | "await"
            | "box"
            | "break"
            | "const"
            | "continue"
            | "dyn"
            | "else"
            | "for"
            | "if"
            | "impl"
            | "in"
            | "let"
            | "loop"
            | "match"
            | "move"
            | "mut"
            | "raw"
            | "ref"
            | "return"
            | "static"
            | "try"
            | "unsafe"
            | "where"
            | "while"
            | "yield"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proc_macro2::TokenStream;

    /// Whether the last group of `text` is a macro's body.
    fn last_group_is_body(text: &str) -> bool {
        let tokens: Vec<TokenTree> = text.parse::<TokenStream>().unwrap().into_iter().collect();
        let at = tokens
            .iter()
            .rposition(|t| matches!(t, TokenTree::Group(_)))
            .unwrap();
        is_body_after(&tokens[..at])
    }

    #[test]
    fn invocations_are_macro_bodies_and_negations_are_not() {
        for body in [
            "m!(a)",
            "x = path::m! { a }",
            "macro_rules! r { () => {} }",
            "vec![1]",
        ] {
            assert!(last_group_is_body(body), "{body}");
        }
        for not in [
            "if !(a)",
            "while !{ a }",
            "return !(x)",
            "let b = !(x)",
            "x != (y)",
            "f(a)",
            "#[attr]",
            "match !(a)",
        ] {
            assert!(!last_group_is_body(not), "{not}");
        }
    }
}
