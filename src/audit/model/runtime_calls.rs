//! Which calls of a Rust file go to `locklint-runtime`'s lock types.
//!
//! A name is the crate's only when the file says so: a `use locklint_runtime::..` (with
//! groups, renames and globs), `extern crate locklint_runtime as ..`, or a path spelled from
//! the crate. A `TableLock` of another crate, or of the project itself, is not the runtime's.
//! What a method is called on comes from the types the function declares: parameters
//! (`locks: &TableLock`, `locks: &L` with `L: Lock`, `impl Lock`), `let` bindings (typed, or
//! built by `RedisLocker::new(..)` and its builder methods) and struct fields.
//!
//! The file is parsed again with `syn` (the audit's own question; the engine's intermediate
//! form keeps call names, not receivers), on the analysis threads' large stack.

use std::collections::HashMap;

use syn::visit::Visit;

use crate::ir::FileIr;
use crate::source::{SourceFile, Span};

const CRATE: &str = "locklint_runtime";

/// The crate's items the audit recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Item {
    RedisLocker,
    AdvisoryLock,
    AdvisoryLocker,
    TableLock,
    /// The `Lock` trait: a generic locker, or a call spelled `Lock::try_acquire(..)`.
    LockTrait,
    MemoryLock,
    FencedWrite,
    FencedClaim,
    ClaimOnce,
}

/// `(module, name)` of each recognised item.
const ITEMS: &[(&str, &str, Item)] = &[
    ("redis_lock", "RedisLocker", Item::RedisLocker),
    ("advisory", "AdvisoryLock", Item::AdvisoryLock),
    ("advisory", "AdvisoryLocker", Item::AdvisoryLocker),
    ("table", "TableLock", Item::TableLock),
    ("lock", "Lock", Item::LockTrait),
    ("lock", "MemoryLock", Item::MemoryLock),
    ("fence", "FencedWrite", Item::FencedWrite),
    ("fence", "FencedClaim", Item::FencedClaim),
    ("idempotency", "claim_once", Item::ClaimOnce),
];

/// Methods that return the locker they are called on (builders, clones, references).
const PASS_THROUGH: &[&str] = &[
    "clone",
    "as_ref",
    "unwrap",
    "expect",
    "with_prefix",
    "with_backoff",
    "with_max_hold",
    "with_wake_on_release",
    "with_keep_alive",
    "with_fences",
];

/// Constructors of the lock types.
const CONSTRUCTORS: &[&str] = &["new", "with_table"];

/// The calls of one file that go to the crate.
#[derive(Debug, Clone, Default)]
pub(super) struct RuntimeCalls {
    /// Calls on the lock types, by the byte offset where the engine's call span starts (the
    /// method name of a method call, the path of a path call).
    pub(super) locks: HashMap<usize, Item>,
    /// `FencedWrite::new(..)`, `FencedClaim::new(..)` and `claim_once(..)`: the writes the
    /// crate protects, with the span of the whole call.
    pub(super) writes: Vec<(Span, Item)>,
    /// The names that stand for the crate's lock types in this file (imports, aliases), for
    /// the fields other files call methods on.
    pub(super) types: HashMap<String, Item>,
}

/// The runtime calls of each file (by index in `files`). Files that cannot name the crate
/// are not parsed, nor files without functions (among them those the engine's depth guard
/// refused).
pub(super) fn runtime_calls(files: &[FileIr]) -> Vec<RuntimeCalls> {
    super::rust_pass::per_file(files, |f| f.file.text.contains(CRATE), of_parsed)
}

#[cfg(test)]
fn of_file(file: &SourceFile) -> RuntimeCalls {
    syn::parse_file(&file.text)
        .map(|parsed| of_parsed(file, &parsed))
        .unwrap_or_default()
}

fn of_parsed(file: &SourceFile, parsed: &syn::File) -> RuntimeCalls {
    let mut scope = Scope::default();
    scope.visit_file(parsed);
    // aliases of the file's top level, once the imports they name are known
    for item in &parsed.items {
        if let syn::Item::Type(t) = item {
            if let Some(lock) = scope.type_item(&t.ty, &HashMap::new()) {
                scope.aliases.insert(t.ident.to_string(), lock);
            }
        }
    }
    let types: HashMap<String, Item> = scope
        .names
        .keys()
        .chain(scope.aliases.keys())
        .filter_map(|name| Some((name.clone(), scope.lock_type_named(name)?)))
        .collect();
    let mut fields = Fields {
        scope: &scope,
        types: HashMap::new(),
    };
    fields.visit_file(parsed);
    let mut calls = Calls {
        scope: &scope,
        fields: &fields.types,
        file,
        frames: Vec::new(),
        out: RuntimeCalls::default(),
    };
    calls.visit_file(parsed);
    calls.out.types = types;
    calls.out
}

