//! Key templates and values from Rust expressions: literals, `format!`, concatenation,
//! consts, locals, parameters, fields and key-building helper calls.

use locklint_ir::{KeyRef, Part, Value};

/// What a local name is bound to, as far as keys and values are concerned.
pub trait Scope {
    fn local_key(&self, name: &str) -> Option<KeyRef>;
    fn local_value(&self, name: &str) -> Option<Value>;
    fn param(&self, name: &str) -> Option<usize>;
    fn file_const(&self, name: &str) -> Option<KeyRef>;
    fn impl_type(&self) -> Option<&str>;
}

const MAX_DEPTH: usize = 64;

/// A path as written, segments joined by `::` (generic arguments left out).
pub fn path_text(path: &syn::Path) -> String {
    path.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

/// Resolve an expression to a key template.
pub fn key_of(e: &syn::Expr, scope: &dyn Scope) -> KeyRef {
    key_at(e, scope, 0)
}

fn strip_method(name: &str) -> bool {
    matches!(
        name,
        "to_string"
            | "to_owned"
            | "clone"
            | "as_str"
            | "as_ref"
            | "into"
            | "as_bytes"
            | "borrow"
            | "deref"
            | "to_vec"
            | "as_deref"
    )
}

/// The name of a method's receiver when it is a local or a field (`lease_key` of
/// `self.lease_key`); not `self`.
fn receiver_name(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Field(f) => match &f.member {
            syn::Member::Named(n) => Some(n.to_string()),
            syn::Member::Unnamed(_) => None,
        },
        syn::Expr::Reference(r) => receiver_name(&r.expr),
        syn::Expr::Paren(p) => receiver_name(&p.expr),
        e => ident_of(e).filter(|n| n != "self"),
    }
}

/// Methods so common on std types that they are never lock helpers.
pub(super) fn is_std_method(name: &str) -> bool {
    matches!(
        name,
        "to_string"
            | "to_owned"
            | "clone"
            | "len"
            | "is_empty"
            | "is_none"
            | "is_some"
            | "iter"
            | "into_iter"
            | "map"
            | "and_then"
            | "collect"
            | "push"
            | "push_str"
            | "insert"
            | "as_str"
            | "as_ref"
            | "as_deref"
            | "as_mut"
            | "borrow"
            | "borrow_mut"
            | "fmt"
            | "eq"
            | "cmp"
            | "filter"
            | "contains"
            | "starts_with"
            | "ends_with"
            | "from"
            | "new"
            | "default"
            | "Some"
            | "Ok"
            | "Err"
            | "format"
    )
}

/// Methods of `Option`, `Result`, strings and iterators that a key can pass through
/// (`key.unwrap()`, `name.trim()`): never a project's key builder, whatever the project defines.
fn is_std_value_method(name: &str) -> bool {
    is_std_method(name)
        || matches!(
            name,
            "unwrap"
                | "expect"
                | "unwrap_or"
                | "unwrap_or_default"
                | "unwrap_or_else"
                | "ok"
                | "ok_or"
                | "ok_or_else"
                | "take"
                | "trim"
                | "iter_mut"
                | "to_lowercase"
                | "to_uppercase"
                | "to_ascii_lowercase"
                | "to_ascii_uppercase"
                | "max"
                | "min"
                | "next"
                | "hash"
        )
}

fn ident_of(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    }
}

/// A numeric literal (`1`, `2.5`, `-1`, `(1)`, `1 as u64`).
pub(super) fn is_number(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Lit(l) => matches!(l.lit, syn::Lit::Int(_) | syn::Lit::Float(_)),
        syn::Expr::Paren(p) => is_number(&p.expr),
        syn::Expr::Group(g) => is_number(&g.expr),
        syn::Expr::Cast(c) => is_number(&c.expr),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => is_number(&u.expr),
        _ => false,
    }
}

