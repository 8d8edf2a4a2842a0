//! Large function bodies kept out of the file's syntax tree. Before the file is parsed, the
//! body of each function item (at file level and in `impl`, `trait` and `mod` blocks) that is
//! larger than [`LARGE_BODY`] is replaced by an empty block with the same span; the walker parses
//! it from its tokens when it walks that function, one statement at a time
//! (`FnWalker::run_streamed`). The syntax trees alive at any time are then those of the file's
//! items without their large bodies and of one statement, not the tree of the whole file, which
//! takes a hundred times the file's size.

use proc_macro2::{Delimiter, Group, Spacing, TokenStream, TokenTree};
use std::cell::RefCell;
use std::collections::HashMap;

/// Function bodies of more bytes than this are parsed when walked, one statement at a time;
/// files of more bytes than this are checked and have their doc comments folded on the text.
pub const LARGE_BODY: usize = 16 * 1024;

/// The bodies taken out of a file's tokens, by where they start (line, column).
#[derive(Default)]
pub struct Bodies {
    taken: RefCell<HashMap<(usize, usize), Group>>,
    /// The first syntax error found in a body parsed when walked.
    error: RefCell<Option<syn::Error>>,
}

impl Bodies {
    /// The tokens of a body taken out of the file, given the (empty) block parsed in its place.
    pub fn take(&self, block: &syn::Block) -> Option<Group> {
        if !block.stmts.is_empty() {
            return None;
        }
        let at = block.brace_token.span.open().start();
        self.taken.borrow_mut().remove(&(at.line, at.column))
    }

    /// Keep the first syntax error of a body walked later.
    pub fn failed(&self, error: syn::Error) {
        self.error.borrow_mut().get_or_insert(error);
    }

    /// The syntax error of a body, if one did not parse.
    pub fn error(&self) -> Option<syn::Error> {
        self.error.borrow_mut().take()
    }
}

/// `tokens` with every function body larger than `min` bytes replaced by an empty block, and
/// the bodies taken out.
pub fn hollow(tokens: TokenStream, min: usize) -> (TokenStream, Bodies) {
    let bodies = Bodies::default();
    let out = hollow_items(tokens, min, &mut bodies.taken.borrow_mut());
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
                    if large(g, min) && !starts_with_inner_attribute(g) {
                        let start = g.span_open().start();
                        let mut empty = Group::new(Delimiter::Brace, TokenStream::new());
                        empty.set_span(g.span());
                        taken.insert((start.line, start.column), g.clone());
                        out.push(TokenTree::Group(empty));
                        after_dash = false;
                        continue;
                    }
                }
                Item::Container if angles == 0 => {
                    item = Item::Unknown;
                    let mut inner =
                        Group::new(Delimiter::Brace, hollow_items(g.stream(), min, taken));
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

    fn hollowed(text: &str) -> (String, usize) {
        let tokens: TokenStream = text.parse().unwrap();
        let (out, bodies) = hollow(tokens, 0);
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

    #[test]
    fn bodies_with_inner_attributes_and_small_bodies_stay() {
        let tokens: TokenStream = "fn a() { #![allow(unused)] b() } fn c() { d() }"
            .parse()
            .unwrap();
        let (out, bodies) = hollow(tokens.clone(), 0);
        assert!(out.to_string().contains("b ()"));
        assert!(!out.to_string().contains("d ()"));
        assert_eq!(bodies.taken.borrow().len(), 1);
        let (out, bodies) = hollow(tokens, 1000);
        assert!(out.to_string().contains("d ()"));
        assert!(bodies.taken.borrow().is_empty());
    }
}
