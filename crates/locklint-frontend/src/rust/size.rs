//! How many tokens a syntax tree is built from, so that a file too large to analyse within the
//! memory bound is refused before `syn` builds its tree.
//!
//! `syn`'s tree takes 250-400 bytes per token on dense code (a call of thousands of `&key`
//! arguments, a signature of thousands of parameters, a table of thousands of tuples), whatever
//! the walker keeps of it. The trees alive at once are the file's (its items, with the bodies
//! larger than [`super::bodies::LARGE_BODY`] taken out, see `bodies`) and one statement's of a
//! body taken out. Together they are bounded by [`MAX_TREE_TOKENS`]: when the file's tree would
//! take more than half, every function body is taken out instead (the same intermediate form,
//! see `bodies`); when it is still larger than the bound, or one statement is larger than what
//! the file's tree leaves, the file is refused as too large. A whole file is bounded by
//! [`MAX_FILE_TOKENS`] (its tokens are all held while it is walked), its calls and commands by
//! [`MAX_FILE_EVENTS`].

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

/// The most tokens the syntax trees alive at once (the file's items, and one statement of a
/// body parsed when walked) are built from: about 60 MB of trees at the densest. Real code
/// stays far below it.
pub const MAX_TREE_TOKENS: usize = 150_000;

/// The most tokens of a file analysed: about 1.3 MB of dense code, 2 MB of ordinary code.
pub const MAX_FILE_TOKENS: usize = 400_000;

/// The most calls and commands (events of the intermediate form) of a file analysed: each
/// takes about a kilobyte through the analysis.
pub const MAX_FILE_EVENTS: usize = 40_000;

/// The bounds a file is analysed within.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Function bodies (and blocks inside them) of more bytes than this are parsed one
    /// statement at a time as they are walked.
    pub large_body: usize,
    /// [`MAX_TREE_TOKENS`].
    pub tree_tokens: usize,
    /// [`MAX_FILE_TOKENS`].
    pub file_tokens: usize,
    /// [`MAX_FILE_EVENTS`].
    pub file_events: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            large_body: super::bodies::LARGE_BODY,
            tree_tokens: MAX_TREE_TOKENS,
            file_tokens: MAX_FILE_TOKENS,
            file_events: MAX_FILE_EVENTS,
        }
    }
}

/// The number of tokens of `stream`, a bracket group counting one for its brackets and the
/// tokens inside; counting stops once past `limit`.
pub fn count(stream: &TokenStream, limit: usize) -> usize {
    counted(stream, limit, false)
}

/// The number of tokens of `stream` that the parser builds nodes of: [`count`], with the body
/// of each macro invocation counting one (the tree keeps it as the tokens it shares with the
/// token trees).
pub fn tree_count(stream: &TokenStream, limit: usize) -> usize {
    counted(stream, limit, true)
}

fn counted(stream: &TokenStream, limit: usize, skip_macro_bodies: bool) -> usize {
    let mut n = 0;
    let mut stack = vec![(stream.clone().into_iter(), Recent::default())];
    while let Some((top, recent)) = stack.last_mut() {
        let Some(tt) = top.next() else {
            stack.pop();
            continue;
        };
        n += 1;
        if n > limit {
            break;
        }
        let body = recent.is_macro_body(&tt);
        let inner = match &tt {
            TokenTree::Group(g) if !(skip_macro_bodies && body) => Some(g.stream()),
            _ => None,
        };
        recent.push(tt);
        if let Some(inner) = inner {
            stack.push((inner.into_iter(), Recent::default()));
        }
    }
    n
}

/// The last tokens read at one level of a token list, enough for `macros::is_body_after` to
/// tell whether the next group is a macro's body.
#[derive(Default)]
struct Recent(VecDeque<TokenTree>);

impl Recent {
    /// Whether `tt`, the token read next, is a macro's body.
    fn is_macro_body(&mut self, tt: &TokenTree) -> bool {
        matches!(tt, TokenTree::Group(_)) && super::macros::is_body_after(self.0.make_contiguous())
    }

    /// Remember `tt` as the last token read.
    fn push(&mut self, tt: TokenTree) {
        if self.0.len() == 3 {
            self.0.pop_front();
        }
        self.0.push_back(tt);
    }
}

