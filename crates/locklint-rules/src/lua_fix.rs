//! The fix of the Lua script rules: make an unguarded `DEL`/expiry conditional on the key
//! holding the caller's token, with the `ARGV` the code proves is the token.
//!
//! The token's `ARGV` is proven by the script itself (it compares the key's value with
//! `ARGV[n]`) or by its call sites in Rust (they bind a token-named value to `ARGV[n]`). Without
//! a proof the fix is only shown, comparing with the first `ARGV` the script does not use. No fix
//! is offered where a `GET` guard would be wrong: a key the script uses as a hash, set, sorted
//! set, list or stream (`GET` fails with `WRONGTYPE`), or a write of several keys (`GET` takes
//! one).

use full_moon::ast::{
    BinOp, Call, Expression, FunctionArgs, FunctionCall, Index, LocalAssignment, Prefix, Suffix,
};
use full_moon::node::Node;
use full_moon::visitors::Visitor;
use locklint_ir::diagnostic::{Applicability, Edit, Fix, Location};
use locklint_ir::lua::{KeyWrite, Script};
use locklint_ir::source::Span;
use locklint_ir::FileIr;
use locklint_ir::Origin;
use std::collections::{HashMap, HashSet};

/// Commands of the other Redis types: a key they touch does not hold a string.
fn typed_command(cmd: &str) -> bool {
    let c = cmd.to_ascii_lowercase();
    c.starts_with('h')
        || c.starts_with('z')
        || c.starts_with('x')
        || matches!(
            c.as_str(),
            "sadd"
                | "srem"
                | "sismember"
                | "smismember"
                | "smembers"
                | "scard"
                | "spop"
                | "srandmember"
                | "smove"
                | "lpush"
                | "rpush"
                | "lpushx"
                | "rpushx"
                | "lpop"
                | "rpop"
                | "llen"
                | "lrange"
                | "lindex"
                | "lrem"
                | "lset"
                | "ltrim"
                | "lpos"
                | "lmove"
                | "blpop"
                | "brpop"
                | "pfadd"
                | "pfcount"
                | "setbit"
                | "getbit"
                | "bitcount"
                | "geoadd"
        )
}

/// One `redis.call`/`redis.pcall`: its command, its argument texts, where it is.
struct RedisCall {
    command: String,
    args: Vec<String>,
    range: (usize, usize),
}

/// What the fix needs to know of a script beyond the guard analysis.
#[derive(Default)]
struct Shape {
    calls: Vec<RedisCall>,
    /// `x == ARGV[n]` / `x ~= ARGV[n]`: the comparison's range and `n`.
    compares: Vec<((usize, usize), usize)>,
    /// `local k = KEYS[1]`: the local and the key.
    aliases: Vec<(String, String)>,
    /// The `ARGV` indices the script reads.
    argvs: std::collections::BTreeSet<usize>,
    /// Where the piece being walked starts in the script.
    base: usize,
}

fn squeeze(n: &impl std::fmt::Display) -> String {
    n.to_string().split_whitespace().collect()
}

