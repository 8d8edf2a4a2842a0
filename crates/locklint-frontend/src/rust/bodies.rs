//! Large function bodies kept out of the file's syntax tree. Before the file is parsed, the
//! body of each function item (at file level and in `impl`, `trait` and `mod` blocks) that is
//! larger than [`LARGE_BODY`] is replaced by an empty block with the same span; the walker parses
//! it from its tokens when it walks that function, one statement at a time
//! (`FnWalker::run_streamed`). The syntax trees alive at any time are then those of the file's
//! items without their large bodies and of one statement, not the tree of the whole file, which
//! takes a hundred times the file's size.

use super::attributes;
use super::size;
use proc_macro2::{Delimiter, Group, Spacing, TokenStream, TokenTree};
use std::cell::RefCell;
use std::collections::HashMap;

/// Function bodies of more bytes than this are parsed when walked, one statement at a time;
/// files of more bytes than this are checked and have their doc comments folded on the text.
pub const LARGE_BODY: usize = 16 * 1024;

/// The bodies taken out of a file's tokens, and the blocks taken out of those bodies as they
/// are walked, by where they start (line, column).
#[derive(Default)]
pub struct Bodies {
    taken: RefCell<HashMap<(usize, usize), Group>>,
    /// Blocks taken out of the statements of the body being walked: kept until its walk ends,
    /// for what reads a statement's tokens (the names it mentions, its option words).
    blocks: RefCell<HashMap<(usize, usize), Group>>,
    /// Blocks of more bytes than this are taken out of the statements of a body taken out.
    min: usize,
}

impl Bodies {
    /// The tokens of a body taken out of the file, given the (empty) block parsed in its place.
    pub fn take(&self, block: &syn::Block) -> Option<Group> {
        if !block.stmts.is_empty() {
            return None;
        }
        let at = block.brace_token.span.open().start();
        let at = (at.line, at.column);
        let body = self.taken.borrow_mut().remove(&at);
        body.or_else(|| self.blocks.borrow().get(&at).cloned())
    }

    /// The tokens of a group as written: those of the block taken out when the group is the
    /// empty block left in its place.
    pub fn stream_of(&self, g: &Group) -> TokenStream {
        let stream = g.stream();
        if g.delimiter() != Delimiter::Brace || !stream.is_empty() {
            return stream;
        }
        let at = g.span_open().start();
        match self.blocks.borrow().get(&(at.line, at.column)) {
            Some(block) => block.stream(),
            None => stream,
        }
    }

    /// The walk of a body has ended: the blocks taken out of its statements are not needed.
    pub fn forget_blocks(&self) {
        self.blocks.borrow_mut().clear();
    }

    /// The tokens of a body (or block) taken out, with the blocks in it that are larger than
    /// the bodies taken out replaced by empty blocks of the same span, and taken out in turn:
    /// the statements of a body are parsed one at a time, and a block inside a statement
    /// (`if`, `else`, `loop`, `while`, `for`, `unsafe`, `async`, a block expression, a match
    /// arm's block) is parsed when it is walked, so a statement's tree never holds the tree
    /// of a large block.
    pub fn hollow_blocks(&self, body: &Group) -> Group {
        if !holds_large_group(&body.stream(), self.min) {
            // nothing to take out: the tokens as they are, not a copy
            return body.clone();
        }
        let stream = hollow_blocks(body.stream(), self.min, &mut self.blocks.borrow_mut());
        let mut out = Group::new(body.delimiter(), stream);
        out.set_span(body.span());
        out
    }
}

/// `tokens` (lexed from `text`) with every function body larger than `min` bytes replaced by
/// an empty block, and the bodies taken out; every body, taken or not, loses the attributes of
/// its statements and expressions (see `attributes`). Blocks larger than `limits.large_body`
/// are taken out of the statements of the bodies taken out.
pub fn hollow(
    tokens: TokenStream,
    min: usize,
    limits: &size::Limits,
    text: &str,
) -> (TokenStream, Bodies) {
    let bodies = Bodies {
        min: limits.large_body,
        ..Bodies::default()
    };
    let out = hollow_items(tokens, min, text, &mut bodies.taken.borrow_mut());
    (out, bodies)
}

