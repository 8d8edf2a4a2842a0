//! What a fix leaves unused in Rust code. A fix that removes the last use of a local binding
//! or of an import also removes the binding (when it is a `let` of a value without side
//! effects, such as a clock read) and the import, so the fixed code still compiles without
//! warnings. A fix that would leave a parameter, or a binding with side effects, unused cannot
//! be completed.
//!
//! A redis-rs command trait import (`use redis::AsyncCommands;`) goes when no code left in the
//! file may call the trait's methods: with the fix that replaced its last call
//! ([`unused_trait_import`]), or with the fixes applied to the file in one pass that together
//! replaced every call ([`trait_import_left_unused`], asked by `fix::plan`).

use locklint_ir::diagnostic::Edit;
use locklint_ir::source::{FileRef, Span};
use ra_ap_rustc_lexer::{tokenize, FrontmatterAllowed, TokenKind as K};

/// Calls a removable `let` may make: reading a clock and building durations.
const PURE_CALLS: &[&str] = &[
    "now",
    "now_utc",
    "utc",
    "seconds",
    "milliseconds",
    "minutes",
    "hours",
    "from_secs",
    "from_millis",
    "timestamp",
    "timestamp_millis",
    "clone",
    "to_string",
    "into",
];

/// A token of Rust source.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tok<'a> {
    pub kind: K,
    pub span: Span,
    pub text: &'a str,
}

impl Tok<'_> {
    fn is(&self, text: &str) -> bool {
        self.text == text
    }

    fn ident(&self) -> bool {
        matches!(self.kind, K::Ident | K::RawIdent)
    }
}

/// The tokens of `text`, without whitespace and comments, at offset `base`.
pub(super) fn lex(text: &str, base: usize) -> Vec<Tok<'_>> {
    tokens(text, base).collect()
}

/// [`lex`], one token at a time.
fn tokens(text: &str, base: usize) -> impl Iterator<Item = Tok<'_>> {
    let mut at = 0;
    tokenize(text, FrontmatterAllowed::No).filter_map(move |t| {
        let len = t.len as usize;
        let start = at;
        at += len;
        (!matches!(
            t.kind,
            K::Whitespace | K::LineComment { .. } | K::BlockComment { .. }
        ))
        .then(|| Tok {
            kind: t.kind,
            span: Span::new(base + start, base + start + len),
            text: &text[start..start + len],
        })
    })
}

fn inside(s: Span, outer: Span) -> bool {
    s.start >= outer.start && s.end <= outer.end
}

/// A `let` statement: the binding token and the statement, through its `;`.
struct Let {
    name: usize,
    init: (usize, usize),
    stmt: Span,
}

/// The `let` statements of `toks` that bind `name` (with or without `mut` or a type).
fn lets(toks: &[Tok], name: &str) -> Vec<Let> {
    let mut out = Vec::new();
    for i in 0..toks.len() {
        if !toks[i].is("let") {
            continue;
        }
        let mut j = i + 1;
        if toks.get(j).is_some_and(|t| t.is("mut")) {
            j += 1;
        }
        let Some(bound) = toks.get(j).filter(|t| t.ident() && t.is(name)) else {
            continue;
        };
        let _ = bound;
        // the initialiser: after `=`, up to the `;` outside brackets
        let Some(eq) = (j + 1..toks.len()).find(|&k| toks[k].is("=") || toks[k].is(";")) else {
            continue;
        };
        if toks[eq].is(";") {
            continue;
        }
        let mut depth = 0i32;
        let mut end = None;
        for (k, t) in toks.iter().enumerate().skip(eq + 1) {
            match t.text {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                ";" if depth == 0 => {
                    end = Some(k);
                    break;
                }
                _ => {}
            }
            if depth < 0 {
                break;
            }
        }
        let Some(end) = end else { continue };
        out.push(Let {
            name: j,
            init: (eq + 1, end),
            stmt: Span::new(toks[i].span.start, toks[end].span.end),
        });
    }
    out
}

