//! The arguments a Redis script is invoked with, read from its call sites in the Rust file:
//! which `ARGV` the code binds to the holder's token. A fix that compares a key with an `ARGV`
//! value relies on it.
//!
//! Call sites: `redis::Script::new(S).key(k).arg(a)..` (also through a local holding the
//! script), fred's `eval(S, keys, args)`, and `cmd("EVAL").arg(S).arg(n).arg(keys..).arg(args..)`,
//! where `S` is the script's literal or the constant holding it.

use locklint_ir::source::{SourceFile, Span};
use std::collections::{HashMap, HashSet};
use syn::visit::Visit;

/// The script a call site runs: its literal, or the name of the constant or static holding it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ScriptRef {
    Literal(Span),
    Name(String),
}

/// Every script call site of a file, read in one pass: per script, the positions (1-based
/// `ARGV` indices) of the token-named values each site passes.
#[derive(Debug, Default)]
pub struct CallSites {
    sites: HashMap<ScriptRef, Vec<Vec<usize>>>,
}

impl CallSites {
    /// Read the call sites of a Rust file (none when it does not parse).
    pub fn of(file: &SourceFile) -> CallSites {
        let Ok(ast) = syn::parse_file(&file.text) else {
            return CallSites::default();
        };
        let mut v = Sites {
            file,
            aliases: HashMap::new(),
            roots: HashSet::new(),
            out: CallSites::default(),
        };
        v.visit_file(&ast);
        let out = v.out;
        drop(ast);
        // the call sites hold no syntax; the parse's spans are not needed again
        proc_macro2::extra::invalidate_current_thread_spans();
        out
    }

    /// The 1-based `ARGV` index every call site of the script (its literal at `literal`, or a
    /// constant named in `names`) binds to a token-named value; `None` when there is no call
    /// site, or the sites do not name exactly one such value, or disagree.
    pub fn token_argv(&self, literal: Span, names: &[String]) -> Option<usize> {
        let mut found: Option<usize> = None;
        let mut any = false;
        let refs = std::iter::once(ScriptRef::Literal(literal))
            .chain(names.iter().map(|n| ScriptRef::Name(n.clone())));
        for r in refs {
            for tokens in self.sites.get(&r).into_iter().flatten() {
                any = true;
                let [n] = tokens.as_slice() else { return None };
                if found.is_some_and(|f| f != *n) {
                    return None;
                }
                found = Some(*n);
            }
        }
        found.filter(|_| any)
    }
}

/// [`CallSites::token_argv`] of one script, reading the file's call sites.
#[cfg(test)]
fn token_argv(file: &SourceFile, literal: Span, names: &[String]) -> Option<usize> {
    CallSites::of(file).token_argv(literal, names)
}

/// The name a value is read from: `token`, `&self.token`, `token.to_string()`, `lock.token`.
fn value_name(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Reference(r) => value_name(&r.expr),
        syn::Expr::Paren(p) => value_name(&p.expr),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => value_name(&u.expr),
        syn::Expr::MethodCall(m)
            if m.args.is_empty()
                && matches!(
                    m.method.to_string().as_str(),
                    "to_string" | "as_str" | "as_bytes" | "clone" | "as_ref" | "to_owned"
                ) =>
        {
            value_name(&m.receiver)
        }
        syn::Expr::Path(p) if p.path.segments.len() == 1 => {
            Some(p.path.segments[0].ident.to_string())
        }
        syn::Expr::Field(f) => match &f.member {
            syn::Member::Named(n) => Some(n.to_string()),
            syn::Member::Unnamed(_) => None,
        },
        _ => None,
    }
}

/// The 1-based positions of the token-named values among `args`.
fn token_positions<'a>(args: impl IntoIterator<Item = &'a syn::Expr>) -> Vec<usize> {
    args.into_iter()
        .enumerate()
        .filter(|(_, a)| value_name(a).is_some_and(|n| super::fixes::is_token_name(&n)))
        .map(|(i, _)| i + 1)
        .collect()
}

struct Sites<'a> {
    file: &'a SourceFile,
    /// Locals holding `Script::new(S)`, by name.
    aliases: HashMap<String, Vec<ScriptRef>>,
    /// Chains already read (by their root's span), so a chain's inner links are not read again.
    roots: HashSet<Span>,
    out: CallSites,
}

