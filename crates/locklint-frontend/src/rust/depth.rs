//! A token-level estimate of how deep the recursive parser and the walkers would go, so that
//! pathological nesting is refused before `syn` sees it.
//!
//! `syn` recurses once per prefix operator (`!x`, `-x`, `*x`, `&x`, `&mut x`), closure head
//! (`|x|`, `move |x|`), value keyword (`return x`, `break x`, `..x`), right-associative
//! operator (`a = b = c`), `else if`, type constructor (`&T`, `*const T`, `fn() -> T`,
//! `impl Fn() -> T`, `A<B<C>>`) and bracket; left-associative chains (`a + b + c`,
//! `x.f().g()`, `x as T as U`, `x??`, `f()()`) are parsed in a loop but build a tree as deep as
//! the chain, which the tree's own recursive code (drop, clone, printing) walks. The estimate
//! counts, within one segment (the tokens between two `,`, `;` or `=>` at the same bracket
//! level, or between two items or block-ended statements), every operator character, every
//! keyword that can start or continue a nested form and every bracket group; a bracket's
//! content starts from the depth at its opening. That count bounds both the parser's
//! recursion and the tree's depth from above, up to a small factor.
//!
//! Macro bodies are token trees that `syn` does not parse as part of the file: only their
//! bracket nesting counts at file level. The walker parses some macro bodies itself
//! (`format!` arguments, block-like bodies) and checks each first with [`check`].

use proc_macro2::{Delimiter, Spacing, Span, TokenStream, TokenTree};

/// Deeper bracket nesting than this is not analysed (real code stays far below it).
pub const MAX_NESTING: usize = 256;
/// A larger depth estimate than this is not analysed (real code stays far below it).
pub const MAX_DEPTH: usize = 1500;

/// Why a token stream is refused, and where.
#[derive(Debug, Clone, Copy)]
pub enum Excess {
    /// Brackets nest more than [`MAX_NESTING`] levels at this opening bracket.
    Brackets(Span),
    /// The depth estimate passes [`MAX_DEPTH`] at this token.
    Depth(Span),
}

/// Keywords that start or continue a form the parser handles by recursion (or that makes a
/// chain one level deeper).
fn is_nesting_keyword(word: &str) -> bool {
    matches!(
        word,
        "return"
            | "break"
            | "yield"
            | "become"
            | "move"
            | "static"
            | "async"
            | "as"
            | "box"
            | "impl"
            | "dyn"
            | "fn"
            | "const"
            | "mut"
            | "raw"
            | "else"
            | "if"
            | "let"
            | "in"
            | "for"
            | "while"
            | "loop"
            | "match"
            | "unsafe"
            | "try"
            | "do"
    )
}

/// What the previous token was, as far as the estimate cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prev {
    Other,
    /// An identifier: a following `!` makes a macro invocation.
    Ident,
    /// `name!` or `macro_rules! name`: the next bracket group is a macro body.
    Bang,
    /// A `{ .. }` group: a following item or statement starts a new segment.
    Brace,
    /// `#` or `#!` of an attribute.
    Hash,
}

struct Frame {
    tokens: std::iter::Peekable<proc_macro2::token_stream::IntoIter>,
    /// Depth at the opening of this group.
    base: usize,
    /// Counted tokens in the current segment.
    seg: usize,
    nesting: usize,
    /// Inside a macro body: only brackets count.
    raw: bool,
    prev: Prev,
}

/// The byte offset of the first opening bracket nested more than [`MAX_NESTING`] levels deep
/// in a Rust text (strings, characters and comments skipped by the lexer), if any: the
/// bracket [`check`] refuses, found without building token trees.
pub fn bracket_excess(text: &str) -> Option<usize> {
    use ra_ap_rustc_lexer::{tokenize, FrontmatterAllowed, TokenKind as K};
    let mut depth = 0usize;
    let mut at = 0usize;
    for t in tokenize(text, FrontmatterAllowed::No) {
        match t.kind {
            K::OpenParen | K::OpenBrace | K::OpenBracket => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(at);
                }
            }
            K::CloseParen | K::CloseBrace | K::CloseBracket => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += t.len as usize;
    }
    None
}