/// Whether token `i` is a later segment of a path (`a::name`) or a field or method
/// (`x.name`): not a use of a binding or import called `name`.
fn segment(toks: &[Tok], i: usize) -> bool {
    match i {
        0 => false,
        1 => toks[0].is("."),
        _ => {
            toks[i - 1].is(".")
                || (toks[i - 1].is(":")
                    && toks[i - 2].is(":")
                    && toks[i - 2].span.end == toks[i - 1].span.start)
        }
    }
}

/// Whether a string literal that stays reads `name` as an inline format argument
/// (`"{name}"`, `"{name:?}"`).
fn formats(toks: &[Tok], name: &str, removed: &[Span]) -> bool {
    toks.iter().any(|t| {
        matches!(t.kind, K::Literal { .. })
            && !removed.iter().any(|r| inside(t.span, *r))
            && [format!("{{{name}}}"), format!("{{{name}:")]
                .iter()
                .any(|p| t.text.contains(p.as_str()))
    })
}

/// Whether an initialiser only reads clocks, builds durations and computes with them.
fn pure(toks: &[Tok]) -> bool {
    toks.iter().enumerate().all(|(i, t)| match t.kind {
        K::Ident | K::RawIdent => {
            let call = toks.get(i + 1).is_some_and(|n| n.is("("));
            !t.is("await") && (!call || PURE_CALLS.contains(&t.text))
        }
        K::Literal { .. } => true,
        _ => matches!(
            t.text,
            "(" | ")" | ":" | "." | "+" | "-" | "*" | "/" | "&" | "," | "<" | ">"
        ),
    })
}

/// The `use` items of the file: their tokens' index range, through the `;`.
fn uses(toks: &[Tok]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].is("use") {
            if let Some(end) = (i..toks.len()).find(|&k| toks[k].is(";")) {
                out.push((i, end));
                i = end;
            }
        }
        i += 1;
    }
    out
}

/// The whole function (signature and body) whose name is at `name`.
#[cfg(test)]
fn function_span(file: &FileRef, name: Span) -> Option<Span> {
    struct Find<'a> {
        file: &'a FileRef,
        name: Span,
        found: Option<Span>,
    }
    impl Find<'_> {
        fn span(&self, n: &impl syn::spanned::Spanned) -> Span {
            let s = n.span();
            let f = &self.file;
            Span::new(
                f.lines.offset(&f.text, s.start().line, s.start().column),
                f.lines.offset(&f.text, s.end().line, s.end().column),
            )
        }
        fn consider(&mut self, ident: &syn::Ident, whole: Span) {
            if self.span(ident) == self.name {
                self.found = Some(whole);
            }
        }
    }
    impl<'ast> syn::visit::Visit<'ast> for Find<'_> {
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            let whole = self.span(f);
            self.consider(&f.sig.ident, whole);
            syn::visit::visit_item_fn(self, f);
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            let whole = self.span(f);
            self.consider(&f.sig.ident, whole);
            syn::visit::visit_impl_item_fn(self, f);
        }
        fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
            let whole = self.span(f);
            self.consider(&f.sig.ident, whole);
            syn::visit::visit_trait_item_fn(self, f);
        }
    }
    let ast = syn::parse_file(&file.text).ok()?;
    let mut v = Find {
        file,
        name,
        found: None,
    };
    syn::visit::Visit::visit_file(&mut v, &ast);
    v.found
}