impl Sites<'_> {
    fn span(&self, node: &impl syn::spanned::Spanned) -> Span {
        let s = node.span();
        let (a, b) = (s.start(), s.end());
        Span::new(
            self.file.lines.offset(&self.file.text, a.line, a.column),
            self.file.lines.offset(&self.file.text, b.line, b.column),
        )
    }

    fn site(&mut self, script: ScriptRef, tokens: Vec<usize>) {
        self.out.sites.entry(script).or_default().push(tokens);
    }

    /// Which script `e` may be: a literal, or a name that may hold one.
    fn script_ref(&self, e: &syn::Expr) -> Option<ScriptRef> {
        match e {
            syn::Expr::Reference(r) => self.script_ref(&r.expr),
            syn::Expr::Paren(p) => self.script_ref(&p.expr),
            syn::Expr::Lit(_) => Some(ScriptRef::Literal(self.span(e))),
            syn::Expr::Path(p) => p
                .path
                .segments
                .last()
                .map(|s| ScriptRef::Name(s.ident.to_string())),
            _ => None,
        }
    }

    /// `Script::new(S)`: the script `S`.
    fn new_script(&self, e: &syn::Expr) -> Option<ScriptRef> {
        let syn::Expr::Call(c) = e else { return None };
        let syn::Expr::Path(p) = &*c.func else {
            return None;
        };
        let mut segs = p.path.segments.iter().rev();
        let is_new = segs.next().is_some_and(|s| s.ident == "new")
            && segs.next().is_some_and(|s| s.ident == "Script");
        if !is_new || c.args.len() != 1 {
            return None;
        }
        self.script_ref(&c.args[0])
    }

    /// A method chain from its root: the root and each link's name and arguments.
    fn chain(e: &syn::ExprMethodCall) -> (&syn::Expr, Vec<(String, Vec<&syn::Expr>)>) {
        let mut links = Vec::new();
        let mut cur: &syn::Expr = &e.receiver;
        links.push((e.method.to_string(), e.args.iter().collect()));
        while let syn::Expr::MethodCall(m) = cur {
            links.push((m.method.to_string(), m.args.iter().collect()));
            cur = &m.receiver;
        }
        links.reverse();
        (cur, links)
    }

    fn read_chain(&mut self, e: &syn::ExprMethodCall) {
        let (root, links) = Self::chain(e);
        let root_span = self.span(root);
        if self.roots.contains(&root_span) {
            return;
        }
        let args: Vec<&syn::Expr> = links
            .iter()
            .filter(|(n, _)| n == "arg")
            .flat_map(|(_, a)| a.iter().copied())
            .collect();
        if let Some(script) = self.new_script(root) {
            self.roots.insert(root_span);
            self.site(script, token_positions(args));
            return;
        }
        let alias = match root {
            syn::Expr::Path(p) => p
                .path
                .get_ident()
                .and_then(|i| self.aliases.get(&i.to_string()))
                .cloned(),
            _ => None,
        };
        if let Some(scripts) = alias {
            if links.iter().any(|(n, _)| n == "arg" || n == "key") {
                self.roots.insert(root_span);
                let tokens = token_positions(args);
                for script in scripts {
                    self.site(script, tokens.clone());
                }
            }
            return;
        }
        // `cmd("EVAL").arg(S).arg(n).arg(keys..).arg(args..)`
        if let syn::Expr::Call(c) = root {
            let is_eval = matches!(&*c.func, syn::Expr::Path(p)
                if p.path.segments.last().is_some_and(|s| s.ident == "cmd"))
                && c.args.len() == 1
                && matches!(&c.args[0], syn::Expr::Lit(l)
                    if matches!(&l.lit, syn::Lit::Str(s) if s.value().eq_ignore_ascii_case("eval")));
            let Some(script) = args
                .first()
                .filter(|_| is_eval)
                .and_then(|s| self.script_ref(s))
            else {
                return;
            };
            self.roots.insert(root_span);
            let keys = match args.get(1) {
                Some(syn::Expr::Lit(l)) => match &l.lit {
                    syn::Lit::Int(i) => i.base10_parse::<usize>().ok(),
                    _ => None,
                },
                _ => None,
            };
            // a site whose arguments cannot be told apart proves nothing
            let tokens = keys.map_or_else(Vec::new, |k| {
                token_positions(args.iter().skip(2 + k).copied())
            });
            self.site(script, tokens);
        }
    }
}

