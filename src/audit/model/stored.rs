//! What a Rust file stores in statics and struct fields, for the audit: the Lua script each
//! script holder runs (`static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(..))`,
//! a `once_cell` `Lazy`, a struct field initialised with `Script::new(..)`), and the struct
//! literals that store a local or parameter in a field (`Held { con, key, token }`), which is
//! how a guard keeps the key of the lock it releases (also through its constructor, with the
//! names passed to a type's associated function), and the locals a method of the guard
//! takes from that field again (`let key = std::mem::take(&mut self.key);` in a `Drop` that
//! hands the release to a task).

use std::collections::HashMap;

use syn::visit::Visit;

use super::rust_pass::{end_offset, offset};
use crate::ir::FileIr;
use crate::source::{SourceFile, Span};

/// The script a holder runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ScriptText {
    /// The text is this `const`/`static` (`Script::new(RELEASE_LUA)`).
    Named(String),
    /// The text is the string literal at this span.
    Literal(Span),
    /// The text is this file, read with `include_str!` (its path, `.` and `..` resolved).
    File(std::path::PathBuf),
    /// Holders of one name run different scripts.
    Ambiguous,
}

/// A struct literal storing a plain name in a field: `Held { key, .. }`, `Held { key: key, .. }`.
#[derive(Debug, Clone)]
pub(super) struct Stored {
    /// The struct (the impl's type for `Self { .. }`).
    pub(super) ty: String,
    pub(super) field: String,
    /// The local or parameter stored.
    pub(super) name: String,
    /// Where the literal is.
    pub(super) at: usize,
}

/// A local of a method that holds a field of `self`: `let key = self.key.clone();`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FromField {
    /// The impl's type.
    pub(super) ty: String,
    /// The method.
    pub(super) func: String,
    pub(super) local: String,
    pub(super) field: String,
}

/// A plain name passed to a type's associated function: `Guard::new(con, key, token)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Passed {
    /// The type (`Guard`; the impl's type for `Self::new`).
    pub(super) ty: String,
    pub(super) func: String,
    /// The argument's position.
    pub(super) index: usize,
    pub(super) name: String,
    pub(super) at: usize,
}

#[derive(Debug, Clone, Default)]
pub(super) struct FileStores {
    /// Script holders by name: statics, consts and struct fields.
    pub(super) scripts: HashMap<String, ScriptText>,
    /// Invocations of a script built in place (`Script::new(include_str!(..)).key(k)`), by the
    /// offset of each `key` method name.
    pub(super) invocations: HashMap<usize, ScriptText>,
    pub(super) stored: Vec<Stored>,
    pub(super) from_fields: Vec<FromField>,
    pub(super) passed: Vec<Passed>,
}

/// Methods that give the value they are called on, or a copy of it.
const SAME_VALUE: &[&str] = &[
    "clone",
    "to_string",
    "to_owned",
    "into",
    "as_str",
    "as_ref",
    "take",
    "unwrap",
];