/// Edits that complete `edits` (all in `file`, inside the function at `func`) by removing what
/// they leave unused; `None` when something would be left unused that cannot go.
pub fn complete(file: &FileRef, func: Span, edits: &[Edit]) -> Option<Vec<Edit>> {
    let text = &file.text;
    let toks = lex(text, 0);
    let mut removed: Vec<Span> = edits
        .iter()
        .map(|e| e.location.span)
        .filter(|s| !s.is_empty())
        .collect();
    // the code the edits write (not text they write inside string literals, such as SQL)
    let in_literal = |s: Span| {
        toks.iter().any(|t| {
            matches!(t.kind, K::Literal { .. }) && t.span.start < s.start && s.end < t.span.end
        })
    };
    let added: String = edits
        .iter()
        .filter(|e| !in_literal(e.location.span))
        .map(|e| e.replacement.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let added_toks = lex(&added, 0);
    let mut extra: Vec<Edit> = Vec::new();
    let mut work: Vec<String> = toks
        .iter()
        .filter(|t| t.ident() && removed.iter().any(|r| inside(t.span, *r)))
        .map(|t| t.text.to_string())
        .collect();
    let mut done: Vec<String> = Vec::new();
    let mut imported: Vec<String> = Vec::new();
    let use_items = uses(&toks);
    while let Some(name) = work.pop() {
        if done.contains(&name) {
            continue;
        }
        done.push(name.clone());
        let live = |t: &Tok, removed: &[Span]| {
            t.ident() && t.is(&name) && !removed.iter().any(|r| inside(t.span, *r))
        };
        let in_added = added_toks.iter().any(|t| t.ident() && t.is(&name));
        let body: Vec<Tok> = toks
            .iter()
            .filter(|t| inside(t.span, func))
            .copied()
            .collect();
        let bound = lets(&body, &name);
        if bound.len() > 1 {
            return None;
        }
        if let Some(l) = bound.first() {
            // a use: not the binding itself, not in its own statement, not a path segment,
            // field or method (`SystemTime::now`, `x.now`)
            let used = body.iter().enumerate().any(|(i, t)| {
                i != l.name && !inside(t.span, l.stmt) && !segment(&body, i) && live(t, &removed)
            }) || formats(&body, &name, &removed);
            if used || in_added || removed.iter().any(|r| inside(l.stmt, *r)) {
                continue;
            }
            let init = &body[l.init.0..l.init.1];
            if !pure(init) {
                return None;
            }
            let gone = super::fixes::statement_removal(file, l.stmt);
            removed.push(gone);
            extra.push(super::fixes::edit(file, gone, ""));
            work.extend(
                init.iter()
                    .filter(|t| t.ident())
                    .map(|t| t.text.to_string()),
            );
            continue;
        }
        // a parameter: `name:` before the body
        let body_open = body.iter().position(|t| t.is("{")).unwrap_or(0);
        let param = body[..body_open]
            .windows(2)
            .any(|w| w[0].is(&name) && w[1].is(":"));
        if param {
            let used = body[body_open..].iter().any(|t| live(t, &removed))
                || formats(&body[body_open..], &name, &removed);
            if !used && !in_added && !name.starts_with('_') {
                return None;
            }
            continue;
        }
        imported.push(name.clone());
    }
    // imports last, once every removed use is known
    let mut gone_imports: Vec<usize> = Vec::new();
    for name in imported {
        let at: Vec<usize> = use_items
            .iter()
            .flat_map(|&(s, e)| {
                (s + 1..e).filter(|&k| {
                    toks[k].is(&name)
                        && matches!(toks[k - 1].text, ":" | "{" | ",")
                        && matches!(toks[k + 1].text, "," | "}" | ";")
                })
            })
            .collect();
        let [k] = at.as_slice() else {
            if at.is_empty() {
                continue;
            }
            return None;
        };
        let used = toks.iter().enumerate().any(|(i, t)| {
            !use_items.iter().any(|&(a, b)| i >= a && i <= b)
                && !segment(&toks, i)
                && t.ident()
                && t.is(&name)
                && !removed.iter().any(|r| inside(t.span, *r))
        });
        if !used && !added_toks.iter().any(|t| t.ident() && t.is(&name)) {
            gone_imports.push(*k);
        }
    }
    for &(s, e) in &use_items {
        let gone: Vec<usize> = gone_imports
            .iter()
            .copied()
            .filter(|k| (s..e).contains(k))
            .collect();
        if gone.is_empty() || s.checked_sub(1).is_some_and(|p| toks[p].is("pub")) {
            continue;
        }
        let whole =
            super::fixes::statement_removal(file, Span::new(toks[s].span.start, toks[e].span.end));
        let open = (s..e).find(|&k| toks[k].is("{"));
        let Some(open) = open else {
            // `use a::b::name;`
            extra.push(super::fixes::edit(file, whole, ""));
            continue;
        };
        // one group, `{a, b as c, d::e}`, rebuilt without the names that go
        let close = (open..e).find(|&k| toks[k].is("}"))?;
        if toks[open + 1..close].iter().any(|t| t.is("{")) || close + 1 != e {
            return None;
        }
        let mut kept: Vec<&str> = Vec::new();
        let mut from = open + 1;
        for k in open + 1..=close {
            if toks[k].is(",") || k == close {
                if from < k && !gone.contains(&(k - 1)) {
                    kept.push(&text[toks[from].span.start..toks[k - 1].span.end]);
                }
                from = k + 1;
            }
        }
        let edit = if kept.is_empty() {
            super::fixes::edit(file, whole, "")
        } else {
            super::fixes::edit(
                file,
                Span::new(toks[open].span.start, toks[close].span.end),
                format!("{{{}}}", kept.join(", ")),
            )
        };
        extra.push(edit);
    }
    Some(extra)
}

/// Methods no redis-rs command trait has: a file whose other method calls are all among these
/// needs no command trait once the fixed call is gone.
const NOT_COMMANDS: &[&str] = &[
    "arg",
    "key",
    "query",
    "query_async",
    "invoke",
    "invoke_async",
    "prepare_invoke",
    "cmd",
    "to_string",
    "to_owned",
    "clone",
    "into",
    "unwrap",
    "unwrap_or",
    "unwrap_or_default",
    "expect",
    "is_some",
    "is_none",
    "is_ok",
    "is_err",
    "as_deref",
    "as_ref",
    "as_str",
    "as_bytes",
    "as_secs",
    "as_millis",
    "map",
    "map_err",
    "ok",
    "ok_or",
    "and_then",
    "abort",
    "await",
    "iter",
    "collect",
    "push",
    "parse",
    "len",
    "is_empty",
    "contains",
    "format",
    "new_v4",
    "from_secs",
    "from_millis",
    "elapsed",
    "now",
    "cancel",
    "spawn",
];

/// The edit removing the command trait import (`use redis::AsyncCommands;`, or its name in a
/// `use redis::{..}` list) that the fix leaves unused: the fixed call at `replaced` was the
/// file's only use of the trait, the trait is not named anywhere else, and every other method
/// called in the file is one no command trait has.
pub fn unused_trait_import(o: &locklint_project::TraceOp, replaced: Span) -> Option<Edit> {
    let (removal, mentions) = o
        .file
        .trait_import
        .get_or_init(|| trait_import(&o.file.text))
        .as_ref()?;
    let from = mentions.partition_point(|&m| m < replaced.start);
    let to = mentions.partition_point(|&m| m < replaced.end);
    (to - from == mentions.len()).then(|| super::fixes::edit(&o.file, *removal, ""))
}

/// The removal of the redis-rs command trait import that the edits applied to `file` together
/// leave unused: every place the file may need the trait (see [`trait_import`]) lies in text
/// the edits replace, and nothing they write calls a method outside [`NOT_COMMANDS`] or names
/// the trait. One fix cannot know this when other fixes of the same pass replace the other
/// calls; the edits of a pass together do. `None` when the import is still needed or may be,
/// when the file has no such import (or more than one), when the import was not used to begin
/// with, and when an edit touches the import's line.
pub fn trait_import_left_unused(
    file: &FileRef,
    edits: &[(Span, String)],
) -> Option<(Span, String)> {
    if file.path.extension().and_then(|e| e.to_str()) != Some("rs") {
        return None;
    }
    let (removal, mentions) = file
        .trait_import
        .get_or_init(|| trait_import(&file.text))
        .as_ref()?;
    if mentions.is_empty() {
        return None;
    }
    let touches = |s: &Span| s.start <= removal.end && removal.start <= s.end;
    if edits.iter().any(|(s, _)| touches(s)) {
        return None;
    }
    // the edits' spans by start, each with the furthest end of those up to it
    let mut spans: Vec<(usize, usize)> = edits.iter().map(|(s, _)| (s.start, s.end)).collect();
    spans.sort_unstable();
    let mut furthest = 0;
    for s in &mut spans {
        furthest = furthest.max(s.1);
        s.1 = furthest;
    }
    let replaced = |m: usize| {
        let before = spans.partition_point(|&(start, _)| start <= m);
        before > 0 && m < spans[before - 1].1
    };
    if !mentions.iter().all(|&m| replaced(m)) {
        return None;
    }
    let name = file
        .text
        .get(removal.start..removal.end)
        .and_then(trait_named)?;
    // what the edits write, with the `.` before and the `(` after each that make a method
    // call of a name it writes (`.del(..)` renamed to `.del_ex(..)`)
    let text = &file.text;
    let written: String = edits
        .iter()
        .map(|(s, r)| {
            let dot = if text.get(..s.start).unwrap_or("").trim_end().ends_with('.') {
                "."
            } else {
                ""
            };
            let after = text.get(s.end..).unwrap_or("").trim_start();
            let call = ["(", "::"]
                .into_iter()
                .find(|c| after.starts_with(c))
                .unwrap_or("");
            format!("{dot}{r}{call}")
        })
        .collect::<Vec<_>>()
        .join("\n");
    if !needs_no_trait(&written, name) {
        return None;
    }
    Some((*removal, String::new()))
}

/// The command trait a removed `use` text names.
fn trait_named(removed: &str) -> Option<&'static str> {
    let toks = lex(removed, 0);
    locklint_ir::names::REDIS_TRAIT_IMPORTS[..4]
        .iter()
        .copied()
        .find(|t| toks.iter().any(|k| k.text == *t))
}

