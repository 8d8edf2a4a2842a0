//! Code paths taken from the fixture files exactly as written, for fixtures whose function
//! cannot be called sensibly (a `.sql` or `.lua` file, a heartbeat that only runs after ten
//! seconds): Rust string constants and call arguments through `syn`, SQL statements through
//! locklint's own SQL lexer, Lua scripts as the whole file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The repository's `fixtures/` directory.
pub fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// The text of `fixtures/<rel>`.
pub fn text(rel: &str) -> String {
    let path = fixtures_root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn parse(rel: &str) -> syn::File {
    syn::parse_file(&text(rel)).unwrap_or_else(|e| panic!("{rel} does not parse: {e}"))
}

/// The value of the string constant `name` in the Rust fixture `rel`.
pub fn rust_const(rel: &str, name: &str) -> String {
    parse(rel)
        .items
        .iter()
        .find_map(|item| match item {
            syn::Item::Const(c) if c.ident == name => match &*c.expr {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .unwrap_or_else(|| panic!("{rel} has no string constant {name}"))
}

/// The arguments of every call of the method `method` in the Rust fixture `rel`, in source
/// order, each evaluated with `env` (see [`eval`]).
pub fn method_args(rel: &str, method: &str, env: &HashMap<&str, String>) -> Vec<Vec<String>> {
    method_call_exprs(&parse(rel), method)
        .iter()
        .map(|args| args.iter().map(|a| eval(a, env)).collect())
        .collect()
}

/// The value of a call argument: a literal's value, or a (borrowed) variable's value from
/// `env`. Anything else is not something a proof should guess at.
pub fn eval(expr: &syn::Expr, env: &HashMap<&str, String>) -> String {
    match expr {
        syn::Expr::Reference(r) => eval(&r.expr, env),
        syn::Expr::Paren(p) => eval(&p.expr, env),
        syn::Expr::Lit(syn::ExprLit { lit, .. }) => match lit {
            syn::Lit::Str(s) => s.value(),
            syn::Lit::Int(i) => i.base10_digits().to_string(),
            other => panic!(
                "unexpected literal {}",
                quote_expr(&syn::Expr::Lit(syn::ExprLit {
                    attrs: Vec::new(),
                    lit: other.clone()
                }))
            ),
        },
        syn::Expr::Path(p) => {
            let name = p
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_else(|| panic!("unexpected path {}", quote_expr(expr)));
            env.get(name.as_str())
                .cloned()
                .unwrap_or_else(|| panic!("no value given for `{name}`"))
        }
        other => panic!("cannot evaluate `{}`", quote_expr(other)),
    }
}

fn quote_expr(expr: &syn::Expr) -> String {
    quote::ToTokens::to_token_stream(expr).to_string()
}

/// The statements of the SQL fixture `rel`, exactly as written (without the `;`).
pub fn sql_statements(rel: &str) -> Vec<String> {
    let text = text(rel);
    locklint::frontend::sql::lex::split(&text)
        .iter()
        .map(|piece| text[piece.start..piece.end].to_string())
        .collect()
}

/// The statement of the SQL fixture `rel` that starts with the keyword `word`
/// (case-insensitive); there must be exactly one.
pub fn sql_statement(rel: &str, word: &str) -> String {
    let matching: Vec<String> = sql_statements(rel)
        .into_iter()
        .filter(|s| {
            s.split_whitespace()
                .next()
                .is_some_and(|w| w.eq_ignore_ascii_case(word))
        })
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "{rel}: statements starting with {word}: {matching:?}"
    );
    matching.into_iter().next().unwrap_or_default()
}

/// The start of a method chain: a call such as `redis::cmd("SET")` or
/// `redis::Script::new(X)` (the function's last path segment and its first argument), or a
/// local variable.
enum Root {
    Call(String, Box<syn::Expr>),
    Local(String),
}

/// A method chain's calls, in call order, each with its first argument.
type Calls = Vec<(String, Option<syn::Expr>)>;

/// A method chain `root.m1(a1).m2(a2)..`, looking through `?`, `.await`, `&` and
/// parentheses: its root and its calls with their first argument, in call order.
fn chain(expr: &syn::Expr) -> Option<(Root, Calls)> {
    match expr {
        syn::Expr::MethodCall(m) => {
            let (root, mut calls) = chain(&m.receiver)?;
            calls.push((m.method.to_string(), m.args.first().cloned()));
            Some((root, calls))
        }
        syn::Expr::Call(c) => match &*c.func {
            syn::Expr::Path(p) => {
                let name = p
                    .path
                    .segments
                    .iter()
                    .map(|s| s.ident.to_string())
                    .collect::<Vec<_>>()
                    .join("::");
                Some((
                    Root::Call(name, Box::new(c.args.first()?.clone())),
                    Vec::new(),
                ))
            }
            _ => None,
        },
        syn::Expr::Path(p) => Some((Root::Local(p.path.get_ident()?.to_string()), Vec::new())),
        syn::Expr::Try(t) => chain(&t.expr),
        syn::Expr::Await(a) => chain(&a.base),
        syn::Expr::Paren(p) => chain(&p.expr),
        syn::Expr::Reference(r) => chain(&r.expr),
        _ => None,
    }
}

/// The values of the `method(..)` calls of a chain.
fn picked(
    calls: &[(String, Option<syn::Expr>)],
    method: &str,
    env: &HashMap<&str, String>,
) -> Vec<String> {
    calls
        .iter()
        .filter(|(m, _)| m == method)
        .filter_map(|(_, e)| e.as_ref())
        .map(|e| eval(e, env))
        .collect()
}

/// Every `redis::cmd(NAME)` builder of the Rust fixture `rel` as the command it sends: the
/// name, then the values of its `.arg(..)` calls, including those added by later statements
/// to a local that holds the builder. Values are evaluated with `env`.
pub fn commands(rel: &str, env: &HashMap<&str, String>) -> Vec<Vec<String>> {
    struct Builders<'e> {
        env: &'e HashMap<&'e str, String>,
        found: Vec<Vec<String>>,
        locals: HashMap<String, usize>,
    }
    impl Builders<'_> {
        /// Records the chain if it builds a command; whether it did.
        fn chain(&mut self, expr: &syn::Expr, bind: Option<String>) -> bool {
            let Some((root, calls)) = chain(expr) else {
                return false;
            };
            let index = match root {
                Root::Call(f, name) if f == "cmd" || f.ends_with("::cmd") => {
                    self.found.push(vec![eval(&name, self.env)]);
                    self.found.len() - 1
                }
                Root::Local(x) => match self.locals.get(&x) {
                    Some(&i) => i,
                    None => return false,
                },
                Root::Call(..) => return false,
            };
            let args = picked(&calls, "arg", self.env);
            self.found[index].extend(args);
            if let Some(name) = bind {
                self.locals.insert(name, index);
            }
            true
        }
    }
    impl<'ast> Visit<'ast> for Builders<'_> {
        fn visit_local(&mut self, local: &'ast syn::Local) {
            let name = match &local.pat {
                syn::Pat::Ident(i) => Some(i.ident.to_string()),
                syn::Pat::Type(t) => match &*t.pat {
                    syn::Pat::Ident(i) => Some(i.ident.to_string()),
                    _ => None,
                },
                _ => None,
            };
            if let Some(init) = &local.init {
                if self.chain(&init.expr, name) {
                    return;
                }
            }
            syn::visit::visit_local(self, local);
        }
        fn visit_expr(&mut self, expr: &'ast syn::Expr) {
            if !self.chain(expr, None) {
                syn::visit::visit_expr(self, expr);
            }
        }
    }
    let mut builders = Builders {
        env,
        found: Vec::new(),
        locals: HashMap::new(),
    };
    builders.visit_file(&parse(rel));
    builders.found
}