/// What the tokens since the last item boundary are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Item {
    Unknown,
    /// After `fn`: the next brace group outside `<..>` is its body.
    Fn,
    /// After `impl`, `trait` or `mod`: the next brace group holds items.
    Container,
    /// After `=` (a `const`, `static` or `type` with a value): no body follows.
    Value,
}

fn hollow_items(
    tokens: TokenStream,
    min: usize,
    text: &str,
    taken: &mut HashMap<(usize, usize), Group>,
) -> TokenStream {
    let mut out = Vec::new();
    let mut item = Item::Unknown;
    // `<` .. `>` of generics and paths in a signature, which may hold braces of const arguments
    let mut angles = 0usize;
    let mut after_dash = false;
    for tt in tokens {
        let mut dash = false;
        match &tt {
            TokenTree::Ident(i) if item == Item::Unknown => {
                if i == "fn" {
                    item = Item::Fn;
                    angles = 0;
                } else if i == "impl" || i == "trait" || i == "mod" {
                    item = Item::Container;
                }
            }
            TokenTree::Punct(p) => match p.as_char() {
                '<' => angles += 1,
                '>' if !after_dash => angles = angles.saturating_sub(1),
                '-' => dash = p.spacing() == Spacing::Joint,
                '=' if angles == 0 && item != Item::Container => item = Item::Value,
                ';' => item = Item::Unknown,
                _ => {}
            },
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => match item {
                Item::Fn if angles == 0 => {
                    item = Item::Unknown;
                    let stripped = attributes::without_expression_attributes(g, text);
                    let g = stripped.as_ref().unwrap_or(g);
                    if large(g, min) && !starts_with_inner_attribute(g) {
                        let start = g.span_open().start();
                        let mut empty = Group::new(Delimiter::Brace, TokenStream::new());
                        empty.set_span(g.span());
                        taken.insert((start.line, start.column), g.clone());
                        out.push(TokenTree::Group(empty));
                        after_dash = false;
                        continue;
                    }
                    if let Some(g) = stripped {
                        out.push(TokenTree::Group(g));
                        after_dash = false;
                        continue;
                    }
                }
                Item::Container if angles == 0 => {
                    item = Item::Unknown;
                    let mut inner =
                        Group::new(Delimiter::Brace, hollow_items(g.stream(), min, text, taken));
                    inner.set_span(g.span());
                    out.push(TokenTree::Group(inner));
                    after_dash = false;
                    continue;
                }
                // a struct, enum or union body, a macro's, a value's or a const argument's
                _ => {}
            },
            _ => {}
        }
        after_dash = dash;
        out.push(tt);
    }
    out.into_iter().collect()
}

/// Keywords a block follows directly (`else {`, `loop {`, `unsafe {`, `async move {`, `try {`,
/// `const {`).
const BEFORE_BLOCK: &[&str] = &["else", "loop", "unsafe", "async", "move", "try", "const"];

/// Keywords after which the next brace group at the same level is the block of a condition or
/// a loop (`if c {`, `while let P = e {`, `for p in e {`).
const CONDITIONAL: &[&str] = &["if", "while", "for"];

/// Keywords of items whose brace group is kept whole: it is not a block of the body, and an
/// item's functions are walked from their own trees.
const ITEM: &[&str] = &[
    "fn",
    "impl",
    "trait",
    "mod",
    "struct",
    "enum",
    "union",
    "macro_rules",
    "use",
    "extern",
];

/// Where the tokens stand in a condition of `if`, `while` or `for`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Condition {
    None,
    /// After the keyword: its block is the next brace group, once `=` (after `let`) or `in`
    /// (after `for`) is passed.
    Open(Wait),
    /// Something in the condition can hold a brace group of its own (a `match`, a block, a
    /// nested condition): no block is taken until the statement ends.
    Unclear,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Nothing,
    /// `if let` / `while let`: the pattern (which may hold braces) ends at `=`.
    Equals,
    /// `for`: the pattern ends at `in`.
    In,
}