/// The parts of a token list that the parser builds one tree of, counted as [`tree_count`]
/// does: segments ending at each `;`
/// at this level, and after each brace group at this level that is followed by what can only
/// start a new statement (a word other than `else` and `as`, a literal, an attribute's `#`)
/// or, when `items`, after every brace group at this level (an item's body). Returns the first
/// token's span and the token count of the largest part.
pub fn largest_part(stream: &TokenStream, items: bool) -> Option<(Span, usize)> {
    let mut best: Option<(Span, usize)> = None;
    let mut current: Option<(Span, usize)> = None;
    let mut after_brace = false;
    let mut recent = Recent::default();
    let close = |part: &mut Option<(Span, usize)>, best: &mut Option<(Span, usize)>| {
        if let Some(done) = part.take() {
            if best.is_none_or(|b| done.1 > b.1) {
                *best = Some(done);
            }
        }
    };
    for tt in stream.clone() {
        if after_brace && (items || starts_statement(&tt)) {
            close(&mut current, &mut best);
        }
        let body = recent.is_macro_body(&tt);
        let (ends, inner) = match &tt {
            TokenTree::Punct(p) => (p.as_char() == ';', 0),
            TokenTree::Group(_) if body => (false, 0),
            TokenTree::Group(g) => (false, tree_count(&g.stream(), usize::MAX)),
            _ => (false, 0),
        };
        after_brace = matches!(&tt, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace);
        let part = current.get_or_insert((tt.span(), 0));
        part.1 = part.1.saturating_add(1 + inner);
        recent.push(tt);
        if ends {
            close(&mut current, &mut best);
        }
    }
    close(&mut current, &mut best);
    best
}

/// Whether a token after a block can only start a new statement: no expression goes on with it.
fn starts_statement(tt: &TokenTree) -> bool {
    match tt {
        TokenTree::Ident(i) => i != "else" && i != "as",
        TokenTree::Literal(_) => true,
        TokenTree::Punct(p) => p.as_char() == '#',
        TokenTree::Group(_) => false,
    }
}

/// A tree too large to analyse: where (the first token of the largest part), how many tokens
/// it holds and the most it may hold.
#[derive(Debug, Clone, Copy)]
pub struct TooLarge {
    pub at: Span,
    pub tokens: usize,
    pub limit: usize,
    pub what: Part,
}

/// What is too large.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The whole file (counted on its text, before it is tokenised).
    File,
    /// The file's items, with every function body taken out.
    Items,
    /// One statement of a function body, beside the file's items.
    Statement,
    /// The calls and commands of the file, counted up to this statement.
    Events,
}

impl TooLarge {
    /// The message of the parse problem the file becomes.
    pub fn message(&self) -> String {
        message(self.what, self.tokens, self.limit)
    }
}

/// What the walk of one file's function bodies may still spend, and why it stopped: a
/// statement of a body parsed as it is walked may hold what the file's items leave of the
/// trees' bound, the file may have so many events (calls and commands), and the first body
/// that could not be analysed (it does not parse, or passes a bound) makes the file not
/// analysed, the rest of it unwalked.
pub struct Budget {
    max_statement: usize,
    events: Cell<usize>,
    max_events: usize,
    failure: RefCell<Option<Failure>>,
}

/// Why a body taken out of the file could not be analysed when it was walked.
pub enum Failure {
    /// It does not parse: the file does not.
    Syntax(syn::Error),
    /// One of its statements is too large, or the file has too many events.
    TooLarge(TooLarge),
}

impl Budget {
    /// A budget of statements of at most `max_statement` tokens and `max_events` events.
    pub fn new(max_statement: usize, max_events: usize) -> Budget {
        Budget {
            max_statement,
            events: Cell::new(0),
            max_events,
            failure: RefCell::new(None),
        }
    }

    /// Keep the first syntax error of a body walked.
    pub fn failed(&self, error: syn::Error) {
        self.failure
            .borrow_mut()
            .get_or_insert(Failure::Syntax(error));
    }

    /// The statement of a block's contents (its large blocks taken out) that is too large to
    /// parse, if one is; it is kept as the reason the file is not analysed.
    pub fn too_large(&self, block: &TokenStream) -> bool {
        let Some(found) = too_large_statement(block, self.max_statement) else {
            return false;
        };
        self.failure
            .borrow_mut()
            .get_or_insert(Failure::TooLarge(found));
        true
    }

    /// A function's walk has ended with `events` events.
    pub fn walked(&self, events: usize) {
        self.events.set(self.events.get().saturating_add(events));
    }

    /// Whether the file has passed its limit of events, with `current` events of the function
    /// being walked (at `at`); the first time, that is kept as the reason the file is not
    /// analysed.
    pub fn too_many_events(&self, current: usize, at: Span) -> bool {
        if self.events.get().saturating_add(current) <= self.max_events {
            return false;
        }
        self.failure
            .borrow_mut()
            .get_or_insert(Failure::TooLarge(TooLarge {
                at,
                tokens: 0,
                limit: self.max_events,
                what: Part::Events,
            }));
        true
    }

    /// Whether a body could not be analysed: the file is not, and the rest need not be walked.
    pub fn has_failed(&self) -> bool {
        self.failure.borrow().is_some()
    }

    /// Why a body could not be analysed, if one could not.
    pub fn failure(&self) -> Option<Failure> {
        self.failure.borrow_mut().take()
    }
}

