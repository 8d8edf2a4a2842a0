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
use std::collections::VecDeque;

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

/// An identifier, as far as the estimate cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Word {
    /// `else` or `as`: nests like [`Word::Nesting`], and continues the statement before it.
    Continues,
    /// Starts or continues a nested form ([`is_nesting_keyword`]).
    Nesting,
    Other,
}

impl Word {
    fn of(word: &str) -> Word {
        match word {
            "else" | "as" => Word::Continues,
            w if is_nesting_keyword(w) => Word::Nesting,
            _ => Word::Other,
        }
    }
}

/// A token of a flattened token tree, at position `P`: the estimate reads the same sequence
/// from `proc_macro2` token trees ([`check`]) and from the lexer over the text
/// ([`lex_check`]).
#[derive(Debug, Clone, Copy)]
enum Tok<P> {
    Open(Delimiter, P),
    Close,
    /// A punctuation character, and whether punctuation follows it with nothing between.
    Punct(char, bool, P),
    Ident(Word, P),
    Literal,
}

/// The state of one bracket group.
struct Frame {
    /// Depth at the opening of this group.
    base: usize,
    /// Counted tokens in the current segment.
    seg: usize,
    nesting: usize,
    /// Inside a macro body: only brackets count.
    raw: bool,
    prev: Prev,
}

/// Whether the next token is the punctuation character `c`.
fn punct_next<P>(tokens: &mut std::iter::Peekable<impl Iterator<Item = Tok<P>>>, c: char) -> bool {
    matches!(tokens.peek(), Some(Tok::Punct(n, _, _)) if *n == c)
}