// ---------------------------------------------------------------- names in scope

/// The names a file brings into scope from the crate.
#[derive(Default)]
struct Scope {
    /// Local name → the path it stands for (`rt` → `locklint_runtime`, `TableLock` →
    /// `locklint_runtime::table::TableLock`).
    names: HashMap<String, Vec<String>>,
    /// Paths whose items are all imported (`use locklint_runtime::table::*`).
    globs: Vec<Vec<String>>,
    /// Type aliases of a lock type (`type Locker = RedisLocker<ConnectionManager>;`).
    aliases: HashMap<String, Item>,
}

impl Scope {
    fn add_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.add_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                if name == "self" {
                    if let Some(last) = prefix.last().cloned() {
                        self.names.insert(last, prefix.clone());
                    }
                } else {
                    let mut path = prefix.clone();
                    path.push(name.clone());
                    self.names.insert(name, path);
                }
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                self.names.insert(r.rename.to_string(), path);
            }
            syn::UseTree::Glob(_) => self.globs.push(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.add_tree(prefix, t);
                }
            }
        }
    }

    /// The path `segments` stands for, spelled from the crate root, when it names the crate.
    fn expand(&self, segments: &[String]) -> Option<Vec<String>> {
        self.expand_within(segments, 8)
    }

    /// [`Self::expand`] following at most `hops` imports of imports (`use a as b; use b as a;`
    /// must end).
    fn expand_within(&self, segments: &[String], hops: usize) -> Option<Vec<String>> {
        let hops = hops.checked_sub(1)?;
        let (first, rest) = segments.split_first()?;
        let mut full = if first == CRATE {
            vec![CRATE.to_string()]
        } else if let Some(path) = self.names.get(first) {
            path.clone()
        } else {
            let glob = self.globs.iter().find(|g| {
                self.expand_within(g, hops)
                    .is_some_and(|g| module_has(&g, first))
            })?;
            let mut path = self.expand_within(glob, hops)?;
            path.push(first.clone());
            path
        };
        // an import of an import (`use locklint_runtime as rt; use rt::table::TableLock;`)
        if full.first().map(String::as_str) != Some(CRATE) && full.first() != Some(first) {
            full = self.expand_within(&full, hops)?;
        }
        if full.first().map(String::as_str) != Some(CRATE) {
            return None;
        }
        full.extend(rest.iter().cloned());
        Some(full)
    }

    /// The item a path names, and what follows it (`TableLock::new` → `TableLock`, `new`).
    fn resolve(&self, path: &syn::Path) -> Option<(Item, Vec<String>)> {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let full = self.expand(&segments)?;
        let [_, module, name, rest @ ..] = full.as_slice() else {
            return None;
        };
        ITEMS
            .iter()
            .find(|(m, n, _)| m == module && n == name)
            .map(|(_, _, item)| (*item, rest.to_vec()))
    }

    /// The lock type a name stands for in this file (`RedisLocker`, an alias of it).
    fn lock_type_named(&self, name: &str) -> Option<Item> {
        let item = match self.aliases.get(name) {
            Some(item) => *item,
            None => {
                let (item, rest) = self.resolve(&syn::Path::from(syn::Ident::new(
                    name,
                    proc_macro2::Span::call_site(),
                )))?;
                if !rest.is_empty() {
                    return None;
                }
                item
            }
        };
        (!matches!(
            item,
            Item::FencedWrite | Item::FencedClaim | Item::ClaimOnce
        ))
        .then_some(item)
    }

    /// The lock type a type names: `TableLock`, `&RedisLocker<C>`, `Arc<AdvisoryLocker>`,
    /// `impl Lock`, or a generic parameter bound by `Lock` (`generics`).
    fn type_item(&self, ty: &syn::Type, generics: &HashMap<String, Item>) -> Option<Item> {
        match ty {
            syn::Type::Reference(r) => self.type_item(&r.elem, generics),
            syn::Type::Paren(p) => self.type_item(&p.elem, generics),
            syn::Type::Group(g) => self.type_item(&g.elem, generics),
            syn::Type::ImplTrait(t) => self.bounds_item(t.bounds.iter()),
            syn::Type::Path(p) if p.qself.is_none() => {
                if let Some(ident) = p.path.get_ident() {
                    if let Some(item) = generics.get(&ident.to_string()) {
                        return Some(*item);
                    }
                }
                if let [only] = p.path.segments.iter().collect::<Vec<_>>().as_slice() {
                    if let Some(item) = self.aliases.get(&only.ident.to_string()) {
                        return Some(*item);
                    }
                }
                if let Some((item, rest)) = self.resolve(&p.path) {
                    return rest.is_empty().then_some(item);
                }
                // a shared locker: `Arc<TableLock>`, `Box<..>`, `Rc<..>`
                let last = p.path.segments.last()?;
                if !matches!(last.ident.to_string().as_str(), "Arc" | "Rc" | "Box") {
                    return None;
                }
                let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
                    return None;
                };
                args.args.iter().find_map(|a| match a {
                    syn::GenericArgument::Type(t) => self.type_item(t, generics),
                    _ => None,
                })
            }
            _ => None,
        }
    }

    fn bounds_item<'a>(
        &self,
        mut bounds: impl Iterator<Item = &'a syn::TypeParamBound>,
    ) -> Option<Item> {
        bounds.find_map(|b| match b {
            syn::TypeParamBound::Trait(t) => self
                .resolve(&t.path)
                .filter(|(item, rest)| *item == Item::LockTrait && rest.is_empty())
                .map(|(item, _)| item),
            _ => None,
        })
    }
}