/// The name an expression stores when it is that name or a copy of it (`key`,
/// `key.to_string()`, `&key`, `String::from(key)`).
fn stored_name(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        syn::Expr::Reference(r) => stored_name(&r.expr),
        syn::Expr::Paren(p) => stored_name(&p.expr),
        syn::Expr::MethodCall(m)
            if m.args.is_empty() && SAME_VALUE.contains(&m.method.to_string().as_str()) =>
        {
            stored_name(&m.receiver)
        }
        syn::Expr::Call(c) if c.args.len() == 1 => {
            let from = matches!(&*c.func, syn::Expr::Path(p)
                if p.path.segments.last().is_some_and(|s| s.ident == "from"));
            if from {
                stored_name(&c.args[0])
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The field of `self` an expression takes (`self.key`, `self.key.clone()`, `&self.key`,
/// `std::mem::take(&mut self.key)`, `mem::replace(&mut self.key, ..)`).
fn self_field(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Field(f) => match (&*f.base, &f.member) {
            (syn::Expr::Path(p), syn::Member::Named(name)) if p.path.is_ident("self") => {
                Some(name.to_string())
            }
            _ => None,
        },
        syn::Expr::Reference(r) => self_field(&r.expr),
        syn::Expr::Paren(p) => self_field(&p.expr),
        syn::Expr::MethodCall(m)
            if m.args.is_empty() && SAME_VALUE.contains(&m.method.to_string().as_str()) =>
        {
            self_field(&m.receiver)
        }
        syn::Expr::Call(c) if !c.args.is_empty() => {
            let takes = matches!(&*c.func, syn::Expr::Path(p)
                if p.path.segments.last().is_some_and(|s| s.ident == "take" || s.ident == "replace"));
            if takes {
                self_field(&c.args[0])
            } else {
                None
            }
        }
        _ => None,
    }
}

/// What each file stores (by index in `files`); only files that run Redis commands or build
/// a `Script` are parsed.
pub(super) fn stores(files: &[FileIr]) -> Vec<FileStores> {
    super::rust_pass::per_file(
        files,
        |f| {
            !f.lua.scripts.is_empty()
                || f.file.text.contains("Script")
                || f.functions.iter().any(|g| {
                    g.events
                        .iter()
                        .any(|e| matches!(e, crate::ir::Event::Op(_)))
                })
        },
        of_parsed,
    )
}

fn of_parsed(file: &SourceFile, parsed: &syn::File) -> FileStores {
    let mut v = Visitor {
        file,
        impl_type: Vec::new(),
        method: Vec::new(),
        out: FileStores::default(),
    };
    v.visit_file(parsed);
    v.out
}

struct Visitor<'f> {
    file: &'f SourceFile,
    impl_type: Vec<Option<String>>,
    /// The method being walked, in an impl.
    method: Vec<String>,
    out: FileStores,
}

impl Visitor<'_> {
    fn hold(&mut self, name: String, text: ScriptText) {
        let e = self.out.scripts.entry(name).or_insert_with(|| text.clone());
        if *e != text {
            *e = ScriptText::Ambiguous;
        }
    }
}

/// The script `Script::new(..)` builds somewhere in `e` (a `LazyLock::new(|| ..)`, a block).
fn script_in(file: &SourceFile, e: &syn::Expr) -> Option<ScriptText> {
    struct Find<'f> {
        file: &'f SourceFile,
        found: Option<ScriptText>,
    }
    impl<'ast> Visit<'ast> for Find<'_> {
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            if self.found.is_some() {
                return;
            }
            let is_new = matches!(&*c.func, syn::Expr::Path(p) if {
                let s: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
                s.ends_with(&["Script".to_string(), "new".to_string()])
            });
            if is_new && c.args.len() == 1 {
                self.found = match &c.args[0] {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) => Some(ScriptText::Literal(Span::new(
                        offset(self.file, s.span()),
                        end_offset(self.file, s.span()),
                    ))),
                    syn::Expr::Path(p) => p
                        .path
                        .segments
                        .last()
                        .map(|s| ScriptText::Named(s.ident.to_string())),
                    syn::Expr::Reference(r) => match &*r.expr {
                        syn::Expr::Path(p) => p
                            .path
                            .segments
                            .last()
                            .map(|s| ScriptText::Named(s.ident.to_string())),
                        _ => None,
                    },
                    syn::Expr::Macro(m) => included(self.file, &m.mac),
                    _ => None,
                };
                return;
            }
            syn::visit::visit_expr_call(self, c);
        }
    }
    let mut f = Find { file, found: None };
    f.visit_expr(e);
    f.found
}