/// The message of the parse problem of a file whose `what` has `tokens` tokens (or events),
/// more than `limit`.
pub fn message(what: Part, tokens: usize, limit: usize) -> String {
    let what = match what {
        Part::File => {
            format!("the file has {tokens} tokens, more than the {limit} analysed in one file")
        }
        Part::Items => format!(
            "its items outside function bodies have {tokens} tokens, more than the {limit} parsed at once"
        ),
        Part::Statement => format!(
            "this statement has {tokens} tokens, more than the {limit} parsed at once beside the file's items"
        ),
        Part::Events => format!(
            "the file has more than {limit} calls and commands (passed here), the most analysed in one file"
        ),
    };
    format!("too large to analyse: {what}; the file was not analysed")
}

/// The statement of a block's contents (its tokens with the large blocks taken out) that is
/// larger than `limit` tokens, if one is. Statements end at `;` and at a block followed by what
/// can only start a statement; where that is unclear, statements are counted together (an
/// estimate from above).
pub fn too_large_statement(block: &TokenStream, limit: usize) -> Option<TooLarge> {
    let (at, tokens) = largest_part(block, false)?;
    (tokens > limit).then_some(TooLarge {
        at,
        tokens,
        limit,
        what: Part::Statement,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> TokenStream {
        text.parse().unwrap()
    }

    #[test]
    fn groups_count_their_brackets_and_contents() {
        assert_eq!(count(&tokens("a + b"), usize::MAX), 3);
        assert_eq!(count(&tokens("f(a, [b; 2], { c })"), usize::MAX), 11);
        assert_eq!(
            count(&tokens("f(a, b, c, d)"), 3),
            4,
            "stops past the limit"
        );
    }

    #[test]
    fn macro_bodies_count_one_in_the_tree() {
        let text = "m!(a, b, c); n! { d e } macro_rules! r { () => {} } if !(f) { g }";
        assert_eq!(count(&tokens(text), usize::MAX), 28);
        // `if !(f)` is no invocation
        assert_eq!(tree_count(&tokens(text), usize::MAX), 28 - 5 - 2 - 4);
        assert_eq!(count(&tokens("x != (y)"), usize::MAX), 5);
        assert_eq!(tree_count(&tokens("x != (y)"), usize::MAX), 5);
        let statement = "m!(a, b, c, d, e, f, g, h);";
        assert_eq!(largest_part(&tokens(statement), false).unwrap().1, 4);
    }

    #[test]
    fn the_lexer_counts_the_tokens_of_the_token_trees() {
        for text in [
            "fn f<'a>(x: &'a str) -> u8 { let y = -1.5e3; x.len() as u8 }",
            "/// doc\n//! inner\nstruct S { a: [u8; 3] }\n/** block */ const C: &str = r#\"x\"#;",
            "m!{ a => b } #[cfg(test)] mod t { use super::*; }",
            "a ::< b >> c ..= d && e || f",
        ] {
            let (excess, lexed) = super::super::depth::lex_check(text);
            assert!(excess.is_none());
            assert_eq!(lexed, count(&tokens(text), usize::MAX), "{text}");
        }
        // a run of line doc comments of one style counts as the one attribute folding makes
        let text = "/// a\n  /// b\n//! c\n//! d\n/// e\nfn f() {}";
        assert_eq!(super::super::depth::lex_check(text).1, 5 + 6 + 5 + 4);
    }

    #[test]
    fn parts_end_at_semicolons_and_item_bodies() {
        let text = "let a = 1; f(x, y, z, w, v); struct S;";
        let (at, n) = largest_part(&tokens(text), false).unwrap();
        assert_eq!((at.start().column, n), (11, 12), "f(x, y, z, w, v);");
        // an item ends with its body
        let text = "fn g() { h(); } struct S;";
        let (at, n) = largest_part(&tokens(text), true).unwrap();
        assert_eq!((at.start().column, n), (0, 7), "fn g() {{ h(); }}");
        // a statement ending with a block ends there when what follows starts a statement
        let (at, n) = largest_part(&tokens(text), false).unwrap();
        assert_eq!((at.start().column, n), (0, 7));
        let text = "if a { b(); } if c { d(); } e()";
        assert_eq!(largest_part(&tokens(text), false).unwrap().1, 6);
        // and not when the expression may go on
        for text in [
            "if a { b } else { c }",
            "match a { _ => b } as u8",
            "{ a } + { b }",
            "S { a }.f()",
            "unsafe { a }?",
            "loop { a } 'b: loop { c }",
        ] {
            let whole = count(&tokens(text), usize::MAX);
            assert_eq!(
                largest_part(&tokens(text), false).unwrap().1,
                whole,
                "{text}"
            );
        }
        assert!(largest_part(&TokenStream::new(), true).is_none());
    }

    #[test]
    fn a_statement_past_the_limit_is_too_large() {
        let block = tokens(&format!("let a = 1; f({}0);", "x, ".repeat(20)));
        assert!(too_large_statement(&block, 50).is_none());
        let found = too_large_statement(&block, 30).unwrap();
        assert_eq!(found.at.start().column, 11);
        assert_eq!(found.what, Part::Statement);
        assert_eq!(
            found.message(),
            "too large to analyse: this statement has 44 tokens, more than the 30 parsed at once beside the file's items; the file was not analysed"
        );
    }
}