/// Whether the crate module `module` (a full path) has an item named `name`.
fn module_has(module: &[String], name: &str) -> bool {
    match module {
        [root] if root == CRATE => ITEMS.iter().any(|(m, _, _)| *m == name),
        [root, m] if root == CRATE => ITEMS.iter().any(|(im, n, _)| im == m && *n == name),
        _ => false,
    }
}

impl<'ast> Visit<'ast> for Scope {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.add_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_item_extern_crate(&mut self, e: &'ast syn::ItemExternCrate) {
        if e.ident == CRATE {
            if let Some((_, rename)) = &e.rename {
                self.names
                    .insert(rename.to_string(), vec![CRATE.to_string()]);
            }
        }
    }
}

// ---------------------------------------------------------------- struct fields

/// Struct fields whose type is a lock type, by field name (file-wide).
struct Fields<'s> {
    scope: &'s Scope,
    types: HashMap<String, Item>,
}

impl<'ast> Visit<'ast> for Fields<'_> {
    fn visit_field(&mut self, f: &'ast syn::Field) {
        if let Some(name) = &f.ident {
            if let Some(item) = self.scope.type_item(&f.ty, &HashMap::new()) {
                self.types.insert(name.to_string(), item);
            }
        }
    }
}

// ---------------------------------------------------------------- calls

/// What one function knows: its generic parameters bound by `Lock`, and its bindings.
#[derive(Default)]
struct Frame {
    generics: HashMap<String, Item>,
    bindings: HashMap<String, Item>,
}

struct Calls<'s> {
    scope: &'s Scope,
    fields: &'s HashMap<String, Item>,
    file: &'s SourceFile,
    frames: Vec<Frame>,
    out: RuntimeCalls,
}

