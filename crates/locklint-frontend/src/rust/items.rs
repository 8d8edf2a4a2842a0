//! Items of a file: consts, functions, impl methods, trait default methods, inline modules.

use super::keys::{key_of, Scope};
use super::spans;
use super::walker::{FileCtx, FnWalker};
use locklint_ir::source::{SourceFile, Span};
use locklint_ir::{FileIr, KeyRef, Value};
use locklint_ir::{Library, Origin};
use std::collections::HashMap;

/// Whether an attribute marks test-only code (`#[test]`, `#[tokio::test]`, `#[cfg(test)]`).
fn is_test_attr(attr: &syn::Attribute) -> bool {
    let path = attr.path();
    if path.segments.last().is_some_and(|s| s.ident == "test") {
        return true;
    }
    if path.is_ident("cfg") {
        let text = quote::ToTokens::to_token_stream(&attr.meta).to_string();
        return text.contains("test") && !text.contains("not");
    }
    false
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(is_test_attr)
}

struct ConstScope<'a>(&'a HashMap<String, KeyRef>);

impl Scope for ConstScope<'_> {
    fn local_key(&self, _: &str) -> Option<KeyRef> {
        None
    }
    fn local_value(&self, _: &str) -> Option<Value> {
        None
    }
    fn param(&self, _: &str) -> Option<usize> {
        None
    }
    fn file_const(&self, name: &str) -> Option<KeyRef> {
        self.0.get(name).cloned()
    }
    fn impl_type(&self) -> Option<&str> {
        None
    }
}