/// A `redis::Script::new(..)` invocation as written: the script (a literal, or a string
/// constant of the same file) and its `.key(..)` and `.arg(..)` values.
#[derive(Debug)]
pub struct ScriptCall {
    pub script: String,
    pub keys: Vec<String>,
    pub args: Vec<String>,
    /// The call that runs it: the chain's own last call (`invoke_async`, `invoke`), or the
    /// method the invocation is handed to (`invoke_script`).
    pub runner: String,
}

/// Every `redis::Script::new(..).key(..).arg(..)` chain of the Rust fixture `rel`, in source
/// order, values evaluated with `env`.
pub fn script_calls(rel: &str, env: &HashMap<&str, String>) -> Vec<ScriptCall> {
    struct Scripts<'e> {
        rel: &'e str,
        env: &'e HashMap<&'e str, String>,
        found: Vec<ScriptCall>,
        /// The method whose arguments are being visited.
        enclosing: Option<String>,
    }
    impl<'ast> Visit<'ast> for Scripts<'_> {
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            self.visit_expr(&call.receiver);
            let outer = self.enclosing.replace(call.method.to_string());
            for arg in &call.args {
                self.visit_expr(arg);
            }
            self.enclosing = outer;
        }
        fn visit_expr(&mut self, expr: &'ast syn::Expr) {
            if let Some((Root::Call(f, script), calls)) = chain(expr) {
                if f.ends_with("Script::new") && !calls.is_empty() {
                    let script = match &*script {
                        syn::Expr::Path(p) => {
                            let name = p.path.get_ident().expect("a constant's name").to_string();
                            rust_const(self.rel, &name)
                        }
                        other => eval(other, &HashMap::new()),
                    };
                    let last = calls.last().map(|(m, _)| m.clone()).unwrap_or_default();
                    let runner = if last == "key" || last == "arg" {
                        self.enclosing.clone().unwrap_or_default()
                    } else {
                        last
                    };
                    self.found.push(ScriptCall {
                        script,
                        keys: picked(&calls, "key", self.env),
                        args: picked(&calls, "arg", self.env),
                        runner,
                    });
                    return;
                }
            }
            syn::visit::visit_expr(self, expr);
        }
    }
    let mut scripts = Scripts {
        rel,
        env,
        found: Vec::new(),
        enclosing: None,
    };
    scripts.visit_file(&parse(rel));
    scripts.found
}