fn is_screaming(name: &str) -> bool {
    name.chars().any(|c| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn key_at(e: &syn::Expr, scope: &dyn Scope, depth: usize) -> KeyRef {
    if depth > MAX_DEPTH {
        return KeyRef::hole(None);
    }
    let d = depth + 1;
    match e {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Str(s) => KeyRef::lit(&s.value()),
            syn::Lit::ByteStr(s) => KeyRef::lit(&String::from_utf8_lossy(&s.value())),
            syn::Lit::Int(i) => KeyRef::lit(i.base10_digits()),
            syn::Lit::Char(c) => KeyRef::lit(&c.value().to_string()),
            _ => KeyRef::hole(None),
        },
        syn::Expr::Reference(r) => key_at(&r.expr, scope, d),
        syn::Expr::Paren(p) => key_at(&p.expr, scope, d),
        syn::Expr::Group(g) => key_at(&g.expr, scope, d),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => key_at(&u.expr, scope, d),
        syn::Expr::Cast(c) => key_at(&c.expr, scope, d),
        syn::Expr::MethodCall(m) if m.args.is_empty() && strip_method(&m.method.to_string()) => {
            key_at(&m.receiver, scope, d)
        }
        syn::Expr::MethodCall(m) => {
            let name = m.method.to_string();
            // a key built by a method of a named value (`self.lease_key.of(&id)`) is named by
            // both: the value's name says what the key is
            let shown = match receiver_name(&m.receiver) {
                Some(r) => format!("{r}.{name}"),
                None => name.clone(),
            };
            let mut k = KeyRef::hole(Some(shown));
            if !is_std_value_method(&name) {
                k.call = Some(Box::new((name, m.args.len())));
            }
            k
        }
        syn::Expr::Call(c) => {
            let name = match &*c.func {
                syn::Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
                _ => None,
            };
            let path_text = match &*c.func {
                syn::Expr::Path(p) => path_text(&p.path),
                _ => String::new(),
            };
            if c.args.len() == 1
                && (path_text.ends_with("String::from")
                    || path_text.ends_with("Cow::from")
                    || path_text.ends_with("Cow::Borrowed")
                    || path_text.ends_with("Cow::Owned")
                    || path_text == "Some")
            {
                return key_at(&c.args[0], scope, d);
            }
            match name {
                Some(n) => {
                    let mut k = KeyRef::hole(Some(n.clone()));
                    k.call = Some(Box::new((n, c.args.len())));
                    k.call_in = path_type(&c.func).map(String::into_boxed_str);
                    k
                }
                None => KeyRef::hole(None),
            }
        }
        // `v + 1` is arithmetic, never a key: `+` builds text only as `String + &str`
        syn::Expr::Binary(b)
            if matches!(b.op, syn::BinOp::Add(_))
                && (is_number(&b.left) || is_number(&b.right)) =>
        {
            KeyRef::hole(None)
        }
        syn::Expr::Binary(b) if matches!(b.op, syn::BinOp::Add(_)) => {
            key_at(&b.left, scope, d).concat(key_at(&b.right, scope, d))
        }
        syn::Expr::Macro(m) => macro_key(&m.mac, scope, d),
        syn::Expr::Field(f) => {
            let field = match &f.member {
                syn::Member::Named(i) => i.to_string(),
                syn::Member::Unnamed(i) => i.index.to_string(),
            };
            let mut k = KeyRef::hole(Some(field.clone()));
            if ident_of(&f.base).as_deref() == Some("self") {
                if let Some(t) = scope.impl_type() {
                    k.field = Some(Box::new((t.to_string(), field)));
                }
            }
            k
        }
        syn::Expr::Path(p) if p.qself.is_none() => {
            let Some(last) = p.path.segments.last() else {
                return KeyRef::hole(None);
            };
            let name = last.ident.to_string();
            if p.path.segments.len() == 1 {
                if let Some(k) = scope.local_key(&name) {
                    let mut k = k;
                    k.add_names([name]);
                    return k;
                }
                if let Some(i) = scope.param(&name) {
                    let mut k = KeyRef::hole(Some(name.clone()));
                    k.param = Some((i, name));
                    return k;
                }
            }
            if let Some(k) = scope.file_const(&name) {
                return k;
            }
            if is_screaming(&name) {
                return KeyRef {
                    parts: vec![Part::Const(name.clone())],
                    names: vec![name],
                    ..Default::default()
                };
            }
            KeyRef::hole(Some(name))
        }
        _ => KeyRef::hole(None),
    }
}

/// One piece of a `format!` string.
#[derive(Debug, PartialEq, Eq)]
pub enum FmtPiece {
    Lit(String),
    /// `{}` or `{0}`: positional (explicit index when given).
    Positional(Option<usize>),
    /// `{name}`.
    Named(String),
}

/// Split a format string into literal text and placeholders.
pub fn parse_format(fmt: &str) -> Vec<FmtPiece> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                lit.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                lit.push('}');
            }
            '{' => {
                let mut spec = String::new();
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                    spec.push(c);
                }
                if !lit.is_empty() {
                    out.push(FmtPiece::Lit(std::mem::take(&mut lit)));
                }
                let arg = spec.split(':').next().unwrap_or("").trim().to_string();
                if arg.is_empty() {
                    out.push(FmtPiece::Positional(None));
                } else if let Ok(i) = arg.parse::<usize>() {
                    out.push(FmtPiece::Positional(Some(i)));
                } else {
                    out.push(FmtPiece::Named(arg));
                }
            }
            c => lit.push(c),
        }
    }
    if !lit.is_empty() {
        out.push(FmtPiece::Lit(lit));
    }
    out
}