/// What a brace group that follows the tokens so far is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Braces {
    /// Whatever the previous tokens say.
    Unknown,
    /// An item's body: kept whole.
    Item,
    /// A `match`'s arms: not a block, but the arms' blocks are looked at.
    Arms,
}

/// `tokens` (a body's contents) with every block larger than `min` bytes replaced by an empty
/// block of the same span, and the blocks taken out. Blocks inside blocks taken out are not
/// looked at (they are when their block is walked); items in the body (nested `fn`, `impl`,
/// `mod`), macro invocations and attributes are kept whole. A brace group is taken only where
/// the grammar makes it a block: after `else`, `loop`, `unsafe`, `async`, `move`, `try` or
/// `const`; as the block of `if`/`while`/`for` whose condition holds no braces of its own; in
/// expression position (after `=`, `;`, `,`, `=>`, `|`, another block, or first).
fn hollow_blocks(
    tokens: TokenStream,
    min: usize,
    taken: &mut HashMap<(usize, usize), Group>,
) -> TokenStream {
    let mut out: Vec<TokenTree> = Vec::new();
    let mut condition = Condition::None;
    let mut braces = Braces::Unknown;
    for tt in tokens {
        match &tt {
            TokenTree::Ident(i) => {
                if ITEM.iter().any(|k| i == k) {
                    braces = Braces::Item;
                } else if i == "match" {
                    braces = Braces::Arms;
                    if matches!(condition, Condition::Open(_)) {
                        condition = Condition::Unclear;
                    }
                } else if CONDITIONAL.iter().any(|k| i == k) {
                    condition = match condition {
                        Condition::None if i == "for" => Condition::Open(Wait::In),
                        Condition::None => Condition::Open(Wait::Nothing),
                        _ => Condition::Unclear,
                    };
                } else if i == "let" && condition == Condition::Open(Wait::Nothing) {
                    condition = Condition::Open(Wait::Equals);
                } else if i == "in" && condition == Condition::Open(Wait::In) {
                    condition = Condition::Open(Wait::Nothing);
                } else if matches!(condition, Condition::Open(_))
                    && BEFORE_BLOCK.iter().any(|k| i == k)
                {
                    condition = Condition::Unclear;
                }
            }
            TokenTree::Punct(p) => match p.as_char() {
                '=' if p.spacing() == Spacing::Alone
                    && condition == Condition::Open(Wait::Equals) =>
                {
                    condition = Condition::Open(Wait::Nothing);
                }
                // a statement, an argument or an arm ends; `=>` ends a match guard
                ';' | ',' => {
                    condition = Condition::None;
                    braces = Braces::Unknown;
                }
                '>' if matches!(out.last(), Some(TokenTree::Punct(eq))
                    if eq.as_char() == '=' && eq.spacing() == Spacing::Joint) =>
                {
                    condition = Condition::None;
                }
                _ => {}
            },
            // a block as a match's scrutinee (`match { .. } {`): the arms follow
            TokenTree::Group(g)
                if g.delimiter() == Delimiter::Brace
                    && matches!(out.last(), Some(TokenTree::Ident(i)) if i == "match") => {}
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                let kind = std::mem::replace(&mut braces, Braces::Unknown);
                let is_block = match kind {
                    Braces::Item | Braces::Arms => {
                        if condition != Condition::Unclear {
                            condition = Condition::None;
                        }
                        false
                    }
                    Braces::Unknown => match condition {
                        Condition::Open(Wait::Nothing) if !after_conditional(&out) => {
                            condition = Condition::None;
                            true
                        }
                        Condition::Open(_) => {
                            // a block as the condition itself (`if { .. } {`), or the braces
                            // of a pattern
                            if after_conditional(&out) {
                                condition = Condition::Unclear;
                            }
                            false
                        }
                        Condition::Unclear => false,
                        Condition::None => block_follows(&out),
                    },
                };
                if is_block && large(g, min) {
                    let start = g.span_open().start();
                    let mut empty = Group::new(Delimiter::Brace, TokenStream::new());
                    empty.set_span(g.span());
                    taken.insert((start.line, start.column), g.clone());
                    out.push(TokenTree::Group(empty));
                    continue;
                }
                // a group no larger than `min` holds no block larger than that
                if kind != Braces::Item && large(g, min) && !is_macro_or_attribute(&out) {
                    out.push(TokenTree::Group(hollowed_group(g, min, taken)));
                    continue;
                }
            }
            TokenTree::Group(g)
                if braces != Braces::Item && large(g, min) && !is_macro_or_attribute(&out) =>
            {
                out.push(TokenTree::Group(hollowed_group(g, min, taken)));
                continue;
            }
            _ => {}
        }
        out.push(tt);
    }
    out.into_iter().collect()
}