/// Whether Rust code calls no method outside [`NOT_COMMANDS`] and does not name the trait.
fn needs_no_trait(code: &str, name: &str) -> bool {
    // each token with the one before and the one after, read as the lexer gives them
    let mut toks = tokens(code, 0).peekable();
    let mut before: Option<Tok> = None;
    while let Some(t) = toks.next() {
        let method_call = before.as_ref().is_some_and(|b| b.text == ".")
            && matches!(t.kind, K::Ident)
            && toks.peek().is_some_and(|n| n.text == "(" || n.text == ":")
            && !NOT_COMMANDS.contains(&t.text);
        if t.text == name || method_call {
            return false;
        }
        before = Some(t);
    }
    true
}

/// The span removing the file's one redis-rs command trait import, and the starts of the
/// tokens that may still need it: the trait's name outside `use` items, and calls of methods
/// that are not known to be outside the command traits.
fn trait_import(text: &str) -> Option<(Span, Vec<usize>)> {
    let toks = lex(text, 0);
    // the `use redis::..;` items naming a command trait
    let mut uses = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].text == "use" {
            let end = (i..toks.len()).find(|&k| toks[k].text == ";")?;
            uses.push((i, end));
            i = end;
        }
        i += 1;
    }
    let in_use = |k: usize| uses.iter().any(|&(s, e)| s <= k && k <= e);
    let mut found: Option<(usize, usize, usize)> = None;
    for &(s, e) in &uses {
        let item = &toks[s + 1..e];
        if item
            .iter()
            .find(|t| t.text != ":")
            .is_none_or(|t| t.text != "redis")
        {
            continue;
        }
        for (k, t) in item.iter().enumerate() {
            if locklint_ir::names::REDIS_TRAIT_IMPORTS[..4].contains(&t.text) {
                if found.is_some() {
                    return None;
                }
                found = Some((s, e, s + 1 + k));
            }
        }
    }
    let (s, e, at) = found?;
    let name = toks[at].text;
    let mut mentions = Vec::new();
    for (k, t) in toks.iter().enumerate() {
        if in_use(k) {
            continue;
        }
        if t.text == name {
            mentions.push(t.span.start);
            continue;
        }
        // `.method(` / `.method::<`
        let method = k > 0
            && toks[k - 1].text == "."
            && matches!(t.kind, K::Ident)
            && toks
                .get(k + 1)
                .is_some_and(|n| n.text == "(" || n.text == ":");
        if method && !NOT_COMMANDS.contains(&t.text) {
            mentions.push(t.span.start);
        }
    }
    let item = &toks[s..=e];
    let names = item.iter().filter(|t| matches!(t.kind, K::Ident)).count();
    if item.iter().any(|t| t.text == "{") && names > 3 {
        // `use redis::{A, X, B};`: the name and one comma go
        let next = toks.get(at + 1).filter(|t| t.text == ",");
        let span = match next {
            Some(comma) => {
                let after = toks.get(at + 2).map_or(comma.span.end, |t| t.span.start);
                Span::new(toks[at].span.start, after)
            }
            None => {
                let comma = toks.get(at - 1).filter(|t| t.text == ",")?;
                Span::new(comma.span.start, toks[at].span.end)
            }
        };
        return Some((span, mentions));
    }
    // `use redis::X;` / `use redis::{X};`: `use`, `redis` and the trait
    if names != 3 {
        return None;
    }
    // the whole `use` line, and a blank line it leaves doubled
    let start = toks[s].span.start;
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    if !text[line_start..start].trim().is_empty() {
        return None;
    }
    let end = toks[e].span.end;
    let mut line_end = text[end..].find('\n').map_or(text.len(), |i| end + i + 1);
    if !text[end..line_end].trim().is_empty() {
        return None;
    }
    let blank_before = line_start == 0 || text[..line_start].ends_with("\n\n");
    if blank_before && text[line_end..].starts_with('\n') {
        line_end += 1;
    }
    Some((Span::new(line_start, line_end), mentions))
}