/// Macro arguments as expressions, when they parse as a comma-separated list (and nest
/// shallowly enough to parse).
pub fn macro_args(mac: &syn::Macro) -> Option<Vec<syn::Expr>> {
    use syn::parse::Parser;
    if super::depth::check(mac.tokens.clone()).is_some() {
        return None;
    }
    let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
    parser
        .parse2(mac.tokens.clone())
        .ok()
        .map(|p| p.into_iter().collect())
}

fn macro_name(mac: &syn::Macro) -> String {
    mac.path
        .segments
        .last()
        .map(|s| s.ident.to_string())
        .unwrap_or_default()
}

fn macro_key(mac: &syn::Macro, scope: &dyn Scope, depth: usize) -> KeyRef {
    let name = macro_name(mac);
    let Some(args) = macro_args(mac) else {
        return KeyRef::hole(None);
    };
    match name.as_str() {
        "format" => {
            let Some(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(fmt),
                ..
            })) = args.first()
            else {
                return KeyRef::hole(None);
            };
            let rest = &args[1..];
            let positional: Vec<&syn::Expr> = rest
                .iter()
                .filter(|a| !matches!(a, syn::Expr::Assign(_)))
                .collect();
            let named = |n: &str| {
                rest.iter().find_map(|a| match a {
                    syn::Expr::Assign(asg) if ident_of(&asg.left).as_deref() == Some(n) => {
                        Some(&*asg.right)
                    }
                    _ => None,
                })
            };
            let mut key = KeyRef::default();
            let mut next = 0;
            for piece in parse_format(&fmt.value()) {
                let part = match piece {
                    FmtPiece::Lit(s) => KeyRef::lit(&s),
                    FmtPiece::Positional(i) => {
                        let i = i.unwrap_or_else(|| {
                            next += 1;
                            next - 1
                        });
                        match positional.get(i) {
                            Some(e) => key_at(e, scope, depth + 1),
                            None => KeyRef::hole(None),
                        }
                    }
                    FmtPiece::Named(n) => match named(&n) {
                        Some(e) => key_at(e, scope, depth + 1),
                        None if n.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                            let path: syn::Expr = match syn::parse_str(&n) {
                                Ok(p) => p,
                                Err(_) => return KeyRef::hole(None),
                            };
                            key_at(&path, scope, depth + 1)
                        }
                        None => KeyRef::hole(None),
                    },
                };
                key = key.concat(part);
            }
            key
        }
        "concat" => args.iter().fold(KeyRef::default(), |k, a| {
            k.concat(key_at(a, scope, depth + 1))
        }),
        _ => KeyRef::hole(None),
    }
}

/// Whether an expression is a compile-time constant value (and its text) or computed.
pub fn value_of(e: &syn::Expr, scope: &dyn Scope) -> Value {
    value_at(e, scope, 0)
}