/// The depth estimate over a flattened token sequence: where it first passes a limit, and
/// whether that is the bracket limit (else the depth limit).
fn estimate<P: Copy>(tokens: impl Iterator<Item = Tok<P>>) -> Option<(P, bool)> {
    let mut tokens = tokens.peekable();
    let mut stack = vec![Frame {
        base: 0,
        seg: 0,
        nesting: 0,
        raw: false,
        prev: Prev::Other,
    }];
    while let Some(tok) = tokens.next() {
        let depth = stack.len();
        let frame = stack.last_mut()?;
        match tok {
            Tok::Close => {
                if depth > 1 {
                    stack.pop();
                }
            }
            Tok::Open(delimiter, at) => {
                let nesting = frame.nesting + 1;
                if nesting > MAX_NESTING {
                    return Some((at, true));
                }
                let macro_body = frame.prev == Prev::Bang;
                let attribute = frame.prev == Prev::Hash;
                if !frame.raw && !attribute {
                    frame.seg += 1;
                }
                let base = frame.base + frame.seg + 1;
                if !frame.raw && base > MAX_DEPTH {
                    return Some((at, false));
                }
                // a `{ .. }` block, struct or macro body may end an item or statement
                frame.prev = if delimiter == Delimiter::Brace {
                    Prev::Brace
                } else {
                    Prev::Other
                };
                let raw = frame.raw || macro_body;
                stack.push(Frame {
                    base,
                    seg: 0,
                    nesting,
                    raw,
                    prev: Prev::Other,
                });
            }
            _ if frame.raw => {}
            Tok::Punct(c, joint, at) => {
                let after_brace = frame.prev == Prev::Brace;
                let after_hash = frame.prev == Prev::Hash;
                let after_ident = frame.prev == Prev::Ident;
                frame.prev = Prev::Other;
                match c {
                    ',' | ';' => {
                        frame.seg = 0;
                        continue;
                    }
                    '=' if joint && punct_next(&mut tokens, '>') => {
                        tokens.next();
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
                    '!' if after_ident && !punct_next(&mut tokens, '=') => {
                        frame.prev = Prev::Bang;
                    }
                    // a lifetime's quote
                    '\'' => continue,
                    _ => {}
                }
                frame.seg += 1;
                if frame.base + frame.seg > MAX_DEPTH {
                    return Some((at, false));
                }
            }
            Tok::Ident(word, at) => {
                if frame.prev == Prev::Brace && word != Word::Continues {
                    frame.seg = 0;
                }
                // `macro_rules! name { .. }`: the body follows the name
                let keep_bang = frame.prev == Prev::Bang;
                frame.prev = if keep_bang { Prev::Bang } else { Prev::Ident };
                if word != Word::Other {
                    frame.seg += 1;
                    if frame.base + frame.seg > MAX_DEPTH {
                        return Some((at, false));
                    }
                }
            }
            Tok::Literal => {
                frame.prev = Prev::Other;
            }
        }
    }
    None
}

/// Check a token stream; `None` when it is shallow enough to parse and walk.
pub fn check(tokens: TokenStream) -> Option<Excess> {
    let mut stack = vec![tokens.into_iter()];
    let flat = std::iter::from_fn(move || {
        let top = stack.last_mut()?;
        let Some(tt) = top.next() else {
            stack.pop();
            return (!stack.is_empty()).then_some(Tok::Close);
        };
        Some(match tt {
            TokenTree::Group(g) => {
                stack.push(g.stream().into_iter());
                Tok::Open(g.delimiter(), g.span_open())
            }
            TokenTree::Punct(p) => Tok::Punct(p.as_char(), p.spacing() == Spacing::Joint, p.span()),
            TokenTree::Ident(i) => Tok::Ident(Word::of(&i.to_string()), i.span()),
            TokenTree::Literal(_) => Tok::Literal,
        })
    });
    estimate(flat).map(|(at, brackets)| {
        if brackets {
            Excess::Brackets(at)
        } else {
            Excess::Depth(at)
        }
    })
}

/// [`check`] over a Rust text read by the lexer, without building token trees (a long chain's
/// trees take a hundred times its text): the byte offset of the token the check refuses, and
/// whether brackets nest too deep there (else the depth estimate passes [`MAX_DEPTH`]); and the
/// number of tokens the text's token trees hold (a bracket group counting one), counted up to
/// the token refused. A doc comment counts as the `#[doc = ".."]` attribute the token trees
/// hold in its place, a run of line doc comments of one style as one (a large file's are
/// folded into one, see `docs`).
pub fn lex_check(text: &str) -> (Option<(usize, bool)>, usize) {
    use ra_ap_rustc_lexer::{tokenize, DocStyle, FrontmatterAllowed, TokenKind as K};
    let mut at = 0usize;
    let mut pending: VecDeque<Tok<usize>> = VecDeque::new();
    let mut lexed = tokenize(text, FrontmatterAllowed::No).peekable();
    // tokens of line doc comments that a large file's folding merges into the run's first
    // (see `docs`): not counted
    let folded = std::cell::Cell::new(0usize);
    let mut run: Option<DocStyle> = None;
    let flat = std::iter::from_fn(|| loop {
        if let Some(t) = pending.pop_front() {
            return Some(t);
        }
        let t = lexed.next()?;
        let start = at;
        at += t.len as usize;
        let line_doc = match t.kind {
            K::LineComment { doc_style } => doc_style,
            _ => None,
        };
        match t.kind {
            K::Whitespace => {}
            _ => {
                if line_doc.is_some() && line_doc == run {
                    let inner = line_doc == Some(DocStyle::Inner);
                    folded.set(folded.get() + 5 + usize::from(inner));
                }
                run = line_doc;
            }
        }
        match t.kind {
            K::Whitespace | K::Frontmatter { .. } => {}
            K::LineComment { doc_style } | K::BlockComment { doc_style, .. } => {
                if let Some(style) = doc_style {
                    pending.push_back(Tok::Punct('#', false, start));
                    if style == DocStyle::Inner {
                        pending.push_back(Tok::Punct('!', false, start));
                    }
                    pending.push_back(Tok::Open(Delimiter::Bracket, start));
                    pending.push_back(Tok::Ident(Word::Other, start));
                    pending.push_back(Tok::Punct('=', false, start));
                    pending.push_back(Tok::Literal);
                    pending.push_back(Tok::Close);
                }
            }
            K::OpenParen => return Some(Tok::Open(Delimiter::Parenthesis, start)),
            K::OpenBrace => return Some(Tok::Open(Delimiter::Brace, start)),
            K::OpenBracket => return Some(Tok::Open(Delimiter::Bracket, start)),
            K::CloseParen | K::CloseBrace | K::CloseBracket => return Some(Tok::Close),
            K::Ident | K::RawIdent | K::InvalidIdent => {
                return Some(Tok::Ident(Word::of(&text[start..at]), start))
            }
            K::Lifetime { .. } | K::RawLifetime | K::UnknownPrefixLifetime => {
                pending.push_back(Tok::Ident(Word::Other, start));
                return Some(Tok::Punct('\'', true, start));
            }
            K::Literal { .. } | K::UnknownPrefix | K::GuardedStrPrefix => {
                return Some(Tok::Literal)
            }
            kind => {
                // joined when punctuation follows with nothing between
                let joint = lexed.peek().is_some_and(|n| punct_char(n.kind).is_some());
                // an unknown character: the tokenizer refuses the file later
                let c = punct_char(kind).unwrap_or('?');
                return Some(Tok::Punct(c, joint, start));
            }
        }
    });
    let mut count = 0usize;
    let flat = flat.inspect(|t| count += usize::from(!matches!(t, Tok::Close)));
    let excess = estimate(flat);
    (excess, count.saturating_sub(folded.get()))
}

/// The character of a one-character punctuation token.
fn punct_char(kind: ra_ap_rustc_lexer::TokenKind) -> Option<char> {
    use ra_ap_rustc_lexer::TokenKind as K;
    Some(match kind {
        K::Semi => ';',
        K::Comma => ',',
        K::Dot => '.',
        K::At => '@',
        K::Pound => '#',
        K::Tilde => '~',
        K::Question => '?',
        K::Colon => ':',
        K::Dollar => '$',
        K::Eq => '=',
        K::Bang => '!',
        K::Lt => '<',
        K::Gt => '>',
        K::Minus => '-',
        K::And => '&',
        K::Or => '|',
        K::Plus => '+',
        K::Star => '*',
        K::Slash => '/',
        K::Caret => '^',
        K::Percent => '%',
        _ => return None,
    })
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
            format!("fn f() {{ let _ = x{}; }}", " as u8".repeat(n)),
            format!("fn f() {{ let _ = {{ 0 }}{}; }}", " as u8".repeat(n)),
            format!("fn f() {{ {}; }}", "return ".repeat(n)),
            format!("fn f() {{ let _ = f{}; }}", "()".repeat(n)),
            format!("fn f() {{ if a {{}}{} }}", " else if a {}".repeat(n)),
        ] {
            assert!(deep(&text), "{}", &text[..40]);
        }
    }

    /// Where the token check refuses `text` (byte offset, brackets or depth), as a text check
    /// reports it.
    fn from_tokens(text: &str) -> Option<(usize, bool)> {
        let tokens: TokenStream = text.parse().ok()?;
        let (span, brackets) = match check(tokens)? {
            Excess::Brackets(span) => (span, true),
            Excess::Depth(span) => (span, false),
        };
        let s = span.start();
        let index = locklint_ir::source::LineIndex::new(text);
        Some((index.offset(text, s.line, s.column), brackets))
    }

    #[test]
    fn the_text_check_refuses_what_the_token_check_refuses_where_it_does() {
        let n = MAX_DEPTH + 1;
        let refused = [
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
            format!("fn f() {{ let _ = {}0; }}", "|x| ".repeat(n)),
            format!("fn f() {{ let _ = {}0; }}", "move |x| ".repeat(n)),
            format!("type T = {}u8;", "&'a mut ".repeat(n)),
            format!("type T = {}u8;", "*const ".repeat(n)),
            format!("type T = {}();", "fn() -> ".repeat(n)),
            format!("type T = {}u8{};", "Vec<".repeat(n), ">".repeat(n)),
            format!("fn f() {{ {}0; }}", "a = ".repeat(n)),
            format!("fn f() {{ let _ = x{}; }}", " as u8".repeat(n)),
            format!("fn f() {{ let _ = {{ 0 }}{}; }}", " as u8".repeat(n)),
            format!("fn f() {{ {}0; }}", "x += ".repeat(n)),
            format!("fn f() {{ {}; }}", "return ".repeat(n)),
            format!("fn f() {{ let _ = f{}; }}", "()".repeat(n)),
            format!("fn f() {{ let _ = a{}; }}", ".b".repeat(n)),
            format!("fn f() {{ let _ = a{}; }}", "[0]".repeat(n)),
            format!("fn f() {{ let _ = a{}; }}", "!= b".repeat(n)),
            format!("fn f() {{ if a {{}}{} }}", " else if a {}".repeat(n)),
            format!("fn f() {{ let _ = {}0; }}", "/// d\n|x| ".repeat(n)),
            format!(
                "fn f() {{ let _ = {}/** d */ 0; }}",
                "|x| ".repeat(MAX_DEPTH - 1)
            ),
            format!(
                "fn f() {{ {}0{} }}",
                "'a: loop { break 'a ".repeat(300),
                "}".repeat(300)
            ),
            format!("fn f<'a>() {{ let _ = {}0; }}", "&'a ".repeat(n)),
        ];
        for text in &refused {
            let expected = from_tokens(text);
            assert!(expected.is_some(), "{}", &text[..60.min(text.len())]);
            assert_eq!(
                lex_check(text).0,
                expected,
                "{}",
                &text[..60.min(text.len())]
            );
        }
    }

    #[test]
    fn the_text_check_passes_what_the_token_check_passes() {
        let mut texts = vec![
            "//! inner\n/** outer */\n/*! inner */\nfn f<'a>(x: &'a u8) -> bool { x != &0 }"
                .to_string(),
            "//! line\n".repeat(20_000) + "fn main() {}",
            "macro_rules! m { () => {} }\nm! { a = = = b }\n".repeat(200),
            format!(
                "fn f() {{ {} }}",
                "let a = b.c(d)?.e[0] as u8;\n".repeat(3000)
            ),
        ];
        // every Rust file of the repository
        let mut dirs = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let (path, name) = (entry.path(), entry.file_name());
                let name = name.to_string_lossy();
                if path.is_dir() && name != "target" && !name.starts_with('.') {
                    dirs.push(path);
                } else if name.ends_with(".rs") {
                    texts.extend(std::fs::read_to_string(&path));
                }
            }
        }
        assert!(texts.len() > 100, "the repository's Rust files are read");
        for text in &texts {
            if text.parse::<TokenStream>().is_ok() {
                assert_eq!(
                    lex_check(text).0,
                    from_tokens(text),
                    "{}",
                    &text[..60.min(text.len())]
                );
            }
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