/// Whether any group among `tokens` (not inside them) is larger than `min` bytes: only such a
/// group can be, or hold, a block to take out.
fn holds_large_group(tokens: &TokenStream, min: usize) -> bool {
    tokens
        .clone()
        .into_iter()
        .any(|tt| matches!(&tt, TokenTree::Group(g) if large(g, min)))
}

/// A group with the blocks in it taken out.
fn hollowed_group(g: &Group, min: usize, taken: &mut HashMap<(usize, usize), Group>) -> Group {
    let mut inner = Group::new(g.delimiter(), hollow_blocks(g.stream(), min, taken));
    inner.set_span(g.span());
    inner
}

/// Whether the last token is `if`, `while` or `for`.
fn after_conditional(out: &[TokenTree]) -> bool {
    matches!(out.last(), Some(TokenTree::Ident(i)) if CONDITIONAL.iter().any(|k| i == k))
}

/// Whether a brace group after these tokens is a block by its place: first in a body, after a
/// keyword that a block follows, or in expression position after an operator, a separator, a
/// `=>`, a closure's parameters or another block.
fn block_follows(out: &[TokenTree]) -> bool {
    match out.last() {
        None => true,
        Some(TokenTree::Punct(p)) => match p.as_char() {
            ';' | ',' | '=' | '|' => true,
            '>' => is_fat_arrow(out),
            _ => false,
        },
        Some(TokenTree::Ident(i)) => BEFORE_BLOCK.iter().any(|k| i == k),
        Some(TokenTree::Group(g)) => g.delimiter() == Delimiter::Brace,
        Some(TokenTree::Literal(_)) => false,
    }
}

/// Whether the last two tokens are `=>`.
fn is_fat_arrow(out: &[TokenTree]) -> bool {
    matches!(
        out,
        [.., TokenTree::Punct(eq), TokenTree::Punct(gt)]
            if eq.as_char() == '=' && eq.spacing() == Spacing::Joint && gt.as_char() == '>'
    )
}

/// Whether a group following these tokens is a macro invocation's (`m!(..)`, `m! {..}`, see
/// `macros`) or an attribute's (`#[..]`, `#![..]`): tokens kept as they are written. The block
/// of `if !ready { .. }` is no macro's.
fn is_macro_or_attribute(out: &[TokenTree]) -> bool {
    let punct = |back: usize, c: char| matches!(out.get(out.len().wrapping_sub(back)), Some(TokenTree::Punct(p)) if p.as_char() == c);
    punct(1, '#') || (punct(1, '!') && punct(2, '#')) || super::macros::is_body_after(out)
}

/// Whether a group's text is larger than `min` bytes.
fn large(g: &Group, min: usize) -> bool {
    let range = g.span().byte_range();
    range.end.saturating_sub(range.start) > min
}

