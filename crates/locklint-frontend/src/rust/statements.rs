//! A block's statements parsed one at a time, as `syn::Block::parse_within` parses them all:
//! the same statements, the same errors, with one statement's tree alive at a time.

use proc_macro2::{TokenStream, TokenTree};
use std::collections::VecDeque;
use syn::parse::ParseStream;

/// The statements of one block's contents, in order.
#[derive(Default)]
pub(super) struct Statements {
    /// Statements parsed ahead by the whole-block parser (see [`Statements::next`]).
    ahead: VecDeque<syn::Stmt>,
}

impl Statements {
    /// The next statement of `input`, or `None` at its end.
    ///
    /// `syn::Stmt::parse` refuses an expression that needs a `;` and has none, which a block
    /// accepts as its last statement: there, and for any statement it refuses, the rest of the
    /// block is parsed by `parse_within` itself, so a tail expression is read as a block reads
    /// it and a syntax error is the error the whole block gives.
    pub(super) fn next(&mut self, input: ParseStream) -> syn::Result<Option<syn::Stmt>> {
        if let Some(stmt) = self.ahead.pop_front() {
            return Ok(Some(stmt));
        }
        if let Some(semi) = input.parse::<Option<syn::Token![;]>>()? {
            let empty = syn::Expr::Verbatim(proc_macro2::TokenStream::new());
            return Ok(Some(syn::Stmt::Expr(empty, Some(semi))));
        }
        if input.is_empty() {
            return Ok(None);
        }
        let fork = input.fork();
        match fork.parse::<syn::Stmt>() {
            Ok(stmt) => {
                syn::parse::discouraged::Speculative::advance_to(input, &fork);
                let needs_semi = matches!(&stmt, syn::Stmt::Macro(m)
                    if m.semi_token.is_none() && !matches!(m.mac.delimiter, syn::MacroDelimiter::Brace(_)));
                if needs_semi && !input.is_empty() {
                    return Err(input.error("unexpected token, expected `;`"));
                }
                Ok(Some(stmt))
            }
            Err(_) => {
                self.ahead.extend(syn::Block::parse_within(input)?);
                Ok(self.ahead.pop_front())
            }
        }
    }
}

/// The tokens of a block's contents in runs of whole statements, each run ending at a `;` of
/// the block (which always ends a statement or an item) once it holds at least `min` tokens
/// (counting those inside brackets), so that each run is parsed on its own.
pub(super) fn chunks(block: TokenStream, min: usize) -> Vec<TokenStream> {
    let mut out = Vec::new();
    let mut run: Vec<TokenTree> = Vec::new();
    let mut tokens = 0usize;
    for tt in block {
        tokens += match &tt {
            TokenTree::Group(g) => 1 + super::size::count(&g.stream(), min),
            _ => 1,
        };
        let ends = matches!(&tt, TokenTree::Punct(p) if p.as_char() == ';');
        run.push(tt);
        if ends && tokens >= min {
            out.push(run.drain(..).collect());
            tokens = 0;
        }
    }
    if !run.is_empty() || out.is_empty() {
        out.push(run.into_iter().collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse::Parser;

    /// The statements of a block's text, one at a time, printed.
    fn one_by_one(body: &str) -> Result<Vec<String>, String> {
        let parse = |input: ParseStream| {
            let mut all = Vec::new();
            let mut statements = Statements::default();
            while let Some(stmt) = statements.next(input)? {
                all.push(quote::ToTokens::to_token_stream(&stmt).to_string());
            }
            Ok(all)
        };
        parse.parse_str(body).map_err(|e| e.to_string())
    }

    fn all_at_once(body: &str) -> Result<Vec<String>, String> {
        syn::Block::parse_within
            .parse_str(body)
            .map(|stmts| {
                stmts
                    .iter()
                    .map(|s| quote::ToTokens::to_token_stream(s).to_string())
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn statements_one_at_a_time_are_the_block_s_statements() {
        for body in [
            "let a = 1; a + 1",
            "let a = 1;; ; f(a);",
            "if a { b } else { c } d()",
            "m!(x); n! { y } z!(w)",
            "loop { break } Ok(())",
            "fn inner() {} inner()",
            "x",
            "",
            ";",
            "#[allow(unused)] let a = 1; a",
        ] {
            assert_eq!(one_by_one(body), all_at_once(body), "{body}");
        }
    }

    /// The statements of a block's text, parsed in runs of at least `min` tokens.
    fn in_runs(body: &str, min: usize) -> Result<Vec<String>, String> {
        let mut all = Vec::new();
        for chunk in chunks(body.parse().unwrap(), min) {
            let parse = |input: ParseStream| {
                let mut statements = Statements::default();
                while let Some(stmt) = statements.next(input)? {
                    all.push(quote::ToTokens::to_token_stream(&stmt).to_string());
                }
                Ok(())
            };
            parse.parse2(chunk).map_err(|e| e.to_string())?;
        }
        Ok(all)
    }

    #[test]
    fn statements_in_runs_are_the_block_s_statements() {
        let body = "let a = [0u8; 3]; if a { b } else { c } d(); m!(x); n! { y } \
                    struct S; fn f() -> [u8; 2] { [1; 2] } let v = loop { break 1; }; ;; v + 1";
        for min in [0, 1, 5, 1000] {
            assert_eq!(in_runs(body, min), all_at_once(body), "{min}");
        }
        assert_eq!(chunks(body.parse().unwrap(), 0).len(), 8);
        assert_eq!(chunks(body.parse().unwrap(), 1000).len(), 1);
        assert_eq!(chunks(TokenStream::new(), 1).len(), 1);
    }

    #[test]
    fn syntax_errors_are_the_block_s_errors() {
        for body in [
            "let a = 1 let b = 2;",
            "m!(x) y",
            "f() g()",
            "let = ;",
            "a + ",
        ] {
            let whole = all_at_once(body);
            assert!(whole.is_err(), "{body}");
            assert_eq!(one_by_one(body), whole, "{body}");
        }
    }
}