/// Check a token stream; `None` when it is shallow enough to parse and walk.
pub fn check(tokens: TokenStream) -> Option<Excess> {
    let mut stack = vec![Frame {
        tokens: tokens.into_iter().peekable(),
        base: 0,
        seg: 0,
        nesting: 0,
        raw: false,
        prev: Prev::Other,
    }];
    while let Some(frame) = stack.last_mut() {
        let Some(tt) = frame.tokens.next() else {
            stack.pop();
            continue;
        };
        match tt {
            TokenTree::Group(g) => {
                let nesting = frame.nesting + 1;
                if nesting > MAX_NESTING {
                    return Some(Excess::Brackets(g.span_open()));
                }
                let macro_body = frame.prev == Prev::Bang;
                let attribute = frame.prev == Prev::Hash;
                if !frame.raw && !attribute {
                    frame.seg += 1;
                }
                let base = frame.base + frame.seg + 1;
                if !frame.raw && base > MAX_DEPTH {
                    return Some(Excess::Depth(g.span_open()));
                }
                // a `{ .. }` block, struct or macro body may end an item or statement
                frame.prev = if g.delimiter() == Delimiter::Brace {
                    Prev::Brace
                } else {
                    Prev::Other
                };
                let raw = frame.raw || macro_body;
                stack.push(Frame {
                    tokens: g.stream().into_iter().peekable(),
                    base,
                    seg: 0,
                    nesting,
                    raw,
                    prev: Prev::Other,
                });
            }
            _ if frame.raw => {}
            TokenTree::Punct(p) => {
                let c = p.as_char();
                let after_brace = frame.prev == Prev::Brace;
                let after_hash = frame.prev == Prev::Hash;
                let after_ident = frame.prev == Prev::Ident;
                frame.prev = Prev::Other;
                match c {
                    ',' | ';' => {
                        frame.seg = 0;
                        continue;
                    }
                    '=' if p.spacing() == Spacing::Joint
                        && matches!(frame.tokens.peek(), Some(TokenTree::Punct(n)) if n.as_char() == '>') =>
                    {
                        frame.tokens.next();
                        frame.seg = 0;
                        continue;
                    }
                    '#' => {
                        if after_brace {
                            frame.seg = 0;
                        }
                        frame.prev = Prev::Hash;
                        continue;
                    }
                    '!' if after_hash => {
                        frame.prev = Prev::Hash;
                        continue;
                    }
                    '!' if after_ident
                        && !matches!(frame.tokens.peek(), Some(TokenTree::Punct(n)) if n.as_char() == '=') =>
                    {
                        frame.prev = Prev::Bang;
                    }
                    // a lifetime's quote
                    '\'' => continue,
                    _ => {}
                }
                frame.seg += 1;
                if frame.base + frame.seg > MAX_DEPTH {
                    return Some(Excess::Depth(p.span()));
                }
            }
            TokenTree::Ident(i) => {
                let word = i.to_string();
                if frame.prev == Prev::Brace && word != "else" && word != "as" {
                    frame.seg = 0;
                }
                // `macro_rules! name { .. }`: the body follows the name
                let keep_bang = frame.prev == Prev::Bang;
                frame.prev = if keep_bang { Prev::Bang } else { Prev::Ident };
                if is_nesting_keyword(&word) {
                    frame.seg += 1;
                    if frame.base + frame.seg > MAX_DEPTH {
                        return Some(Excess::Depth(i.span()));
                    }
                }
            }
            TokenTree::Literal(_) => {
                frame.prev = Prev::Other;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deep(text: &str) -> bool {
        check(text.parse().expect("lexes")).is_some()
    }

    #[test]
    fn real_code_passes() {
        let mut file = String::new();
        for i in 0..2000 {
            file.push_str(&format!(
                "/// doc\n#[inline]\npub fn f{i}(x: &mut Vec<Option<u8>>) -> impl Fn() -> u8 {{\n    if x.is_empty() {{ return || 0; }} else if x.len() > 2 {{ x.push(None); }}\n    match x.pop() {{ Some(_) => {{}} None => {{}} }}\n    let _v = vec![1, 2, 3].iter().map(|y| y + 1).filter(|y| *y > 1).count();\n    move || 1\n}}\n"
            ));
        }
        assert!(!deep(&file));
        let html = format!(
            "view! {{ {} }}",
            "<div> <span> text </span> </div> ".repeat(5000)
        );
        assert!(!deep(&html));
        let docs = "//! line\n".repeat(20_000) + "fn main() {}";
        assert!(!deep(&docs));
        let macros =
            "macro_rules! m { () => {} }\nthread_local! { static A: u8 = 0; }\n".repeat(5000);
        assert!(!deep(&macros));
    }

    #[test]
    fn chains_without_brackets_are_refused() {
        let n = MAX_DEPTH + 1;
        for text in [
            format!("fn f() {{ let _ = {}0; }}", "|x| ".repeat(n)),
            format!("type T = {}u8;", "&'a mut ".repeat(n)),
            format!("type T = {}();", "fn() -> ".repeat(n)),
            format!("type T = {}u8{};", "Vec<".repeat(n), ">".repeat(n)),
            format!("fn f() {{ {}0; }}", "a = ".repeat(n)),
            format!("fn f() {{ {}; }}", "return ".repeat(n)),
            format!("fn f() {{ let _ = f{}; }}", "()".repeat(n)),
            format!("fn f() {{ if a {{}}{} }}", " else if a {}".repeat(n)),
        ] {
            assert!(deep(&text), "{}", &text[..40]);
        }
    }

    #[test]
    fn brackets_past_the_limit_are_found_in_the_text_where_the_tokens_find_them() {
        for text in [
            format!(
                "fn f() {{ {}0{} }}",
                "(".repeat(MAX_NESTING + 5),
                ")".repeat(MAX_NESTING + 5)
            ),
            format!(
                "// {}\nfn f() {{ let s = \"{}\"; {}1{} }}",
                "{".repeat(400),
                "}".repeat(400),
                "[".repeat(MAX_NESTING),
                "]".repeat(MAX_NESTING)
            ),
            format!(
                "const S: &str = r#\"{}\"#; fn f() {{ {}x{} }}",
                "(".repeat(300),
                "{".repeat(MAX_NESTING + 1),
                "}".repeat(MAX_NESTING + 1)
            ),
        ] {
            let tokens: TokenStream = text.parse().unwrap();
            let from_tokens = match check(tokens) {
                Some(Excess::Brackets(span)) => {
                    let s = span.start();
                    Some(locklint_ir::source::LineIndex::new(&text).offset(&text, s.line, s.column))
                }
                _ => None,
            };
            assert!(from_tokens.is_some(), "{text}");
            assert_eq!(bracket_excess(&text), from_tokens, "{text}");
        }
    }

    #[test]
    fn brackets_are_refused_past_the_nesting_limit() {
        let text = format!(
            "{}{}",
            "(".repeat(MAX_NESTING + 1),
            ")".repeat(MAX_NESTING + 1)
        );
        assert!(matches!(
            check(text.parse().unwrap()),
            Some(Excess::Brackets(_))
        ));
    }
}