impl Calls<'_> {
    fn offset(&self, span: proc_macro2::Span) -> usize {
        let s = span.start();
        self.file.lines.offset(&self.file.text, s.line, s.column)
    }

    fn generics(&self) -> HashMap<String, Item> {
        self.frames
            .last()
            .map(|f| f.generics.clone())
            .unwrap_or_default()
    }

    /// Enters a function: its generic parameters and typed parameters.
    fn enter(&mut self, sig: &syn::Signature) {
        let mut frame = Frame::default();
        for p in &sig.generics.params {
            if let syn::GenericParam::Type(t) = p {
                if let Some(item) = self.scope.bounds_item(t.bounds.iter()) {
                    frame.generics.insert(t.ident.to_string(), item);
                }
            }
        }
        if let Some(w) = &sig.generics.where_clause {
            for p in &w.predicates {
                if let syn::WherePredicate::Type(t) = p {
                    if let (syn::Type::Path(tp), Some(item)) =
                        (&t.bounded_ty, self.scope.bounds_item(t.bounds.iter()))
                    {
                        if let Some(ident) = tp.path.get_ident() {
                            frame.generics.insert(ident.to_string(), item);
                        }
                    }
                }
            }
        }
        for input in &sig.inputs {
            if let syn::FnArg::Typed(t) = input {
                if let (Some(name), Some(item)) = (
                    pat_name(&t.pat),
                    self.scope.type_item(&t.ty, &frame.generics),
                ) {
                    frame.bindings.insert(name, item);
                }
            }
        }
        self.frames.push(frame);
    }

    fn binding(&self, name: &str) -> Option<Item> {
        self.frames.last()?.bindings.get(name).copied()
    }

    /// The lock type of the value `e` evaluates to, when the function says.
    fn expr_item(&self, e: &syn::Expr) -> Option<Item> {
        match e {
            syn::Expr::Path(p) => {
                let ident = p.path.get_ident()?;
                self.binding(&ident.to_string())
            }
            syn::Expr::Field(f) => match &f.member {
                syn::Member::Named(name) => self.fields.get(&name.to_string()).copied(),
                syn::Member::Unnamed(_) => None,
            },
            syn::Expr::Reference(r) => self.expr_item(&r.expr),
            syn::Expr::Paren(p) => self.expr_item(&p.expr),
            syn::Expr::Group(g) => self.expr_item(&g.expr),
            syn::Expr::Try(t) => self.expr_item(&t.expr),
            syn::Expr::Await(a) => self.expr_item(&a.base),
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => self.expr_item(&u.expr),
            syn::Expr::MethodCall(m) if PASS_THROUGH.contains(&m.method.to_string().as_str()) => {
                self.expr_item(&m.receiver)
            }
            syn::Expr::Call(c) => {
                let syn::Expr::Path(p) = &*c.func else {
                    return None;
                };
                let (item, rest) = self.scope.resolve(&p.path)?;
                let is_lock = !matches!(
                    item,
                    Item::FencedWrite | Item::FencedClaim | Item::ClaimOnce
                );
                (is_lock
                    && matches!(rest.as_slice(), [ctor] if CONSTRUCTORS.contains(&ctor.as_str())))
                .then_some(item)
            }
            _ => None,
        }
    }
}

fn pat_name(p: &syn::Pat) -> Option<String> {
    match p {
        syn::Pat::Ident(i) => Some(i.ident.to_string()),
        syn::Pat::Type(t) => pat_name(&t.pat),
        syn::Pat::Reference(r) => pat_name(&r.pat),
        _ => None,
    }
}