/// `n` of `ARGV[n]`.
fn argv_index(e: &Expression) -> Option<usize> {
    squeeze(e)
        .strip_prefix("ARGV[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The byte range of a node in the piece that starts at `base` (tokens walked from the last,
/// as in the guard analysis).
fn range(n: &impl Node, base: usize) -> (usize, usize) {
    let start = n.start_position().map(|p| p.bytes()).unwrap_or(0);
    let end = n
        .tokens()
        .rev()
        .map(|t| t.token().end_position().bytes())
        .max()
        .unwrap_or(start);
    (base + start, base + end.max(start))
}

impl Visitor for Shape {
    fn visit_function_call(&mut self, c: &FunctionCall) {
        let Prefix::Name(n) = c.prefix() else { return };
        if n.token().to_string() != "redis" {
            return;
        }
        let suffixes: Vec<&Suffix> = c.suffixes().collect();
        let [Suffix::Index(Index::Dot { name, .. }), Suffix::Call(Call::AnonymousCall(args))] =
            suffixes.as_slice()
        else {
            return;
        };
        let FunctionArgs::Parentheses { arguments, .. } = &**args else {
            return;
        };
        if !matches!(name.token().to_string().as_str(), "call" | "pcall") {
            return;
        }
        let mut args = arguments.iter().map(squeeze);
        let Some(command) = args.next() else { return };
        self.calls.push(RedisCall {
            command: command.trim_matches(|c| c == '\'' || c == '"').to_string(),
            args: args.collect(),
            range: range(c, self.base),
        });
    }

    fn visit_expression(&mut self, e: &Expression) {
        if let Some(n) = argv_index(e) {
            self.argvs.insert(n);
        }
        if let Expression::BinaryOperator { lhs, binop, rhs } = e {
            if matches!(binop, BinOp::TwoEqual(_) | BinOp::TildeEqual(_)) {
                if let Some(n) = argv_index(lhs).or_else(|| argv_index(rhs)) {
                    self.compares.push((range(e, self.base), n));
                }
            }
        }
    }

    fn visit_local_assignment(&mut self, l: &LocalAssignment) {
        let names: Vec<String> = l.names().iter().map(|n| n.token().to_string()).collect();
        let values: Vec<String> = l.expressions().iter().map(squeeze).collect();
        for (n, v) in names.into_iter().zip(values) {
            if v.starts_with("KEYS[") {
                self.aliases.push((n, v));
            }
        }
    }
}

impl Shape {
    /// Walk the script in the pieces the guard analysis parsed it in.
    fn of(text: &str) -> Option<Shape> {
        let mut s = Shape::default();
        for (start, end) in locklint_frontend::lua::guard::pieces(text).ok()? {
            let ast =
                full_moon::parse_fallible(text.get(start..end)?, full_moon::LuaVersion::lua51());
            if !ast.errors().is_empty() {
                return None;
            }
            s.base = start;
            s.visit_ast(ast.ast());
        }
        Some(s)
    }
}

/// What the fix knows of one script, gathered once for all its writes.
pub struct ScriptFacts {
    shape: Option<Shape>,
    /// The `ARGV` the call sites bind to a token.
    bound: Option<usize>,
    /// Index in `shape.calls` by the call's range.
    calls_at: HashMap<(usize, usize), usize>,
    /// The key arguments of commands of another type than string.
    typed_keys: HashSet<String>,
    /// `KEYS[n]` to the locals bound to it.
    aliases: HashMap<String, Vec<String>>,
    /// Per key, the `ARGV` its comparison uses (when all agree).
    compared: HashMap<String, Option<usize>>,
}

impl ScriptFacts {
    /// Read a script once; `sites` gives the call sites of the Rust file holding it.
    pub fn of(
        file: &FileIr,
        script: &Script,
        sites: impl FnOnce() -> Option<usize>,
    ) -> ScriptFacts {
        let text = file
            .embedded
            .get(script.embedded)
            .map_or("", |e| e.text.as_str());
        let shape = locklint_ir::isolate::catch(|| Shape::of(text))
            .ok()
            .flatten();
        let bound = file
            .embedded
            .get(script.embedded)
            .filter(|e| e.origin != Origin::File)
            .and_then(|_| sites());
        let mut facts = ScriptFacts {
            shape: None,
            bound,
            calls_at: HashMap::new(),
            typed_keys: HashSet::new(),
            aliases: HashMap::new(),
            compared: HashMap::new(),
        };
        if let Some(shape) = &shape {
            for (i, c) in shape.calls.iter().enumerate() {
                facts.calls_at.entry(c.range).or_insert(i);
                if typed_command(&c.command) {
                    if let Some(k) = c.args.first() {
                        facts.typed_keys.insert(k.clone());
                    }
                }
            }
            for (n, k) in &shape.aliases {
                facts.aliases.entry(k.clone()).or_default().push(n.clone());
            }
        }
        facts.shape = shape;
        facts
    }

    /// Whether a command of another type than string touches `key` (itself or a local bound
    /// to it).
    fn typed(&self, key: &str) -> bool {
        self.typed_keys.contains(key)
            || self
                .aliases
                .get(key)
                .is_some_and(|ns| ns.iter().any(|n| self.typed_keys.contains(n)))
    }

    /// The `ARGV` the script compares `key`'s value with, when its comparisons agree.
    fn compared(&mut self, file: &FileIr, script: &Script, key: &str) -> Option<usize> {
        if let Some(n) = self.compared.get(key) {
            return *n;
        }
        let n = (|| {
            let emb = file.embedded.get(script.embedded)?;
            let at = script.check_of(key)?;
            let mut ns = self
                .shape
                .as_ref()?
                .compares
                .iter()
                .filter_map(|&((s, e), n)| {
                    let sp = emb.map.span(s, e);
                    (sp.start < at.end && at.start < sp.end).then_some(n)
                });
            let n = ns.next()?;
            ns.all(|m| m == n).then_some(n)
        })();
        self.compared.insert(key.to_string(), n);
        n
    }
}

/// A key the guard can `GET`: `KEYS[n]`.
fn single_key(key: &str) -> bool {
    key.strip_prefix("KEYS[")
        .and_then(|k| k.strip_suffix(']'))
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// Make the write conditional on the caller's token, in place:
/// `if redis.call('get', KEYS[1]) == ARGV[n] then <write> end` for a statement, or
/// `(redis.call('get', KEYS[1]) == ARGV[n] and <write> or 0)` inside an expression.
pub fn guard_fix(
    file: &FileIr,
    script: &Script,
    w: &KeyWrite,
    facts: &mut ScriptFacts,
) -> Option<Fix> {
    let emb = file.embedded.get(script.embedded)?;
    let text = &emb.text;
    let (start, end) = w.range;
    if !single_key(&w.key) || facts.typed(&w.key) {
        return None;
    }
    let compared = facts.compared(file, script, &w.key);
    let shape = facts.shape.as_ref()?;
    let call = facts
        .calls_at
        .get(&w.range)
        .and_then(|&i| shape.calls.get(i));
    let release = matches!(w.kind, locklint_ir::lua::WriteKind::Release);
    if release && call.is_none_or(|c| c.args.len() != 1) {
        return None;
    }
    let proven = match (compared, facts.bound) {
        (Some(a), Some(b)) if a != b => None,
        (a, b) => a.or(b),
    };
    let (argv, mut applicability) = match proven {
        Some(n) => (n, Applicability::Unsafe),
        None => (
            (1..).find(|n| !shape.argvs.contains(n)).unwrap_or(1),
            Applicability::DisplayOnly,
        ),
    };
    if emb.origin != Origin::File {
        let literal = file
            .file
            .text
            .get(emb.span.start..emb.span.end)
            .unwrap_or("");
        if !(literal.ends_with('"') || literal.ends_with('#')) {
            applicability = Applicability::DisplayOnly;
        }
    }
    let before = text.get(..start)?;
    let line_before = before.rsplit('\n').next().unwrap_or("").trim_end();
    let expression = ["return", "=", "(", ",", "and", "or", "not"]
        .iter()
        .any(|p| line_before.ends_with(p))
        && !line_before.ends_with("then");
    let check = format!("redis.call('get', {}) == ARGV[{argv}]", w.key);
    let otherwise = if w.command.to_ascii_uppercase().starts_with("SET") {
        "false"
    } else {
        "0"
    };
    let (prefix, suffix) = if expression {
        (format!("({check} and "), format!(" or {otherwise})"))
    } else {
        (format!("if {check} then "), " end".to_string())
    };
    let s = emb.map.to_source(start);
    let e = emb.map.span(start, end).end;
    let edits = vec![
        Edit {
            location: Location::new(file.file.clone(), Span::new(s, s)),
            replacement: prefix,
        },
        Edit {
            location: Location::new(file.file.clone(), Span::new(e, e)),
            replacement: suffix,
        },
    ];
    let message = match proven {
        Some(_) => format!(
            "{} only while `{}` holds the caller's token (`ARGV[{argv}]`)",
            w.command, w.key
        ),
        None => format!(
            "{} only while `{}` holds the caller's token; pass the token as `ARGV[{argv}]`",
            w.command, w.key
        ),
    };
    Some(Fix {
        message,
        applicability,
        edits,
    })
}