/// A body starting with `#![..]`: its attributes belong to the function, so it stays in place.
fn starts_with_inner_attribute(g: &Group) -> bool {
    let mut it = g.stream().into_iter();
    matches!(
        (it.next(), it.next()),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == '#' && b.as_char() == '!'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(large_body: usize) -> size::Limits {
        size::Limits {
            large_body,
            ..size::Limits::default()
        }
    }

    fn hollowed(text: &str) -> (String, usize) {
        let tokens: TokenStream = text.parse().unwrap();
        let (out, bodies) = hollow(tokens, 0, &limits(0), text);
        let n = bodies.taken.borrow().len();
        (out.to_string(), n)
    }

    #[test]
    fn function_bodies_are_taken_out_at_item_level_only() {
        let (out, n) = hollowed(
            "fn a() -> Box<dyn Fn() -> u8> { let x = 1; x }\n\
             impl S { pub async fn b(&self) { c(); } const C: u8 = { 3 }; }\n\
             trait T { fn d(); fn e() { f() } }\n\
             mod m { fn g() { fn h() { i() } } }\n\
             static F: fn() -> u8 = { || 1 };\n\
             struct S { f: fn() }\n\
             impl X for fn() { fn j() { k() } }\n\
             macro_rules! mm { () => { fn n() { o() } } }",
        );
        assert_eq!(n, 5, "{out}");
        for kept in ["{ 3 }", "{ || 1 }", "{ f : fn () }", "fn n () { o () }"] {
            assert!(out.contains(kept), "{kept} in {out}");
        }
        for gone in ["let x", "c ()", "f ()", "i ()", "k ()"] {
            assert!(!out.contains(gone), "{gone} in {out}");
        }
    }

    /// A body's contents with every block taken out: what is left, and the taken blocks'
    /// contents.
    fn blocks_taken(body: &str) -> (String, Vec<String>) {
        let tokens: TokenStream = body.parse().unwrap();
        let mut taken = HashMap::new();
        let out = hollow_blocks(tokens, 0, &mut taken).to_string();
        let mut inner: Vec<String> = taken.values().map(|g| g.stream().to_string()).collect();
        inner.sort();
        (out, inner)
    }

    #[test]
    fn blocks_are_taken_where_the_grammar_makes_them_blocks() {
        let (out, taken) = blocks_taken(
            "if a { b() } else if c { d() } else { e() } \
             loop { f() } while let Some(x) = g() { h() } for i in 0..n { k() } \
             unsafe { l() } let m = async move { n() }; let o = { p() }; \
             match q { A => { r() } B if s => t(), _ => { u() } } \
             v(|w| { x() }, { y() });",
        );
        let expected = [
            "b ()", "d ()", "e ()", "f ()", "h ()", "k ()", "l ()", "n ()", "p ()", "r ()", "u ()",
            "x ()", "y ()",
        ];
        assert_eq!(taken, expected, "{out}");
        assert!(
            !out.contains("()  }") && out.contains("match q { A => { }"),
            "{out}"
        );
    }

    #[test]
    fn blocks_of_negated_conditions_are_taken_and_macro_bodies_stay() {
        let (out, taken) = blocks_taken("if !ready { a() } while !done { b() } m! { c() }");
        assert_eq!(taken, ["a ()", "b ()"], "{out}");
        assert!(out.contains("m ! { c () }"), "{out}");
    }

    #[test]
    fn braces_that_are_not_blocks_stay() {
        for body in [
            "let s = S { a: 1 };",
            "let s = S::<T> { a: 1 };",
            "if let S { a } = x { }",
            "for S { a } in xs { }",
            "match x { A if c => S { a: 1 }, _ => T { b } }",
            "match { x } { _ => () }",
            "if match x { _ => true } { }",
            "if { x } { }",
            "fn inner() { a() } struct P { a: u8 } impl P { fn f() { b() } }",
            "use a::{b, c}; m! { d() } n!(e, { f() }); #[cfg(x)] { g() }",
            "macro_rules! mm { () => { h() } }",
        ] {
            let (out, taken) = blocks_taken(body);
            let kept: Vec<&String> = taken.iter().filter(|t| !t.is_empty()).collect();
            assert!(kept.is_empty(), "{body}: took {kept:?}, left {out}");
        }
    }

    #[test]
    fn bodies_with_inner_attributes_and_small_bodies_stay() {
        let text = "fn a() { #![allow(unused)] b() } fn c() { d() }";
        let tokens: TokenStream = text.parse().unwrap();
        let (out, bodies) = hollow(tokens.clone(), 0, &limits(0), text);
        assert!(out.to_string().contains("b ()"));
        assert!(!out.to_string().contains("d ()"));
        assert_eq!(bodies.taken.borrow().len(), 1);
        let (out, bodies) = hollow(tokens, 1000, &limits(1000), text);
        assert!(out.to_string().contains("d ()"));
        assert!(bodies.taken.borrow().is_empty());
    }
}