/// The file `include_str!("..")` reads, relative to the file it is written in.
fn included(file: &SourceFile, mac: &syn::Macro) -> Option<ScriptText> {
    if mac
        .path
        .segments
        .last()
        .is_none_or(|s| s.ident != "include_str")
    {
        return None;
    }
    let lit: syn::LitStr = mac.parse_body().ok()?;
    let dir = file.path.parent()?;
    Some(ScriptText::File(crate::source::lexical(
        &dir.join(lit.value()),
    )))
}

/// The `key` method names of a chain of calls rooted at `Script::new(..)`, with the script.
fn invocation_keys(file: &SourceFile, m: &syn::ExprMethodCall) -> Option<(ScriptText, Vec<usize>)> {
    let mut keys = Vec::new();
    let mut cur = m;
    loop {
        if cur.method == "key" {
            keys.push(offset(file, cur.method.span()));
        }
        match &*cur.receiver {
            syn::Expr::MethodCall(inner) => cur = inner,
            root @ syn::Expr::Call(_) => return Some((script_in(file, root)?, keys)),
            _ => return None,
        }
    }
}

fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

impl<'ast> Visit<'ast> for Visitor<'_> {
    fn visit_item_static(&mut self, s: &'ast syn::ItemStatic) {
        if let Some(text) = script_in(self.file, &s.expr) {
            self.hold(s.ident.to_string(), text);
        }
        syn::visit::visit_item_static(self, s);
    }

    fn visit_item_const(&mut self, c: &'ast syn::ItemConst) {
        if let Some(text) = script_in(self.file, &c.expr) {
            self.hold(c.ident.to_string(), text);
        }
        syn::visit::visit_item_const(self, c);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        self.impl_type.push(type_name(&i.self_ty));
        syn::visit::visit_item_impl(self, i);
        self.impl_type.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.method.push(f.sig.ident.to_string());
        syn::visit::visit_impl_item_fn(self, f);
        self.method.pop();
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        // a function inside a method is not the method
        let outer = std::mem::take(&mut self.method);
        syn::visit::visit_item_fn(self, f);
        self.method = outer;
    }

    fn visit_local(&mut self, l: &'ast syn::Local) {
        let ty = self.impl_type.last().cloned().flatten();
        if let (Some(ty), Some(func), syn::Pat::Ident(p), Some(init)) =
            (ty, self.method.last(), &l.pat, &l.init)
        {
            if let Some(field) = self_field(&init.expr) {
                self.out.from_fields.push(FromField {
                    ty,
                    func: func.clone(),
                    local: p.ident.to_string(),
                    field,
                });
            }
        }
        syn::visit::visit_local(self, l);
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        if m.method.to_string().starts_with("invoke") {
            if let Some((text, keys)) = invocation_keys(self.file, m) {
                for at in keys {
                    self.out.invocations.insert(at, text.clone());
                }
            }
        }
        syn::visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func {
            let segments: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
            if let [.., ty, func] = segments.as_slice() {
                let ty = if ty.ident == "Self" {
                    self.impl_type.last().cloned().flatten()
                } else {
                    Some(ty.ident.to_string())
                };
                let at = offset(self.file, func.ident.span());
                for (index, a) in c.args.iter().enumerate() {
                    if let (Some(ty), Some(name)) = (&ty, stored_name(a)) {
                        self.out.passed.push(Passed {
                            ty: ty.clone(),
                            func: func.ident.to_string(),
                            index,
                            name,
                            at,
                        });
                    }
                }
            }
        }
        syn::visit::visit_expr_call(self, c);
    }

    fn visit_expr_struct(&mut self, s: &'ast syn::ExprStruct) {
        let ty = match s.path.segments.last() {
            Some(seg) if seg.ident == "Self" => self.impl_type.last().cloned().flatten(),
            Some(seg) => Some(seg.ident.to_string()),
            None => None,
        };
        let at = offset(self.file, s.brace_token.span.open());
        for f in &s.fields {
            let syn::Member::Named(field) = &f.member else {
                continue;
            };
            if let Some(text) = script_in(self.file, &f.expr) {
                self.hold(field.to_string(), text);
            }
            if let (Some(ty), Some(name)) = (&ty, stored_name(&f.expr)) {
                self.out.stored.push(Stored {
                    ty: ty.clone(),
                    field: field.to_string(),
                    name,
                    at,
                });
            }
        }
        syn::visit::visit_expr_struct(self, s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str) -> FileStores {
        let file = SourceFile::new("x.rs".into(), text.to_string());
        of_parsed(&file, &syn::parse_file(text).unwrap())
    }

    #[test]
    fn included_scripts_and_invocations_in_place() {
        let text = "static R: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!(\"../lua/r.lua\")));\n\
                    fn f() { Script::new(include_str!(\"x.lua\")).key(a).arg(t).key(b).invoke_async(c); }\n";
        let file = SourceFile::new("/p/src/lib.rs".into(), text.to_string());
        let s = of_parsed(&file, &syn::parse_file(text).unwrap());
        assert_eq!(
            s.scripts["R"],
            ScriptText::File(std::path::PathBuf::from("/p/lua/r.lua"))
        );
        let mut keys: Vec<(&str, &ScriptText)> = s
            .invocations
            .iter()
            .map(|(at, t)| (&text[*at..*at + 6], t))
            .collect();
        keys.sort_by_key(|(k, _)| *k);
        let x = ScriptText::File(std::path::PathBuf::from("/p/src/x.lua"));
        assert_eq!(keys, [("key(a)", &x), ("key(b)", &x)]);
    }

    #[test]
    fn holders_of_scripts_and_stored_names() {
        let text = "static A: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_LUA));\n\
                    static B: Lazy<redis::Script> = Lazy::new(|| redis::Script::new(\"return 1\"));\n\
                    struct L { release: Script }\n\
                    impl L { fn new() -> Self { Self { release: Script::new(&OTHER) } } }\n\
                    fn other() -> M { M { release: Script::new(RELEASE_LUA), key, token: t.to_string(), n: f(x) } }\n\
                    impl Drop for M { fn drop(&mut self) {\n\
                        let key = std::mem::take(&mut self.key);\n\
                        let token = self.token.clone();\n\
                        let n = compute(self.n);\n\
                    } }\n\
                    static C: LazyLock<Regex> = LazyLock::new(|| Regex::new(\"x\"));\n";
        let s = of(text);
        assert_eq!(s.scripts["A"], ScriptText::Named("RELEASE_LUA".into()));
        let ScriptText::Literal(span) = s.scripts["B"] else {
            panic!("{:?}", s.scripts["B"])
        };
        assert_eq!(&text[span.start..span.end], "\"return 1\"");
        // two structs' `release` fields hold different scripts
        assert_eq!(s.scripts["release"], ScriptText::Ambiguous);
        assert!(!s.scripts.contains_key("C"));
        let stored: Vec<(&str, &str, &str)> = s
            .stored
            .iter()
            .map(|x| (x.ty.as_str(), x.field.as_str(), x.name.as_str()))
            .collect();
        assert_eq!(stored, [("M", "key", "key"), ("M", "token", "t")]);
        let locals: Vec<(&str, &str, &str)> = s
            .from_fields
            .iter()
            .map(|x| (x.func.as_str(), x.local.as_str(), x.field.as_str()))
            .collect();
        assert_eq!(locals, [("drop", "key", "key"), ("drop", "token", "token")]);
        let s = of("fn f() { let g = Guard::new(con, key.clone(), 3); }");
        assert!(s.invocations.is_empty());
        let passed: Vec<(&str, &str, usize, &str)> = s
            .passed
            .iter()
            .map(|x| (x.ty.as_str(), x.func.as_str(), x.index, x.name.as_str()))
            .collect();
        assert_eq!(
            passed,
            [("Guard", "new", 0, "con"), ("Guard", "new", 1, "key")]
        );
    }
}