/// Every `.set_options(key, value, options)` call of the Rust fixture `rel`: the key and value
/// evaluated with `env`, and the options built with the real redis-rs `SetOptions` calls
/// the file makes (following a local the options were bound to).
pub fn set_options_calls(
    rel: &str,
    env: &HashMap<&str, String>,
) -> Vec<(String, String, redis::SetOptions)> {
    let file = parse(rel);
    struct Lets(HashMap<String, syn::Expr>);
    impl<'ast> Visit<'ast> for Lets {
        fn visit_local(&mut self, local: &'ast syn::Local) {
            if let (syn::Pat::Ident(i), Some(init)) = (&local.pat, &local.init) {
                self.0.insert(i.ident.to_string(), (*init.expr).clone());
            }
            syn::visit::visit_local(self, local);
        }
    }
    let mut lets = Lets(HashMap::new());
    lets.visit_file(&file);
    fn last(path: &syn::Path) -> String {
        path.segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default()
    }
    fn options(expr: &syn::Expr, lets: &HashMap<String, syn::Expr>) -> redis::SetOptions {
        match expr {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                let name = p
                    .path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default();
                options(
                    lets.get(&name).unwrap_or_else(|| panic!("no `let {name}`")),
                    lets,
                )
            }
            syn::Expr::Call(c) if matches!(&*c.func, syn::Expr::Path(p) if last(&p.path) == "default") => {
                redis::SetOptions::default()
            }
            syn::Expr::MethodCall(m) => {
                let base = options(&m.receiver, lets);
                let arg = m.args.first().expect("an argument");
                match (m.method.to_string().as_str(), arg) {
                    ("conditional_set", syn::Expr::Path(p)) => match last(&p.path).as_str() {
                        "NX" => base.conditional_set(redis::ExistenceCheck::NX),
                        "XX" => base.conditional_set(redis::ExistenceCheck::XX),
                        other => panic!("unknown existence check {other}"),
                    },
                    ("with_expiration", syn::Expr::Call(c)) => {
                        let syn::Expr::Path(p) = &*c.func else {
                            panic!("unknown expiry")
                        };
                        let n: u64 = eval(c.args.first().expect("a time"), &HashMap::new())
                            .parse()
                            .expect("a number");
                        match last(&p.path).as_str() {
                            "EX" => base.with_expiration(redis::SetExpiry::EX(n)),
                            "PX" => base.with_expiration(redis::SetExpiry::PX(n)),
                            other => panic!("unknown expiry {other}"),
                        }
                    }
                    (other, _) => panic!("unknown SetOptions call {other}"),
                }
            }
            other => panic!("cannot build SetOptions from `{}`", quote_expr(other)),
        }
    }
    let calls = method_call_exprs(&file, "set_options");
    calls
        .iter()
        .map(|args| {
            assert_eq!(args.len(), 3, "set_options(key, value, options)");
            (
                eval(&args[0], env),
                eval(&args[1], env),
                options(&args[2], &lets.0),
            )
        })
        .collect()
}

fn method_call_exprs(file: &syn::File, method: &str) -> Vec<Vec<syn::Expr>> {
    struct Calls<'a> {
        method: &'a str,
        found: Vec<Vec<syn::Expr>>,
    }
    impl<'ast> Visit<'ast> for Calls<'_> {
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            // the receiver first: `a.arg(x).arg(y)` lists `x` before `y`
            syn::visit::visit_expr(self, &call.receiver);
            if call.method == self.method {
                self.found.push(call.args.iter().cloned().collect());
            }
            for arg in &call.args {
                syn::visit::visit_expr(self, arg);
            }
        }
    }
    let mut calls = Calls {
        method,
        found: Vec::new(),
    };
    calls.visit_file(file);
    calls.found
}