fn collect_consts(items: &[syn::Item], out: &mut HashMap<String, KeyRef>, order: &mut Vec<String>) {
    for item in items {
        match item {
            syn::Item::Const(c) => {
                let k = key_of(&c.expr, &ConstScope(out));
                order.push(c.ident.to_string());
                out.insert(c.ident.to_string(), k);
            }
            syn::Item::Static(s) => {
                let k = key_of(&s.expr, &ConstScope(out));
                order.push(s.ident.to_string());
                out.insert(s.ident.to_string(), k);
            }
            syn::Item::Mod(m) if !is_test(&m.attrs) => {
                if let Some((_, items)) = &m.content {
                    collect_consts(items, out, order);
                }
            }
            syn::Item::Impl(i) => {
                for it in &i.items {
                    if let syn::ImplItem::Const(c) = it {
                        let k = key_of(&c.expr, &ConstScope(out));
                        order.push(c.ident.to_string());
                        out.insert(c.ident.to_string(), k);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Fill `ir` with the file's consts and functions.
pub fn collect(
    index: usize,
    file: &SourceFile,
    parsed: &syn::File,
    bodies: &super::bodies::Bodies,
    budget: &super::size::Budget,
    ir: &mut FileIr,
) {
    let mut consts = HashMap::new();
    let mut order = Vec::new();
    collect_consts(&parsed.items, &mut consts, &mut order);
    let lower = file.text.to_ascii_lowercase();
    let mut const_spans = HashMap::new();
    collect_const_spans(file, &parsed.items, &mut const_spans);
    let cx = FileCtx {
        file,
        file_idx: index,
        mentions_redis: crate::prefilter::names_redis(&file.text),
        names_nx_acquire: lower.contains("set_nx") || lower.contains("setnx"),
        consts: &consts,
        sqlx: lower.contains("sqlx"),
        const_spans: &const_spans,
        bodies,
        budget,
        orm: super::walker::orm::OrmFile::of(&lower, &file.path, &parsed.items),
    };
    let mut fns = Vec::new();
    walk_items(
        &cx,
        &parsed.items,
        Some(item_slot(file, parsed)),
        &mut fns,
        ir,
    );
    embed_static_scripts(file, &parsed.items, ir);
    embed_text_consts(file, &const_spans, ir);
    ir.functions = fns;
    ir.orm_tables = cx.orm.tables.clone();
    for name in order {
        if let Some(k) = consts.get(&name) {
            ir.consts.push((name, k.clone()));
        }
    }
}

/// Spans of `const`/`static` string literals (embedded SQL and Lua often live there).
fn collect_const_spans(
    file: &SourceFile,
    items: &[syn::Item],
    out: &mut HashMap<String, locklint_ir::source::Span>,
) {
    let lit_span = |e: &syn::Expr| match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(super::spans::of(file, s)),
        _ => None,
    };
    for item in items {
        match item {
            syn::Item::Const(c) => {
                if let Some(s) = lit_span(&c.expr) {
                    out.insert(c.ident.to_string(), s);
                }
            }
            syn::Item::Static(st) => {
                if let Some(s) = lit_span(&st.expr) {
                    out.insert(st.ident.to_string(), s);
                }
            }
            syn::Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    collect_const_spans(file, items, out);
                }
            }
            syn::Item::Impl(i) => {
                for it in &i.items {
                    if let syn::ImplItem::Const(c) = it {
                        if let Some(s) = lit_span(&c.expr) {
                            out.insert(c.ident.to_string(), s);
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// `static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(".."))`: scripts built in
/// `const`/`static` initialisers, which no function body contains.
fn embed_static_scripts(file: &SourceFile, items: &[syn::Item], ir: &mut FileIr) {
    struct Scripts<'f> {
        file: &'f SourceFile,
        found: Vec<locklint_ir::Embedded>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Scripts<'_> {
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            let is_script = matches!(&*c.func, syn::Expr::Path(p)
                if p.path.segments.len() >= 2
                    && p.path.segments.iter().rev().nth(1).is_some_and(|s| s.ident == "Script")
                    && p.path.segments.last().is_some_and(|s| s.ident == "new"));
            if let (true, Some(syn::Expr::Lit(lit))) = (is_script, c.args.first()) {
                if matches!(lit.lit, syn::Lit::Str(_)) {
                    let span = super::spans::of(self.file, lit);
                    if let Some((text, map)) =
                        super::literal::decode(self.file.snippet(span), span.start)
                    {
                        self.found.push(locklint_ir::Embedded {
                            language: locklint_ir::Language::Lua,
                            text,
                            map,
                            span,
                            origin: Origin::Library(Library::RedisScript),
                            func: None,
                            exec: None,
                            statement: None,
                        });
                    }
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
    }
    let mut v = Scripts {
        file,
        found: Vec::new(),
    };
    for item in items {
        match item {
            syn::Item::Static(st) if !matches!(&*st.expr, syn::Expr::Lit(_)) => {
                syn::visit::Visit::visit_expr(&mut v, &st.expr)
            }
            syn::Item::Const(c) if !matches!(&*c.expr, syn::Expr::Lit(_)) => {
                syn::visit::Visit::visit_expr(&mut v, &c.expr)
            }
            syn::Item::Mod(m) if !is_test(&m.attrs) => {
                if let Some((_, inner)) = &m.content {
                    embed_static_scripts(file, inner, ir);
                }
            }
            _ => {}
        }
    }
    ir.embedded.extend(v.found);
}

/// String constants that hold a Redis script or a SQL statement but are not run in this file
/// (a `queries.rs` or `scripts.rs` module used from elsewhere): their text is analysed on its
/// own, as origin `const` (no executing call, no parse errors reported).
fn embed_text_consts(
    file: &SourceFile,
    const_spans: &HashMap<String, locklint_ir::source::Span>,
    ir: &mut FileIr,
) {
    let mut spans: Vec<locklint_ir::source::Span> = const_spans.values().copied().collect();
    spans.sort_by_key(|s| s.start);
    for span in spans {
        if ir.embedded.iter().any(|e| e.span == span) {
            continue;
        }
        let Some((text, map)) = super::literal::decode(file.snippet(span), span.start) else {
            continue;
        };
        let language = if text.contains("redis.call(") || text.contains("redis.pcall(") {
            locklint_ir::Language::Lua
        } else if super::embed::looks_like_sql(&text) {
            locklint_ir::Language::Sql
        } else {
            continue;
        };
        ir.embedded.push(locklint_ir::Embedded {
            language,
            text,
            map,
            span,
            origin: Origin::Const,
            func: None,
            exec: None,
            statement: None,
        });
    }
}

fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        syn::Type::Reference(r) => type_name(&r.elem),
        _ => None,
    }
}

/// Where a new module-level item goes: after the line of the last leading `use` /
/// `extern crate`, else after the file's inner attributes and `//!` docs, else at the start.
fn item_slot(file: &SourceFile, parsed: &syn::File) -> usize {
    let leading = parsed
        .items
        .iter()
        .take_while(|i| matches!(i, syn::Item::Use(_) | syn::Item::ExternCrate(_)))
        .last()
        .map(|i| super::spans::of(file, i).end);
    let inner = parsed
        .attrs
        .iter()
        .filter(|a| matches!(a.style, syn::AttrStyle::Inner(_)))
        .map(|a| super::spans::of(file, a).end)
        .max();
    let end_of_line = |end: usize| {
        file.text[end..]
            .find('\n')
            .map_or(file.text.len(), |n| end + n)
    };
    match (leading, inner) {
        (Some(end), _) => end_of_line(end),
        // a folded run of `//!` lines is one attribute on its first line (see `docs`)
        (None, Some(end)) => {
            let mut end = end_of_line(end);
            while file.text[end..].trim_start().starts_with("//!") {
                let rest = &file.text[end..];
                end = end_of_line(end + rest.len() - rest.trim_start().len());
            }
            end
        }
        (None, None) => 0,
    }
}

fn walk_items(
    cx: &FileCtx,
    items: &[syn::Item],
    slot: Option<usize>,
    fns: &mut Vec<locklint_ir::Function>,
    ir: &mut FileIr,
) {
    for item in items {
        match item {
            syn::Item::Fn(f) if !is_test(&f.attrs) => {
                walk_fn(cx, &f.sig, &f.block, None, slot, fns, ir);
            }
            syn::Item::Impl(i) if !is_test(&i.attrs) => {
                let ty = type_name(&i.self_ty);
                for it in &i.items {
                    if let syn::ImplItem::Fn(f) = it {
                        if !is_test(&f.attrs) {
                            walk_fn(cx, &f.sig, &f.block, ty.clone(), slot, fns, ir);
                        }
                    }
                }
            }
            syn::Item::Trait(t) if !is_test(&t.attrs) => {
                for it in &t.items {
                    if let syn::TraitItem::Fn(f) = it {
                        if let Some(body) = &f.default {
                            let owner = Some(t.ident.to_string());
                            walk_fn(cx, &f.sig, body, owner, slot, fns, ir);
                        }
                    }
                }
            }
            syn::Item::Mod(m) if !is_test(&m.attrs) => {
                if let Some((_, items)) = &m.content {
                    walk_items(cx, items, None, fns, ir);
                }
            }
            // a variant with one field is typed like a field of the enum named by the
            // variant (`enum Store { Redis(Arc<RedisStore>) }`: `(Store, Redis)` is a
            // `RedisStore`), for receivers bound by the variant's pattern
            syn::Item::Enum(e) if !is_test(&e.attrs) => {
                for v in &e.variants {
                    let syn::Fields::Unnamed(f) = &v.fields else {
                        continue;
                    };
                    let [field] = f.unnamed.iter().collect::<Vec<_>>()[..] else {
                        continue;
                    };
                    if let Some(ty) = super::types::receiver_name(&field.ty) {
                        ir.field_types
                            .push((e.ident.to_string(), v.ident.to_string(), ty));
                    }
                }
            }
            syn::Item::Struct(s) if !is_test(&s.attrs) => {
                for f in &s.fields {
                    let (Some(name), Some(ty)) = (&f.ident, super::types::receiver_name(&f.ty))
                    else {
                        continue;
                    };
                    ir.field_types
                        .push((s.ident.to_string(), name.to_string(), ty));
                }
            }
            _ => {}
        }
    }
}

fn walk_fn(
    cx: &FileCtx,
    sig: &syn::Signature,
    body: &syn::Block,
    impl_type: Option<String>,
    slot: Option<usize>,
    fns: &mut Vec<locklint_ir::Function>,
    ir: &mut FileIr,
) {
    if cx.budget.has_failed() {
        // the file is not analysed: the rest need not be walked
        return;
    }
    let func_idx = fns.len();
    // reserve the slot so nested functions get later indexes
    let walker = FnWalker::new(cx, func_idx, sig, impl_type, ir.embedded.len());
    fns.push(walker.placeholder());
    let (function, nested, inits, embedded, times) = match cx.bodies.take(body) {
        Some(tokens) => {
            let walked = walker.run_streamed(&tokens);
            cx.bodies.forget_blocks();
            match walked {
                Ok(walked) => walked,
                Err(e) => return cx.budget.failed(e),
            }
        }
        None => walker.run(body),
    };
    cx.budget.walked(function.events.len());
    if cx.budget.too_many_events(0, sig.fn_token.span) {
        return;
    }
    fns[func_idx] = locklint_ir::Function {
        item_slot: slot,
        whole: Span::new(spans::of(cx.file, sig).start, spans::of(cx.file, body).end),
        ..function
    };
    ir.field_inits.extend(inits);
    ir.embedded.extend(embedded);
    ir.literal_times.extend(times);
    for (nsig, nbody, nimpl) in nested {
        walk_fn(cx, &nsig, &nbody, nimpl, slot, fns, ir);
    }
}