#[cfg(test)]
mod tests {
    use super::*;
    use locklint_ir::source::SourceFile;
    use std::path::PathBuf;

    /// The text after `edits` and what they leave unused are removed.
    fn completed(text: &str, cut: &str, with: &str) -> Option<String> {
        let file = SourceFile::new(PathBuf::from("a.rs"), text.to_string());
        let at = text.find(cut).unwrap();
        let edits = vec![super::super::fixes::edit(
            &file,
            Span::new(at, at + cut.len()),
            with,
        )];
        let name = text.find("fn ").unwrap() + 3;
        let func = function_span(&file, Span::new(name, name + "take".len())).unwrap();
        let extra = complete(&file, func, &edits)?;
        let all: Vec<(Span, String)> = edits
            .iter()
            .chain(&extra)
            .map(|e| (e.location.span, e.replacement.clone()))
            .collect();
        locklint_ir::diagnostic::apply_edits(text, &all).ok()
    }

    const TAKE_OVER: &str = "use std::time::{Duration, SystemTime};

fn take(c: &Client) {
    let now = SystemTime::now();
    let ttl = Duration::from_secs(3);
    c.execute(\"..\", &[&now, &ttl]);
}
";

    #[test]
    fn a_clock_read_and_its_import_go_with_their_last_use() {
        assert_eq!(
            completed(TAKE_OVER, "&now, ", "").unwrap(),
            "use std::time::{Duration};

fn take(c: &Client) {
    let ttl = Duration::from_secs(3);
    c.execute(\"..\", &[&ttl]);
}
"
        );
        let single = TAKE_OVER
            .replace("{Duration, SystemTime}", "SystemTime")
            .replace("    let ttl = Duration::from_secs(3);\n", "")
            .replace(", &ttl", "");
        assert_eq!(
            completed(&single, "&[&now]", "&[]").unwrap(),
            "\nfn take(c: &Client) {\n    c.execute(\"..\", &[]);\n}\n"
        );
    }

    #[test]
    fn a_path_segment_of_the_same_name_is_not_a_use() {
        let text = "use std::time::SystemTime;\n\nfn take(c: &Client, d: std::time::SystemTime) {\n    let now = SystemTime::now();\n    c.execute(\"..\", &[&now, &d]);\n}\n";
        assert_eq!(
            completed(text, "&now, ", "").unwrap(),
            "\nfn take(c: &Client, d: std::time::SystemTime) {\n    c.execute(\"..\", &[&d]);\n}\n"
        );
        // a format string reads it
        let logged = TAKE_OVER.replace(
            "&[&now, &ttl]);",
            "&[&now, &ttl]);\n    log::info!(\"{now:?}\");",
        );
        assert_eq!(
            completed(&logged, "&now, ", "").unwrap(),
            logged.replacen("&now, ", "", 1)
        );
        // `Struct { at: now }` uses `now`
        let field = TAKE_OVER.replace(
            "&[&now, &ttl]);",
            "&[&now, &ttl]);\n    log(Entry { at: now });",
        );
        assert_eq!(
            completed(&field, "&now, ", "").unwrap(),
            field.replacen("&now, ", "", 1)
        );
    }

    #[test]
    fn a_name_still_used_stays() {
        let text = TAKE_OVER.replace("&[&now, &ttl]", "&[&now, &ttl]); log(now");
        assert_eq!(
            completed(&text, "&now, ", "").unwrap(),
            text.replacen("&now, ", "", 1)
        );
    }

    #[test]
    fn a_parameter_or_a_binding_with_effects_cannot_be_left_unused() {
        let effect = TAKE_OVER.replace("SystemTime::now()", "fetch_time(c)");
        assert_eq!(completed(&effect, "&now, ", ""), None);
        let param = "fn take(c: &Client, now: u64) {\n    c.execute(\"..\", &[&now]);\n}\n";
        assert_eq!(completed(param, "&now", ""), None);
    }

    const TWO_RELEASES: &str = "use redis::AsyncCommands;

async fn a(con: &mut C, token: &str) {
    let _: i64 = con.del(\"lock:a\").await?;
}

async fn b(con: &mut C, token: &str) {
    let _: i64 = con.del(\"lock:b\").await?;
}
";

    /// What `trait_import_left_unused` removes after replacing each of `cuts` with its text.
    fn left_unused(text: &str, cuts: &[(&str, &str)]) -> Option<String> {
        let file = SourceFile::new(PathBuf::from("a.rs"), text.to_string());
        let edits: Vec<(Span, String)> = cuts
            .iter()
            .map(|(cut, with)| {
                let at = text.find(cut).unwrap();
                (Span::new(at, at + cut.len()), with.to_string())
            })
            .collect();
        let (gone, _) = trait_import_left_unused(&file, &edits)?;
        Some(text[gone.start..gone.end].to_string())
    }

    #[test]
    fn a_command_trait_import_goes_when_the_edits_together_replace_every_call() {
        let script =
            |key: &str| format!("redis::Script::new(S).key({key}).arg(token).invoke_async(con)");
        let a = script("\"lock:a\"");
        let b = script("\"lock:b\"");
        assert_eq!(
            left_unused(
                TWO_RELEASES,
                &[("con.del(\"lock:a\")", &a), ("con.del(\"lock:b\")", &b)]
            )
            .as_deref(),
            Some("use redis::AsyncCommands;\n\n")
        );
        // one call left
        assert_eq!(
            left_unused(TWO_RELEASES, &[("con.del(\"lock:a\")", &a)]),
            None
        );
        // a call renamed to another command, or only its name replaced
        assert_eq!(
            left_unused(
                TWO_RELEASES,
                &[
                    ("del(\"lock:a\")", "del_ex(\"lock:a\", ifeq(token))"),
                    ("con.del(\"lock:b\")", &b)
                ]
            ),
            None
        );
        assert_eq!(
            left_unused(
                TWO_RELEASES,
                &[("del", "unlink"), ("con.del(\"lock:b\")", &b)]
            ),
            None
        );
        // an edit on the import's line
        assert_eq!(
            left_unused(
                TWO_RELEASES,
                &[
                    ("con.del(\"lock:a\")", &a),
                    ("con.del(\"lock:b\")", &b),
                    ("AsyncCommands", "Commands")
                ]
            ),
            None
        );
    }
}