impl<'ast> Visit<'ast> for Calls<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.enter(&f.sig);
        syn::visit::visit_item_fn(self, f);
        self.frames.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.enter(&f.sig);
        syn::visit::visit_impl_item_fn(self, f);
        self.frames.pop();
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        self.enter(&f.sig);
        syn::visit::visit_trait_item_fn(self, f);
        self.frames.pop();
    }

    fn visit_local(&mut self, l: &'ast syn::Local) {
        syn::visit::visit_local(self, l);
        let Some(name) = pat_name(&l.pat) else { return };
        let generics = self.generics();
        let item = match &l.pat {
            syn::Pat::Type(t) => self.scope.type_item(&t.ty, &generics),
            _ => None,
        }
        .or_else(|| l.init.as_ref().and_then(|i| self.expr_item(&i.expr)));
        if let Some(frame) = self.frames.last_mut() {
            match item {
                Some(item) => frame.bindings.insert(name, item),
                // a shadowing binding of something else
                None => frame.bindings.remove(&name),
            };
        }
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        if let Some(item) = self.expr_item(&m.receiver) {
            let at = self.offset(m.method.span());
            self.out.locks.insert(at, item);
        }
        syn::visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func {
            if let Some((item, rest)) = self.scope.resolve(&p.path) {
                let start = match (&p.path.leading_colon, p.path.segments.first()) {
                    (Some(colon), _) => colon.spans[0],
                    (None, Some(first)) => first.ident.span(),
                    (None, None) => c.paren_token.span.open(),
                };
                let start = self.offset(start);
                match (item, rest.as_slice()) {
                    (Item::FencedWrite | Item::FencedClaim, [new]) if new == "new" => {
                        let end = c.paren_token.span.close().end();
                        let end = self
                            .file
                            .lines
                            .offset(&self.file.text, end.line, end.column);
                        self.out.writes.push((Span::new(start, end), item));
                    }
                    (Item::ClaimOnce, []) => {
                        let end = c.paren_token.span.close().end();
                        let end = self
                            .file
                            .lines
                            .offset(&self.file.text, end.line, end.column);
                        self.out.writes.push((Span::new(start, end), item));
                    }
                    (_, [_, ..]) => {
                        // `Lock::try_acquire(&locks, ..)`: the locker's own type when known
                        let item = match item {
                            Item::LockTrait => c
                                .args
                                .first()
                                .and_then(|a| self.expr_item(a))
                                .unwrap_or(item),
                            _ => item,
                        };
                        self.out.locks.insert(start, item);
                    }
                    _ => {}
                }
            }
        }
        syn::visit::visit_expr_call(self, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The items of the lock calls of `text`, with the text at each call's offset.
    fn locks(text: &str) -> Vec<(String, Item)> {
        let file = SourceFile::new("x.rs".into(), text.to_string());
        let mut out: Vec<(usize, Item)> = of_file(&file).locks.into_iter().collect();
        out.sort_by_key(|(at, _)| *at);
        out.into_iter()
            .map(|(at, item)| {
                let word: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                (word, item)
            })
            .collect()
    }

    #[test]
    fn globs_aliases_and_constructors_name_the_runtime() {
        let found = locks(
            "use locklint_runtime::table::*;\n\
             use locklint_runtime as rt;\n\
             use rt::redis_lock::{self as r};\n\
             async fn f(pool: P, conn: C) {\n\
                 let locks = TableLock::new(pool);\n\
                 locks.try_acquire(\"a\", ttl).await;\n\
                 let redis = r::RedisLocker::new(conn).with_prefix(\"p\").unwrap();\n\
                 redis.with_lock(\"b\", ttl, |l| async {}).await;\n\
             }\n",
        );
        assert_eq!(
            found,
            [
                ("TableLock".to_string(), Item::TableLock),
                ("try_acquire".to_string(), Item::TableLock),
                ("r".to_string(), Item::RedisLocker),
                // builder methods are calls on the locker too (not acquisitions)
                ("with_prefix".to_string(), Item::RedisLocker),
                ("unwrap".to_string(), Item::RedisLocker),
                ("with_lock".to_string(), Item::RedisLocker),
            ]
        );
    }

    #[test]
    fn another_crates_types_and_shadowed_bindings_are_not_the_runtime() {
        let found = locks(
            "use other::TableLock;\n\
             use locklint_runtime::fence::*;\n\
             async fn f(locks: &TableLock, sem: &Semaphore) {\n\
                 locks.try_acquire(\"a\", ttl).await;\n\
                 sem.acquire().await;\n\
                 let locks = locklint_runtime::table::TableLock::new(pool);\n\
                 let locks = 3;\n\
                 locks.try_acquire(\"b\", ttl).await;\n\
             }\n",
        );
        // only the constructor spelled from the crate
        assert_eq!(found, [("locklint_runtime".to_string(), Item::TableLock)]);
    }

    #[test]
    fn aliases_of_a_lock_type_name_it() {
        let found = locks(
            "use locklint_runtime::redis_lock::RedisLocker;\n\
             pub type Locker<C> = RedisLocker<C>;\n\
             type Other = other::RedisLocker;\n\
             async fn f(locker: &Locker<M>, other: &Other) {\n\
                 locker.with_lock(\"a\", ttl, |l| async {}).await;\n\
                 other.with_lock(\"b\", ttl, |l| async {}).await;\n\
             }\n",
        );
        assert_eq!(found, [("with_lock".to_string(), Item::RedisLocker)]);
    }

    #[test]
    fn the_names_of_lock_types_a_file_declares_fields_with() {
        let text = "use locklint_runtime::redis_lock::RedisLocker;\n\
                    use locklint_runtime::fence::FencedWrite;\n\
                    use other::TableLock;\n\
                    pub type Locker = RedisLocker<M>;\n\
                    pub struct State { pub locker: Locker, pub locks: TableLock }\n";
        let file = SourceFile::new("x.rs".into(), text.to_string());
        let mut types: Vec<(String, Item)> = of_file(&file).types.into_iter().collect();
        types.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            types,
            [
                ("Locker".to_string(), Item::RedisLocker),
                ("RedisLocker".to_string(), Item::RedisLocker),
            ]
        );
    }

    #[test]
    fn import_cycles_end() {
        let found = locks(
            "use a as b;\nuse b as a;\nuse locklint_runtime as c;\n\
             fn f(x: a::TableLock) { x.try_acquire(\"n\", t); }\n",
        );
        assert!(found.is_empty());
    }
}