fn value_at(e: &syn::Expr, scope: &dyn Scope, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Dynamic;
    }
    let d = depth + 1;
    match e {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Verbatim(_) => Value::Dynamic,
            lit => Value::Constant(quote::ToTokens::to_token_stream(lit).to_string()),
        },
        syn::Expr::Reference(r) => value_at(&r.expr, scope, d),
        syn::Expr::Paren(p) => value_at(&p.expr, scope, d),
        syn::Expr::Group(g) => value_at(&g.expr, scope, d),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => value_at(&u.expr, scope, d),
        syn::Expr::Cast(c) => value_at(&c.expr, scope, d),
        syn::Expr::MethodCall(m) if m.args.is_empty() && strip_method(&m.method.to_string()) => {
            value_at(&m.receiver, scope, d)
        }
        syn::Expr::Call(c) if c.args.len() == 1 => {
            let is_from = matches!(&*c.func, syn::Expr::Path(p)
                if p.path.segments.last().is_some_and(|s| s.ident == "from"));
            if is_from {
                value_at(&c.args[0], scope, d)
            } else {
                Value::Dynamic
            }
        }
        syn::Expr::Path(p) if p.qself.is_none() => {
            let Some(last) = p.path.segments.last() else {
                return Value::Dynamic;
            };
            let name = last.ident.to_string();
            if p.path.segments.len() == 1 {
                if let Some(v) = scope.local_value(&name) {
                    return v;
                }
                if scope.param(&name).is_some() {
                    return Value::Dynamic;
                }
            }
            if scope.file_const(&name).is_some() || is_screaming(&name) {
                return Value::Constant(name);
            }
            Value::Dynamic
        }
        _ => Value::Dynamic,
    }
}

/// The type a path call's function belongs to: `Keys` of `Keys::lock(..)` (a path through
/// modules, `keys::lock(..)`, names none).
fn path_type(func: &syn::Expr) -> Option<String> {
    let syn::Expr::Path(p) = func else {
        return None;
    };
    let ty = p.path.segments.iter().rev().nth(1)?.ident.to_string();
    (ty != "Self" && ty.chars().next().is_some_and(|c| c.is_ascii_uppercase())).then_some(ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Empty;
    impl Scope for Empty {
        fn local_key(&self, _: &str) -> Option<KeyRef> {
            None
        }
        fn local_value(&self, _: &str) -> Option<Value> {
            None
        }
        fn param(&self, name: &str) -> Option<usize> {
            (name == "job").then_some(0)
        }
        fn file_const(&self, name: &str) -> Option<KeyRef> {
            (name == "PREFIX").then(|| KeyRef::lit("lock:"))
        }
        fn impl_type(&self) -> Option<&str> {
            Some("Lock")
        }
    }

    fn key(src: &str) -> KeyRef {
        key_of(&syn::parse_str(src).unwrap(), &Empty)
    }

    #[test]
    fn positional_and_named_holes_make_the_same_template() {
        assert_eq!(key(r#"format!("lock:{}", name)"#).template(), "lock:{}");
        assert_eq!(key(r#"format!("lock:{name}")"#).template(), "lock:{}");
        assert_eq!(
            key(r#"&format!("lock:{}:x", id.to_string())"#).template(),
            "lock:{}:x"
        );
    }

    #[test]
    fn constants_are_inlined_and_braces_kept() {
        assert_eq!(key(r#"format!("{}{}", PREFIX, job)"#).template(), "lock:{}");
        assert_eq!(
            key(r#"format!("{{{}}}:lock", job)"#).template(),
            "{{{}}}:lock"
        );
        assert_eq!(key(r#"PREFIX.to_string() + &job"#).template(), "lock:{}");
        let k = key("job");
        assert_eq!(k.param, Some((0, "job".to_string())));
    }

    #[test]
    fn adding_a_number_is_arithmetic_not_a_key() {
        assert_eq!(key("job + 1").template(), "{}");
        assert_eq!(key("(2) + job").template(), "{}");
        assert!(key("job + 1").names.is_empty());
        assert_eq!(key(r#"PREFIX.to_string() + "1""#).template(), "lock:1");
    }

    #[test]
    fn fields_of_self_and_helper_calls_are_recorded() {
        let k = key("&self.key");
        assert_eq!(
            k.field.as_deref(),
            Some(&("Lock".to_string(), "key".to_string()))
        );
        let k = key("lock_key(&id)");
        assert_eq!(k.call.as_deref(), Some(&("lock_key".to_string(), 1)));
    }

    #[test]
    fn values() {
        let v = |s: &str| value_of(&syn::parse_str(s).unwrap(), &Empty);
        assert_eq!(v(r#""1""#), Value::Constant(r#""1""#.into()));
        assert_eq!(v("true"), Value::Constant("true".into()));
        assert_eq!(v("LOCKED"), Value::Constant("LOCKED".into()));
        assert_eq!(v("&token"), Value::Dynamic);
        assert_eq!(v("Uuid::new_v4().to_string()"), Value::Dynamic);
        assert_eq!(
            v(r#""locked".to_string()"#),
            Value::Constant(r#""locked""#.into())
        );
    }
}