/// The values of fred's `eval` arguments: `vec![a, b]`, `[a, b]`, `&[..]`, or one value.
fn fred_args(e: &syn::Expr) -> Vec<syn::Expr> {
    match e {
        syn::Expr::Reference(r) => fred_args(&r.expr),
        syn::Expr::Array(a) => a.elems.iter().cloned().collect(),
        syn::Expr::Macro(m) if m.mac.path.is_ident("vec") => m
            .mac
            .parse_body_with(
                syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
            )
            .map(|p| p.into_iter().collect())
            .unwrap_or_default(),
        syn::Expr::Tuple(t) if t.elems.is_empty() => Vec::new(),
        other => vec![other.clone()],
    }
}

impl<'ast> Visit<'ast> for Sites<'_> {
    fn visit_local(&mut self, l: &'ast syn::Local) {
        if let (syn::Pat::Ident(p), Some(init)) = (&l.pat, &l.init) {
            if let Some(script) = self.new_script(&init.expr) {
                self.aliases
                    .entry(p.ident.to_string())
                    .or_default()
                    .push(script);
            }
        }
        syn::visit::visit_local(self, l);
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        let fred = (m.method == "eval" && m.args.len() == 3)
            .then(|| self.script_ref(&m.args[0]))
            .flatten();
        if let Some(script) = fred {
            let args = fred_args(&m.args[2]);
            self.site(script, token_positions(&args));
        } else {
            self.read_chain(m);
        }
        syn::visit::visit_expr_method_call(self, m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn argv(code: &str, script: &str) -> Option<usize> {
        let file = SourceFile::new(PathBuf::from("a.rs"), code.to_string());
        let at = code.find(script).unwrap();
        let names = vec!["RENEW".to_string()];
        token_argv(&file, Span::new(at, at + script.len()), &names)
    }

    const LIT: &str = "\"return redis.call('pexpire', KEYS[1], ARGV[1])\"";

    #[test]
    fn the_token_is_the_argument_bound_to_a_token_name() {
        let code = format!(
            "fn f(c: &mut C, key: &str, token: &str, ttl: u64) {{\n    redis::Script::new({LIT}).key(key).arg(ttl).arg(token).invoke(c);\n}}"
        );
        assert_eq!(argv(&code, LIT), Some(2));
        let alias = format!(
            "fn f(c: &mut C, key: &str, token: &str, ttl: u64) {{\n    let s = redis::Script::new({LIT});\n    s.key(key).arg(&self.lock_token).arg(ttl).invoke(c);\n}}"
        );
        assert_eq!(argv(&alias, LIT), Some(1));
        let fred = format!(
            "fn f(c: &C, key: &str, token: &str, ttl: u64) {{\n    c.eval({LIT}, vec![key], vec![ttl.to_string(), token.to_string()]);\n}}"
        );
        assert_eq!(argv(&fred, LIT), Some(2));
        let cmd = format!(
            "fn f(c: &mut C, key: &str, token: &str, ttl: u64) {{\n    redis::cmd(\"EVAL\").arg({LIT}).arg(1).arg(key).arg(token).arg(ttl).query(c);\n}}"
        );
        assert_eq!(argv(&cmd, LIT), Some(1));
        let constant = "const RENEW: &str = \"..\";\nfn f(c: &mut C, token: &str) {\n    redis::Script::new(RENEW).key(\"k\").arg(token).invoke(c);\n}";
        assert_eq!(argv(constant, "\"..\""), Some(1));
    }

    #[test]
    fn no_call_site_or_no_token_proves_nothing() {
        let ttl_only = format!(
            "fn f(c: &mut C, key: &str, ttl: u64) {{\n    redis::Script::new({LIT}).key(key).arg(ttl).invoke(c);\n}}"
        );
        assert_eq!(argv(&ttl_only, LIT), None);
        let unused = format!("const S: &str = {LIT};");
        assert_eq!(argv(&unused, LIT), None);
        let two = format!(
            "fn f(c: &mut C, token: &str, ttl: u64) {{\n    redis::Script::new({LIT}).key(\"k\").arg(token).invoke(c);\n    redis::Script::new({LIT}).key(\"k\").arg(ttl).arg(token).invoke(c);\n}}"
        );
        let first = two.find(LIT).unwrap();
        let file = SourceFile::new(PathBuf::from("a.rs"), two.clone());
        // each literal is its own script: the first is invoked with the token as ARGV[1]
        assert_eq!(
            token_argv(&file, Span::new(first, first + LIT.len()), &[]),
            Some(1)
        );
    }
}
