//! Which key-changing Redis calls of a Lua script are guarded by an ownership check.
//!
//! The script is walked in order with the set of keys that are known, at that point, to hold the
//! caller's token: established by a dominating comparison of `GET key` with an `ARGV` value
//! (`if .. == ARGV[1] then`, an early `return` or `error` under `~=`, the `else` of a `~=`, the
//! right operand of `and`, a statement `assert(..)`), by a successful `SET key ARGV[..] NX` / `SETNX`, or by the script
//! itself writing an `ARGV` value to the key. Every `DEL`/`UNLINK` and every expiry change
//! (`PEXPIRE`, `EXPIRE`, `PEXPIREAT`, `EXPIREAT`, `SET .. KEEPTTL`, `SET .. XX PX`) is recorded
//! with whether its key is in that set.

use full_moon::ast::{
    BinOp, Block, Call, Expression, Field, FunctionArgs, FunctionBody, FunctionCall, Index,
    LastStmt, Parameter, Prefix, Stmt, Suffix, UnOp, Var, VarExpression,
};
use full_moon::node::Node;
use full_moon::tokenizer::{TokenReference, TokenType};
use locklint_ir::lua::{KeyShape, KeyUse, KeyWrite, WriteKind};
use locklint_ir::KeyRef;
use std::collections::{BTreeSet, HashMap};

/// What the guard analysis found in one script.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub writes: Vec<KeyWrite>,
    /// Keys whose value the script compares with an `ARGV` value somewhere (`GET key == ARGV[1]`,
    /// directly or through locals, or an ownership read such as `HEXISTS key ARGV[1] == 1`), with
    /// the byte range of the first such comparison.
    pub checked: Vec<(String, (usize, usize))>,
    /// Every key a call of a command that takes keys names, and where it comes from.
    pub keys: Vec<KeyUse>,
}

impl Scan {
    /// Where the script compares the value of `key`, if it does.
    pub fn check_of(&self, key: &str) -> Option<(usize, usize)> {
        self.checked.iter().find(|(k, _)| k == key).map(|(_, r)| *r)
    }
}

/// A parse error: message and byte range in the script text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub message: String,
    pub range: (usize, usize),
}

/// Scripts longer than this are parsed in pieces of whole top-level statements of about
/// this size: the parser's syntax tree takes some hundred times the text, and its recovery
/// from a syntax error near a piece's start up to two thousand times what follows.
const PIECE_BYTES: usize = 32 * 1024;

/// A longer top-level statement (in a script parsed in pieces) is not parsed: one statement
/// is one piece.
pub const MAX_STATEMENT_BYTES: usize = 32 * 1024;

/// Parse a Redis script (Lua 5.1) and analyse its key-changing calls. A long script is parsed
/// and walked one piece of top-level statements at a time, with the walk's state (locals, keys
/// known to be owned) carried from piece to piece.
pub fn scan(text: &str) -> Result<Scan, Vec<SyntaxError>> {
    let pieces = pieces(text).map_err(|at| {
        vec![SyntaxError {
            message: format!(
                "a top-level statement of this script is longer than {} KB; the script was not analysed",
                MAX_STATEMENT_BYTES / 1024
            ),
            range: (at, at),
        }]
    })?;
    let mut w = Walker::default();
    let mut facts = Some(Facts::new());
    let last = pieces.len().saturating_sub(1);
    for (i, &(start, end)) in pieces.iter().enumerate() {
        let ast = parse(&text[start..end]).map_err(|errors| {
            errors
                .into_iter()
                .map(|e| SyntaxError {
                    message: e.message,
                    range: (start + e.range.0, start + e.range.1),
                })
                .collect::<Vec<_>>()
        })?;
        let block = ast.nodes();
        if i < last && block.last_stmt().is_some() {
            return Err(vec![SyntaxError {
                message: "unexpected statement after `return`: it must be the last statement of its block".to_string(),
                range: (end, end),
            }]);
        }
        w.base = start;
        if let Some(f) = facts.take() {
            facts = w.statements(block, f);
        }
    }
    Ok(Scan {
        writes: w.writes,
        checked: w.checked,
        keys: w.keys,
    })
}

/// The pieces a script is parsed in: the whole text, or for a long script pieces of whole
/// top-level statements (see [`PIECE_BYTES`]); `Err(offset)` when the top-level statement
/// there is longer than [`MAX_STATEMENT_BYTES`].
pub fn pieces(text: &str) -> Result<Vec<(usize, usize)>, usize> {
    if text.len() > PIECE_BYTES {
        super::lex::pieces(text, PIECE_BYTES, MAX_STATEMENT_BYTES)
    } else {
        Ok(vec![(0, text.len())])
    }
}

/// Parse one piece of a script. A panic inside the parser (it has been seen on input it does
/// not expect) becomes a syntax error of the piece.
fn parse(text: &str) -> Result<full_moon::ast::Ast, Vec<SyntaxError>> {
    // the parser is not run on a script it cannot accept: it panicked on a backtick, and kept
    // hundreds of bytes per byte of a script full of `\u{..}` escapes outside strings
    if let Some(at) = super::lex::stray_character(text) {
        let message = match text.as_bytes()[at] {
            b'`' => "unexpected character '`' (Lua 5.1 has no backtick strings)".to_string(),
            c => format!("unexpected character '{}'", c as char),
        };
        return Err(vec![SyntaxError {
            message,
            range: (at, at + 1),
        }]);
    }
    let parsed = locklint_ir::isolate::catch(|| {
        full_moon::parse_fallible(text, full_moon::LuaVersion::lua51())
    })
    .map_err(|why| {
        vec![SyntaxError {
            message: format!("the Lua parser failed on this script ({why})"),
            range: (0, 0),
        }]
    })?;
    // the first error is the one reported
    if !parsed.errors().is_empty() {
        return Err(parsed
            .errors()
            .iter()
            .take(1)
            .map(|e| {
                let (s, t) = e.range();
                SyntaxError {
                    message: e.error_message().trim().to_string(),
                    range: (s.bytes(), t.bytes()),
                }
            })
            .collect());
    }
    Ok(parsed.into_ast())
}

/// What is known about a key at a point of the script.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum KeyFact {
    /// The key holds the caller's token. `KEYS[*]`: every key in `KEYS`; `KEYS[each]`: the
    /// element of `KEYS` of the current iteration of a loop over them.
    Owned(String),
    /// The key does not exist (`EXISTS key == 0`): whatever the script writes to it creates it.
    Absent(String),
    /// The caller was just found not to hold the key (`HEXISTS key ARGV[1] == 0`).
    NotHeld(String),
    /// The key exists without an expiry (`TTL key == -1`): giving it one is no renewal.
    NoExpiry(String),
    /// The script compared the number of the key's holders with a limit (`HLEN key >= n`): a
    /// lock with several holders, which a caller joins by taking a free slot.
    Bounded(String),
}

/// Facts that hold at a point of the script.
type Facts = BTreeSet<KeyFact>;

/// All keys the script received.
const ALL_KEYS: &str = "KEYS[*]";
/// The element of `KEYS` in the current iteration of a loop over `KEYS`.
const EACH_KEY: &str = "KEYS[each]";

/// Whether `key` is known to hold the caller's token.
fn owned(facts: &Facts, key: &str) -> bool {
    facts.contains(&KeyFact::Owned(key.to_string()))
        || (key.starts_with("KEYS[") && facts.contains(&KeyFact::Owned(ALL_KEYS.to_string())))
}

/// The abstract value of an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Val {
    /// A key: `KEYS[1]`.
    Key(String),
    /// `redis.call('get', key)`.
    Get(String),
    /// An ownership read whose reply says whether the caller holds the key
    /// (`HEXISTS key ARGV[..]`, `SISMEMBER key ARGV[..]`, `HGET key ARGV[..]`, `ZSCORE ..`).
    Owner(String),
    /// A value derived from the script's arguments (`ARGV[1]`, `tostring(ARGV[1])`).
    Argv,
    /// The reply of `SET key ARGV[..] NX` / `SETNX key ARGV[..]`: truthy (or 1) when acquired.
    Acquired(String),
    /// The reply of a `SET key ARGV[..]` that writes the caller's token unconditionally.
    Wrote(String),
    /// The reply of `EXISTS key`; `true` when it names that key alone.
    Exists(String, bool),
    /// The reply of `TTL key` / `PTTL key`.
    Ttl(String),
    /// The reply of `HLEN key` / `SCARD key` / `ZCARD key`.
    Count(String),
    /// An index over `KEYS` (`for i = 1, #KEYS`, `for i in ipairs(KEYS)`).
    KeyIndex,
    /// The reply of `MGET` over every key (`MGET unpack(KEYS)`), indexed like `KEYS`.
    AllValues,
    /// `redis.call` / `redis.pcall` itself, kept in a local (`local rcall = redis.call`).
    RedisCall,
    /// Where an `ARGV` value starts in the value of a key (`string.find(redis.call('get',
    /// key), ARGV[1], 1, true)`): `1` when the value starts with the caller's token.
    FoundAt(String),
    /// A boolean: the facts it establishes when true and when false
    /// (`local holds = redis.call('hexists', KEYS[1], ARGV[1]) == 1`).
    Cond(Facts, Facts),
    Number(String),
    Other,
}

#[derive(Default)]
struct Walker {
    /// Locals in scope, innermost last.
    locals: Vec<(String, Val)>,
    /// Where each name is bound in `locals`, innermost last.
    bound: HashMap<String, Vec<usize>>,
    /// The key shape each local holds, when it holds a key (aligned with `locals`).
    shapes: Vec<Option<KeyShape>>,
    writes: Vec<KeyWrite>,
    keys: Vec<KeyUse>,
    checked: Vec<(String, (usize, usize))>,
    /// Offset of the parsed piece in the script text.
    base: usize,
    /// A `break` was seen since the innermost loop started.
    broke: bool,
    /// How many function bodies enclose the statement being walked.
    fn_depth: usize,
    /// Local functions of the script that compare the value of their first parameter's key
    /// with an `ARGV` value and return the outcome (`local function owns(k) return
    /// redis.call('get', k) == ARGV[1] end`).
    owner_checks: BTreeSet<String>,
}

/// A node's byte range, from its first token to the end of its last. `Node::range` can stop
/// short (for `x[1]` it ends at the index expression, before the `]`), so the end is the
/// furthest token end. The tokens are walked from the last: the parser's iterator takes time
/// quadratic in their number walked from the first.
fn range_of(n: &impl Node) -> (usize, usize) {
    let start = n.start_position().map(|p| p.bytes()).unwrap_or(0);
    let end = n
        .tokens()
        .rev()
        .map(|t| t.token().end_position().bytes())
        .max()
        .unwrap_or(start);
    (start, end.max(start))
}

fn token_text(t: &TokenReference) -> String {
    t.token().to_string()
}

fn string_literal(e: &Expression) -> Option<String> {
    match e {
        Expression::String(t) => match t.token_type() {
            TokenType::StringLiteral { literal, .. } => Some(literal.to_string()),
            _ => None,
        },
        Expression::Parentheses { expression, .. } => string_literal(expression),
        _ => None,
    }
}

/// An expression's source text with whitespace collapsed.
fn text_of(e: &impl std::fmt::Display) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn union(a: &Facts, b: &Facts) -> Facts {
    a.union(b).cloned().collect()
}

fn intersect(a: &Facts, b: &Facts) -> Facts {
    a.intersection(b).cloned().collect()
}

fn one(k: &str) -> Facts {
    std::iter::once(KeyFact::Owned(k.to_string())).collect()
}

/// Whether a function call statement ends the script (`error(..)`).
fn is_error_call(c: &FunctionCall) -> bool {
    matches!(c.prefix(), Prefix::Name(n) if token_text(n) == "error")
}

/// A range in the script text from a range in the parsed piece at `base`.
fn shifted(base: usize, (s, e): (usize, usize)) -> (usize, usize) {
    (base + s, base + e)
}

/// `1`.
fn is_one(e: &Expression) -> bool {
    matches!(e, Expression::Number(n) if token_text(n).trim() == "1")
}

/// `#KEYS`.
fn is_count_of_keys(e: &Expression) -> bool {
    matches!(e, Expression::UnaryOperator { unop: UnOp::Hash(_), expression } if text_of(expression.as_ref()) == "KEYS")
}

/// `ipairs(KEYS)` / `pairs(KEYS)`.
fn is_ipairs_of_keys(e: &Expression) -> bool {
    let t = text_of(e).replace(' ', "");
    t == "ipairs(KEYS)" || t == "pairs(KEYS)"
}

/// The condition of an `assert(cond, ..)` statement.
fn assertion(c: &FunctionCall) -> Option<&Expression> {
    if !matches!(c.prefix(), Prefix::Name(n) if token_text(n) == "assert") {
        return None;
    }
    let mut suffixes = c.suffixes();
    let (Some(Suffix::Call(Call::AnonymousCall(args))), None) = (suffixes.next(), suffixes.next())
    else {
        return None;
    };
    match args.as_ref() {
        FunctionArgs::Parentheses { arguments, .. } => arguments.iter().next(),
        _ => None,
    }
}

/// The argument positions (the command is 0) that are keys, for the commands that take keys
/// this analysis knows; none for the others (`PUBLISH` takes a channel, `TIME` nothing).
fn key_positions(cmd: &str, len: usize) -> Vec<usize> {
    match cmd {
        "DEL" | "UNLINK" | "EXISTS" | "TOUCH" | "MGET" | "WATCH" | "SINTER" | "SUNION"
        | "SDIFF" | "PFCOUNT" => (1..len).collect(),
        "MSET" | "MSETNX" => (1..len).step_by(2).collect(),
        "RENAME" | "RENAMENX" | "RPOPLPUSH" | "LMOVE" | "SMOVE" | "COPY" | "BLMOVE"
        | "BRPOPLPUSH" => (1..len.min(3)).collect(),
        "GET" | "SET" | "SETNX" | "SETEX" | "PSETEX" | "GETSET" | "GETDEL" | "GETEX" | "EXPIRE"
        | "PEXPIRE" | "EXPIREAT" | "PEXPIREAT" | "PERSIST" | "TTL" | "PTTL" | "EXPIRETIME"
        | "PEXPIRETIME" | "INCR" | "INCRBY" | "INCRBYFLOAT" | "DECR" | "DECRBY" | "APPEND"
        | "STRLEN" | "TYPE" | "DELEX" | "HSET" | "HSETNX" | "HMSET" | "HGET" | "HMGET"
        | "HGETALL" | "HDEL" | "HEXISTS" | "HINCRBY" | "HINCRBYFLOAT" | "HLEN" | "HKEYS"
        | "HVALS" | "SADD" | "SREM" | "SISMEMBER" | "SMEMBERS" | "SCARD" | "SPOP" | "ZADD"
        | "ZREM" | "ZSCORE" | "ZCARD" | "ZRANK" | "ZINCRBY" | "ZRANGE" | "ZRANGEBYSCORE"
        | "ZREMRANGEBYSCORE" | "ZREMRANGEBYRANK" | "LPUSH" | "RPUSH" | "LPOP" | "RPOP" | "LLEN"
        | "LRANGE" | "LREM" | "LINDEX" | "LSET" | "LTRIM" | "XADD" | "XDEL" | "XLEN" | "XTRIM"
        | "SETBIT" | "GETBIT" | "BITCOUNT" | "PFADD" => (1..len.min(2)).collect(),
        _ => Vec::new(),
    }
}

/// The operands of a chain of `..` concatenations, in order.
fn concat_operands<'e>(e: &'e Expression, out: &mut Vec<&'e Expression>) {
    match e {
        Expression::BinaryOperator {
            lhs,
            binop: BinOp::TwoDots(_),
            rhs,
        } => {
            concat_operands(lhs, out);
            concat_operands(rhs, out);
        }
        Expression::Parentheses { expression, .. }
            if matches!(
                expression.as_ref(),
                Expression::BinaryOperator {
                    binop: BinOp::TwoDots(_),
                    ..
                }
            ) =>
        {
            concat_operands(expression, out)
        }
        other => out.push(other),
    }
}

impl Walker {
    /// Where the key an expression names comes from (see [`KeyShape`]). Reads the locals in
    /// scope; evaluates nothing.
    fn shape(&self, e: &Expression) -> KeyShape {
        match e {
            Expression::Parentheses { expression, .. } => self.shape(expression),
            Expression::String(_) => match string_literal(e) {
                Some(s) => KeyShape::Literal(KeyRef::lit(&s)),
                None => KeyShape::Unknown,
            },
            Expression::Var(Var::Name(n)) => {
                let name = token_text(n);
                self.local_shape(&name)
                    .cloned()
                    .unwrap_or(KeyShape::Unknown)
            }
            Expression::Var(Var::Expression(x)) => {
                let mut suffixes = x.suffixes();
                let (
                    Prefix::Name(n),
                    Some(Suffix::Index(Index::Brackets { expression, .. })),
                    None,
                ) = (x.prefix(), suffixes.next(), suffixes.next())
                else {
                    return KeyShape::Unknown;
                };
                let base = token_text(n);
                if self.lookup(&base).is_some() {
                    return KeyShape::Unknown;
                }
                match base.as_str() {
                    "KEYS" => KeyShape::Declared(match expression.as_ref() {
                        Expression::Number(i) => token_text(i).trim().parse().ok(),
                        _ => None,
                    }),
                    "ARGV" => KeyShape::Built(KeyRef::hole(Some(text_of(e)))),
                    _ => KeyShape::Unknown,
                }
            }
            Expression::FunctionCall(c) => {
                let mut suffixes = c.suffixes();
                let (Prefix::Name(n), Some(Suffix::Call(Call::AnonymousCall(args))), None) =
                    (c.prefix(), suffixes.next(), suffixes.next())
                else {
                    return KeyShape::Unknown;
                };
                let f = token_text(n);
                if self.lookup(&f).is_some() {
                    return KeyShape::Unknown;
                }
                let FunctionArgs::Parentheses { arguments, .. } = args.as_ref() else {
                    return KeyShape::Unknown;
                };
                let mut it = arguments.iter();
                match (f.as_str(), it.next(), it.next()) {
                    ("unpack", Some(a), None)
                        if text_of(a) == "KEYS" && self.lookup("KEYS").is_none() =>
                    {
                        KeyShape::Declared(None)
                    }
                    ("tostring", Some(a), None) => self.shape(a),
                    _ => KeyShape::Unknown,
                }
            }
            Expression::BinaryOperator {
                binop: BinOp::TwoDots(_),
                ..
            } => {
                let mut operands = Vec::new();
                concat_operands(e, &mut operands);
                let shapes: Vec<KeyShape> = operands.iter().map(|o| self.shape(o)).collect();
                let declared: Vec<(usize, Option<usize>)> = shapes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| match s {
                        KeyShape::Declared(k) | KeyShape::Derived { from: k, .. } => Some((i, *k)),
                        _ => None,
                    })
                    .collect();
                match declared.as_slice() {
                    [] => {}
                    [(0, from)] => {
                        let appended = match &shapes[0] {
                            KeyShape::Derived { appended, .. } => *appended,
                            _ => true,
                        };
                        return KeyShape::Derived {
                            from: *from,
                            appended,
                        };
                    }
                    [(_, from)] => {
                        return KeyShape::Derived {
                            from: *from,
                            appended: false,
                        }
                    }
                    _ => {
                        return KeyShape::Derived {
                            from: None,
                            appended: false,
                        }
                    }
                }
                let mut key = KeyRef::default();
                let mut literal = true;
                for (o, s) in operands.iter().zip(shapes) {
                    let part = match s {
                        KeyShape::Literal(k) => k,
                        KeyShape::Built(k) => {
                            literal = false;
                            k
                        }
                        _ => match o {
                            Expression::Number(n) => KeyRef::lit(token_text(n).trim()),
                            _ => {
                                literal = false;
                                KeyRef::hole(Some(text_of(*o)))
                            }
                        },
                    };
                    key = key.concat(part);
                }
                if literal {
                    KeyShape::Literal(key)
                } else {
                    KeyShape::Built(key)
                }
            }
            _ => KeyShape::Unknown,
        }
    }

    fn lookup(&self, name: &str) -> Option<&Val> {
        let at = *self.bound.get(name)?.last()?;
        self.locals.get(at).map(|(_, v)| v)
    }

    fn bind(&mut self, name: String, v: Val) {
        self.bound
            .entry(name.clone())
            .or_default()
            .push(self.locals.len());
        self.locals.push((name, v));
        self.shapes.push(None);
    }

    /// The key shape held by the innermost local `name`.
    fn local_shape(&self, name: &str) -> Option<&KeyShape> {
        let at = *self.bound.get(name)?.last()?;
        self.shapes.get(at)?.as_ref()
    }

    fn set_shape(&mut self, name: &str, shape: KeyShape) {
        if let Some(&at) = self.bound.get(name).and_then(|b| b.last()) {
            if let Some(slot) = self.shapes.get_mut(at) {
                *slot = Some(shape);
            }
        }
    }

    fn assign(&mut self, name: &str, v: Val) {
        if let Some(&at) = self.bound.get(name).and_then(|b| b.last()) {
            if let Some(slot) = self.locals.get_mut(at) {
                slot.1 = v;
            }
        }
    }

    /// Leave the scopes opened since `locals` had `depth` entries.
    fn truncate(&mut self, depth: usize) {
        while self.locals.len() > depth {
            self.shapes.pop();
            if let Some((name, _)) = self.locals.pop() {
                if let Some(b) = self.bound.get_mut(&name) {
                    b.pop();
                    if b.is_empty() {
                        self.bound.remove(&name);
                    }
                }
            }
        }
    }

    /// A node's byte range in the script text.
    fn range(&self, n: &impl Node) -> (usize, usize) {
        let (s, e) = range_of(n);
        (self.base + s, self.base + e)
    }

    fn note_check(&mut self, key: &str, range: (usize, usize)) {
        if !self.checked.iter().any(|(k, _)| k == key) {
            self.checked.push((key.to_string(), range));
        }
    }

    /// Walk a block; `None` when it always ends the script (or the loop), else the facts at
    /// its end.
    fn block(&mut self, b: &Block, facts: Facts) -> Option<Facts> {
        let depth = self.locals.len();
        let out = self.statements(b, facts);
        self.truncate(depth);
        out
    }

    /// Walk a block's statements, leaving its locals in scope.
    fn statements(&mut self, b: &Block, facts: Facts) -> Option<Facts> {
        let mut facts = facts;
        for stmt in b.stmts() {
            facts = self.stmt(stmt, facts.clone())?;
        }
        match b.last_stmt() {
            Some(LastStmt::Return(r)) => {
                for e in r.returns().iter() {
                    self.expr(e, &facts);
                }
                None
            }
            Some(LastStmt::Break(_)) => {
                self.broke = true;
                None
            }
            _ => Some(facts),
        }
    }

    fn stmt(&mut self, s: &Stmt, mut facts: Facts) -> Option<Facts> {
        match s {
            Stmt::LocalAssignment(l) => {
                let shapes: Vec<KeyShape> = l.expressions().iter().map(|e| self.shape(e)).collect();
                let vals: Vec<Val> = l
                    .expressions()
                    .iter()
                    .map(|e| self.expr(e, &facts))
                    .collect();
                for v in &vals {
                    if let Val::Wrote(k) = v {
                        facts.insert(KeyFact::Owned(k.clone()));
                    }
                }
                for (i, n) in l.names().iter().enumerate() {
                    let v = vals.get(i).cloned().unwrap_or(Val::Other);
                    let name = token_text(n);
                    self.bind(name.clone(), v);
                    if let Some(shape) = shapes.get(i) {
                        self.set_shape(&name, shape.clone());
                    }
                }
            }
            Stmt::Assignment(a) => {
                let shapes: Vec<KeyShape> = a.expressions().iter().map(|e| self.shape(e)).collect();
                let vals: Vec<Val> = a
                    .expressions()
                    .iter()
                    .map(|e| self.expr(e, &facts))
                    .collect();
                for v in &vals {
                    if let Val::Wrote(k) = v {
                        facts.insert(KeyFact::Owned(k.clone()));
                    }
                }
                for (i, var) in a.variables().iter().enumerate() {
                    match var {
                        Var::Name(n) => {
                            let v = vals.get(i).cloned().unwrap_or(Val::Other);
                            let name = token_text(n);
                            self.assign(&name, v);
                            let shape = shapes.get(i).cloned().unwrap_or(KeyShape::Unknown);
                            self.set_shape(&name, shape);
                        }
                        other => {
                            self.var(other, &facts);
                        }
                    }
                }
            }
            Stmt::FunctionCall(c) => {
                if let Some(cond) = assertion(c) {
                    // `assert(cond, ..)` raises unless `cond` holds
                    let (t, _) = self.cond(cond, &facts);
                    return Some(union(&facts, &t));
                }
                let base = self.base;
                let v = self.call(
                    c.prefix(),
                    c.suffixes(),
                    &|| shifted(base, range_of(c)),
                    &facts,
                );
                if let Val::Wrote(k) = v {
                    facts.insert(KeyFact::Owned(k));
                }
                if is_error_call(c) {
                    return None;
                }
            }
            Stmt::Do(d) => return self.block(d.block(), facts),
            Stmt::If(i) => {
                let (t, f) = self.cond(i.condition(), &facts);
                let mut outs: Vec<Option<Facts>> = vec![self.block(i.block(), union(&facts, &t))];
                let mut rest = union(&facts, &f);
                if let Some(elifs) = i.else_if() {
                    for ei in elifs {
                        let (t, f) = self.cond(ei.condition(), &rest);
                        outs.push(self.block(ei.block(), union(&rest, &t)));
                        rest = union(&rest, &f);
                    }
                }
                match i.else_block() {
                    Some(b) => outs.push(self.block(b, rest)),
                    None => outs.push(Some(rest)),
                }
                let mut live = outs.into_iter().flatten();
                let first = live.next()?;
                return Some(live.fold(first, |acc, f| intersect(&acc, &f)));
            }
            Stmt::While(w) => {
                let (t, _) = self.cond(w.condition(), &facts);
                self.block(w.block(), union(&facts, &t));
            }
            Stmt::Repeat(r) => {
                let depth = self.locals.len();
                // the body's locals stay visible to the `until` condition
                self.statements(r.block(), facts.clone());
                self.expr(r.until(), &facts);
                self.truncate(depth);
            }
            Stmt::NumericFor(n) => {
                self.expr(n.start(), &facts);
                self.expr(n.end(), &facts);
                if let Some(s) = n.step() {
                    self.expr(s, &facts);
                }
                // `for i = 1, #KEYS`: `KEYS[i]` is each key in turn
                let over_keys =
                    is_one(n.start()) && is_count_of_keys(n.end()) && n.step().is_none();
                let depth = self.locals.len();
                let index = if over_keys { Val::KeyIndex } else { Val::Other };
                self.bind(token_text(n.index_variable()), index);
                return Some(self.loop_body(n.block(), facts, over_keys, depth));
            }
            Stmt::GenericFor(g) => {
                for e in g.expressions().iter() {
                    self.expr(e, &facts);
                }
                // `for i, key in ipairs(KEYS)`
                let mut exprs = g.expressions().iter();
                let over_keys =
                    matches!((exprs.next(), exprs.next()), (Some(e), None) if is_ipairs_of_keys(e));
                let depth = self.locals.len();
                for (i, n) in g.names().iter().enumerate() {
                    let v = match i {
                        0 if over_keys => Val::KeyIndex,
                        1 if over_keys => Val::Key(EACH_KEY.to_string()),
                        _ => Val::Other,
                    };
                    let name = token_text(n);
                    self.bind(name.clone(), v);
                    if i == 1 && over_keys {
                        self.set_shape(&name, KeyShape::Declared(None));
                    }
                }
                return Some(self.loop_body(g.block(), facts, over_keys, depth));
            }
            Stmt::FunctionDeclaration(f) => self.function(f.body()),
            Stmt::LocalFunction(f) => {
                let name = token_text(f.name());
                self.bind(name.clone(), Val::Other);
                if self.checks_first_parameter(f.body(), &facts) {
                    self.owner_checks.insert(name);
                }
                self.function(f.body());
            }
            _ => {}
        }
        Some(facts)
    }

    /// Walk a loop's body once. A loop over `KEYS` whose every iteration that goes on ends
    /// owning its key (it returns or raises otherwise, and never breaks) leaves every key owned.
    fn loop_body(&mut self, body: &Block, facts: Facts, over_keys: bool, depth: usize) -> Facts {
        let outer_broke = std::mem::replace(&mut self.broke, false);
        let end = self.block(body, facts.clone());
        let broke = std::mem::replace(&mut self.broke, outer_broke);
        self.truncate(depth);
        let mut facts = facts;
        if over_keys && !broke && end.is_some_and(|f| owned(&f, EACH_KEY)) {
            facts.insert(KeyFact::Owned(ALL_KEYS.to_string()));
        }
        facts
    }

    /// A function body can be called from anywhere: nothing is known on entry.
    fn function(&mut self, body: &FunctionBody) {
        let depth = self.locals.len();
        for p in body.parameters().iter() {
            if let Parameter::Name(n) = p {
                self.bind(token_text(n), Val::Other);
            }
        }
        let outer_broke = std::mem::replace(&mut self.broke, false);
        self.fn_depth += 1;
        self.block(body.block(), Facts::new());
        self.fn_depth -= 1;
        self.broke = outer_broke;
        self.truncate(depth);
    }

    /// Whether a function's body is one `return` of a condition that holds exactly when the
    /// key named by its first parameter holds the caller's token. Walked on the side: nothing
    /// it records is kept.
    fn checks_first_parameter(&mut self, body: &FunctionBody, facts: &Facts) -> bool {
        let Some(Parameter::Name(first)) = body.parameters().iter().next() else {
            return false;
        };
        let block = body.block();
        let (0, Some(LastStmt::Return(r))) = (block.stmts().count(), block.last_stmt()) else {
            return false;
        };
        let [e] = r.returns().iter().collect::<Vec<_>>()[..] else {
            return false;
        };
        let param = token_text(first);
        let (depth, writes, keys, checked) = (
            self.locals.len(),
            self.writes.len(),
            self.keys.len(),
            self.checked.len(),
        );
        for p in body.parameters().iter() {
            if let Parameter::Name(n) = p {
                let name = token_text(n);
                let v = if name == param {
                    Val::Key(param.clone())
                } else {
                    Val::Other
                };
                self.bind(name, v);
            }
        }
        let (when_true, _) = self.cond(e, facts);
        self.truncate(depth);
        self.writes.truncate(writes);
        self.keys.truncate(keys);
        self.checked.truncate(checked);
        when_true.contains(&KeyFact::Owned(param))
    }

    /// A condition: the keys known to be owned when it is true, and when it is false.
    fn cond(&mut self, e: &Expression, facts: &Facts) -> (Facts, Facts) {
        match e {
            Expression::Parentheses { expression, .. } => self.cond(expression, facts),
            Expression::UnaryOperator {
                unop: UnOp::Not(_),
                expression,
            } => {
                let (t, f) = self.cond(expression, facts);
                (f, t)
            }
            Expression::BinaryOperator { lhs, binop, rhs } => match binop {
                BinOp::And(_) => {
                    let (tx, fx) = self.cond(lhs, facts);
                    let (ty, fy) = self.cond(rhs, &union(facts, &tx));
                    (union(&tx, &ty), intersect(&fx, &union(&tx, &fy)))
                }
                BinOp::Or(_) => {
                    let (tx, fx) = self.cond(lhs, facts);
                    let (ty, fy) = self.cond(rhs, &union(facts, &fx));
                    (intersect(&tx, &union(&fx, &ty)), union(&fx, &fy))
                }
                BinOp::TwoEqual(_) => self.equality(lhs, rhs, e, facts),
                BinOp::TildeEqual(_) => {
                    let (t, f) = self.equality(lhs, rhs, e, facts);
                    (f, t)
                }
                BinOp::LessThan(_)
                | BinOp::LessThanEqual(_)
                | BinOp::GreaterThan(_)
                | BinOp::GreaterThanEqual(_) => match self.comparison_operands(lhs, rhs, facts) {
                    Some(k) => {
                        let bounded: Facts = std::iter::once(KeyFact::Bounded(k)).collect();
                        (bounded.clone(), bounded)
                    }
                    None => (Facts::new(), Facts::new()),
                },
                _ => {
                    self.expr(e, facts);
                    (Facts::new(), Facts::new())
                }
            },
            _ => match self.expr(e, facts) {
                Val::Acquired(k) => (one(&k), Facts::new()),
                Val::Cond(t, f) => (t, f),
                _ => (Facts::new(), Facts::new()),
            },
        }
    }

    /// Evaluate both operands of an ordering comparison (`<`, `>=` ..): not an ownership check.
    /// The key whose number of members is compared, if one is.
    fn comparison_operands(
        &mut self,
        lhs: &Expression,
        rhs: &Expression,
        facts: &Facts,
    ) -> Option<String> {
        let a = self.expr(lhs, facts);
        let b = self.expr(rhs, facts);
        match (a, b) {
            (Val::Count(k), _) | (_, Val::Count(k)) => Some(k),
            _ => None,
        }
    }

    /// `lhs == rhs`: keys owned when true, when false. An ownership comparison is noted as a
    /// check of its key wherever it is.
    fn equality(
        &mut self,
        lhs: &Expression,
        rhs: &Expression,
        whole: &Expression,
        facts: &Facts,
    ) -> (Facts, Facts) {
        let a = self.expr(lhs, facts);
        let b = self.expr(rhs, facts);
        let zero = |n: &str| n.trim() == "0";
        let only = |f: KeyFact| -> Facts { std::iter::once(f).collect() };
        let (key, when_equal) = match (a, b) {
            (Val::Get(k), Val::Argv) | (Val::Argv, Val::Get(k)) => (k, true),
            (Val::Owner(k), Val::Argv) | (Val::Argv, Val::Owner(k)) => (k, true),
            // the value starts with the caller's token
            (Val::FoundAt(k), Val::Number(n)) | (Val::Number(n), Val::FoundAt(k))
                if n.trim() == "1" =>
            {
                (k, true)
            }
            (Val::Owner(k), Val::Number(n)) | (Val::Number(n), Val::Owner(k)) => {
                let owned = !zero(&n);
                (k, owned)
            }
            (Val::Acquired(k), Val::Number(n)) | (Val::Number(n), Val::Acquired(k)) => {
                // `SETNX key ARGV[1] == 1`: the script now holds the key; not a read of it
                let owned = !zero(&n);
                return if owned {
                    (one(&k), Facts::new())
                } else {
                    (Facts::new(), one(&k))
                };
            }
            // `EXISTS key == 0`: absent when true; `EXISTS key == 1` of one key: absent when
            // false
            (Val::Exists(k, single), Val::Number(n)) | (Val::Number(n), Val::Exists(k, single)) => {
                let absent = only(KeyFact::Absent(k));
                return if zero(&n) {
                    (absent, Facts::new())
                } else if single && n.trim() == "1" {
                    (Facts::new(), absent)
                } else {
                    (Facts::new(), Facts::new())
                };
            }
            // `TTL key == -1`: the key has no expiry
            (Val::Ttl(k), Val::Number(n)) | (Val::Number(n), Val::Ttl(k)) if n.trim() == "-1" => {
                return (only(KeyFact::NoExpiry(k)), Facts::new());
            }
            _ => return (Facts::new(), Facts::new()),
        };
        let at = self.range(whole);
        self.note_check(&key, at);
        let not_held = only(KeyFact::NotHeld(key.clone()));
        if when_equal {
            (one(&key), not_held)
        } else {
            (not_held, one(&key))
        }
    }

    fn expr(&mut self, e: &Expression, facts: &Facts) -> Val {
        match e {
            Expression::Parentheses { expression, .. } => self.expr(expression, facts),
            Expression::BinaryOperator { lhs, binop, rhs } => match binop {
                BinOp::And(_) | BinOp::Or(_) | BinOp::TwoEqual(_) | BinOp::TildeEqual(_) => {
                    let (t, f) = self.cond(e, facts);
                    if t.is_empty() && f.is_empty() {
                        Val::Other
                    } else {
                        Val::Cond(t, f)
                    }
                }
                BinOp::TwoDots(_) => {
                    let a = self.expr(lhs, facts);
                    let b = self.expr(rhs, facts);
                    if a == Val::Argv || b == Val::Argv {
                        Val::Argv
                    } else {
                        Val::Other
                    }
                }
                BinOp::LessThan(_)
                | BinOp::LessThanEqual(_)
                | BinOp::GreaterThan(_)
                | BinOp::GreaterThanEqual(_) => {
                    self.comparison_operands(lhs, rhs, facts);
                    Val::Other
                }
                _ => {
                    self.expr(lhs, facts);
                    self.expr(rhs, facts);
                    Val::Other
                }
            },
            Expression::UnaryOperator { unop, expression } => match unop {
                UnOp::Not(_) => {
                    let (t, f) = self.cond(e, facts);
                    if t.is_empty() && f.is_empty() {
                        Val::Other
                    } else {
                        Val::Cond(t, f)
                    }
                }
                UnOp::Minus(_) => match self.expr(expression, facts) {
                    Val::Number(n) => Val::Number(format!("-{}", n.trim())),
                    _ => Val::Other,
                },
                _ => {
                    self.expr(expression, facts);
                    Val::Other
                }
            },
            Expression::Function(f) => {
                self.function(f.body());
                Val::Other
            }
            Expression::FunctionCall(c) => {
                let base = self.base;
                self.call(
                    c.prefix(),
                    c.suffixes(),
                    &|| shifted(base, range_of(c)),
                    facts,
                )
            }
            Expression::TableConstructor(t) => {
                for f in t.fields().iter() {
                    match f {
                        Field::ExpressionKey { key, value, .. } => {
                            self.expr(key, facts);
                            self.expr(value, facts);
                        }
                        Field::NameKey { value, .. } => {
                            self.expr(value, facts);
                        }
                        Field::NoKey(value) => {
                            self.expr(value, facts);
                        }
                        _ => {}
                    }
                }
                Val::Other
            }
            Expression::Number(n) => Val::Number(token_text(n)),
            Expression::Var(v) => self.var(v, facts),
            _ => Val::Other,
        }
    }

    fn var(&mut self, v: &Var, facts: &Facts) -> Val {
        match v {
            Var::Name(n) => {
                let name = token_text(n);
                match name.as_str() {
                    "ARGV" => Val::Argv,
                    _ => self.lookup(&name).cloned().unwrap_or(Val::Other),
                }
            }
            Var::Expression(x) => {
                let base = self.base;
                let x: &VarExpression = x;
                self.call(
                    x.prefix(),
                    x.suffixes(),
                    &|| shifted(base, range_of(x)),
                    facts,
                )
            }
            _ => Val::Other,
        }
    }

    /// A prefix with suffixes: an index (`KEYS[1]`, `ARGV[2]`) or a call.
    fn call<'s>(
        &mut self,
        prefix: &Prefix,
        suffixes: impl Iterator<Item = &'s Suffix>,
        whole: &dyn Fn() -> (usize, usize),
        facts: &Facts,
    ) -> Val {
        let suffixes: Vec<&Suffix> = suffixes.collect();
        let base = match prefix {
            Prefix::Name(n) => Some(token_text(n)),
            Prefix::Expression(x) => {
                self.expr(x, facts);
                None
            }
            _ => None,
        };
        // `KEYS[i]`, `ARGV[i]`
        if let ([Suffix::Index(Index::Brackets { expression, .. })], Some(b)) =
            (suffixes.as_slice(), base.as_deref())
        {
            if self.lookup(b).is_none() {
                match b {
                    "KEYS" => {
                        if self.expr(expression, facts) == Val::KeyIndex {
                            return Val::Key(EACH_KEY.to_string());
                        }
                        return Val::Key(format!("KEYS[{}]", text_of(expression.as_ref())));
                    }
                    "ARGV" => {
                        self.expr(expression, facts);
                        return Val::Argv;
                    }
                    _ => {}
                }
            }
            // `values[i]` of `local values = redis.call('mget', unpack(KEYS))`
            if self.lookup(b) == Some(&Val::AllValues)
                && self.expr(expression, facts) == Val::KeyIndex
            {
                return Val::Get(EACH_KEY.to_string());
            }
        }
        // `redis.call` kept as a value
        if let ([Suffix::Index(Index::Dot { name, .. })], Some("redis")) =
            (suffixes.as_slice(), base.as_deref())
        {
            if matches!(token_text(name).as_str(), "call" | "pcall") {
                return Val::RedisCall;
            }
        }
        // `rcall(..)` with `local rcall = redis.call`
        if let ([Suffix::Call(Call::AnonymousCall(args))], Some(b)) =
            (suffixes.as_slice(), base.as_deref())
        {
            if self.lookup(b) == Some(&Val::RedisCall) {
                let args = self.args(args, facts);
                return self.redis_call(&args, whole, facts);
            }
        }
        // `redis.call(..)`, `redis.pcall(..)`
        if let (
            [Suffix::Index(Index::Dot { name, .. }), Suffix::Call(Call::AnonymousCall(args))],
            Some("redis"),
        ) = (suffixes.as_slice(), base.as_deref())
        {
            let method = token_text(name);
            if method == "call" || method == "pcall" {
                let args = self.args(args, facts);
                return self.redis_call(&args, whole, facts);
            }
        }
        // `owns(KEYS[1])` of a local function that compares its parameter's key
        if let ([Suffix::Call(Call::AnonymousCall(args))], Some(b)) =
            (suffixes.as_slice(), base.as_deref())
        {
            if self.owner_checks.contains(b) {
                let vals = self.args(args, facts);
                if let Some((_, Val::Key(k))) = vals.first() {
                    let k = k.clone();
                    self.note_check(&k, whole());
                    return Val::Cond(one(&k), std::iter::once(KeyFact::NotHeld(k)).collect());
                }
                return Val::Other;
            }
        }
        // `string.sub(value, 1, n)`: a prefix of a key's value; `string.find(value, ARGV[1],
        // ..)`: where the caller's token starts in it
        if let (
            [Suffix::Index(Index::Dot { name, .. }), Suffix::Call(Call::AnonymousCall(args))],
            Some("string"),
        ) = (suffixes.as_slice(), base.as_deref())
        {
            if self.lookup("string").is_none() {
                let method = token_text(name);
                let vals = self.args(args, facts);
                let from_one = |v: Option<&(&Expression, Val)>| {
                    v.is_some_and(|(_, v)| matches!(v, Val::Number(n) if n.trim() == "1"))
                };
                match (method.as_str(), vals.as_slice()) {
                    ("sub", [(_, Val::Get(k)), ..]) if from_one(vals.get(1)) => {
                        return Val::Get(k.clone());
                    }
                    ("find", [(_, Val::Get(k)), (_, Val::Argv), ..]) => {
                        return Val::FoundAt(k.clone());
                    }
                    _ => {}
                }
                return if vals.iter().any(|(_, v)| *v == Val::Argv) {
                    Val::Argv
                } else {
                    Val::Other
                };
            }
        }
        // `tostring(x)`, `tonumber(x)`, any other function: ARGV flows through
        if let [Suffix::Call(Call::AnonymousCall(args))] = suffixes.as_slice() {
            let vals: Vec<Val> = self.args(args, facts).into_iter().map(|(_, v)| v).collect();
            if matches!(base.as_deref(), Some("tostring" | "tonumber")) && vals.len() == 1 {
                return vals.into_iter().next().unwrap_or(Val::Other);
            }
            // `unpack(KEYS)`: every key
            if matches!(base.as_deref(), Some("unpack")) && self.lookup("unpack").is_none() {
                if let [arg] = self.args_text(args).as_slice() {
                    if arg == "KEYS" && self.lookup("KEYS").is_none() {
                        return Val::Key(ALL_KEYS.to_string());
                    }
                }
            }
            if vals.contains(&Val::Argv) {
                return Val::Argv;
            }
            return Val::Other;
        }
        let mut derived_from_argv = base.as_deref() == Some("ARGV")
            || base
                .as_deref()
                .and_then(|b| self.lookup(b))
                .is_some_and(|v| *v == Val::Argv);
        for s in &suffixes {
            match s {
                Suffix::Index(Index::Brackets { expression, .. }) => {
                    self.expr(expression, facts);
                }
                Suffix::Call(Call::AnonymousCall(args)) => {
                    let vals = self.args(args, facts);
                    derived_from_argv |= vals.iter().any(|(_, v)| *v == Val::Argv);
                }
                Suffix::Call(Call::MethodCall(m)) => {
                    let vals = self.args(m.args(), facts);
                    derived_from_argv |= vals.iter().any(|(_, v)| *v == Val::Argv);
                }
                _ => {}
            }
        }
        if derived_from_argv {
            Val::Argv
        } else {
            Val::Other
        }
    }

    /// The texts of a call's arguments, without evaluating them.
    fn args_text(&self, args: &FunctionArgs) -> Vec<String> {
        match args {
            FunctionArgs::Parentheses { arguments, .. } => arguments.iter().map(text_of).collect(),
            _ => Vec::new(),
        }
    }

    fn args<'e>(&mut self, args: &'e FunctionArgs, facts: &Facts) -> Vec<(&'e Expression, Val)> {
        match args {
            FunctionArgs::Parentheses { arguments, .. } => {
                arguments.iter().map(|a| (a, self.expr(a, facts))).collect()
            }
            _ => Vec::new(),
        }
    }

    /// `redis.call(cmd, key, ...)` with its arguments already evaluated.
    fn redis_call(
        &mut self,
        args: &[(&Expression, Val)],
        whole: &dyn Fn() -> (usize, usize),
        facts: &Facts,
    ) -> Val {
        let Some(cmd) = args.first().and_then(|(e, _)| string_literal(e)) else {
            return Val::Other;
        };
        let cmd = cmd.to_ascii_uppercase();
        for at in key_positions(&cmd, args.len()) {
            if let Some((e, _)) = args.get(at) {
                let use_ = KeyUse {
                    command: cmd.clone(),
                    shape: self.shape(e),
                    text: text_of(*e),
                    range: self.range(*e),
                };
                self.keys.push(use_);
            }
        }
        let Some((key_expr, key_val)) = args.get(1) else {
            return Val::Other;
        };
        // the key's identity, and how messages name it
        let (key, shown) = match key_val {
            Val::Key(k) if k == ALL_KEYS || k == EACH_KEY => (k.clone(), text_of(*key_expr)),
            Val::Key(k) => (k.clone(), k.clone()),
            _ => (text_of(*key_expr), text_of(*key_expr)),
        };
        let words: Vec<String> = args
            .iter()
            .skip(3)
            .filter_map(|(e, _)| string_literal(e))
            .map(|w| w.to_ascii_uppercase())
            .collect();
        let has = |w: &str| words.iter().any(|x| x == w);
        let value_is_argv = args.get(2).is_some_and(|(_, v)| *v == Val::Argv);
        let any_argv = args.iter().skip(2).any(|(_, v)| *v == Val::Argv);
        let write = |kind, command: String| KeyWrite {
            kind,
            command,
            key: shown.clone(),
            range: whole(),
            guarded: owned(facts, &key)
                || (kind == WriteKind::Renew && facts.contains(&KeyFact::NoExpiry(key.clone()))),
            every_key: key == ALL_KEYS || key == EACH_KEY,
        };
        // inside a function, a key that is not one of the script's `KEYS` comes from the
        // function's callers (its parameters, a Redis Functions library's `keys`), whose
        // checks are not followed: its writes are left unjudged
        let caller_dependent = self.fn_depth > 0 && !key.starts_with("KEYS[");
        let absent = facts.contains(&KeyFact::Absent(key.clone()));
        // the caller is known not to hold the key, which exists: writing its field joins
        // someone else's lock rather than taking a free one
        let joins = facts.contains(&KeyFact::NotHeld(key.clone()))
            && !absent
            && !facts.contains(&KeyFact::Bounded(key.clone()));
        match cmd.as_str() {
            "GET" => Val::Get(key),
            "HGET" | "HEXISTS" | "SISMEMBER" | "ZSCORE" if any_argv => Val::Owner(key),
            // the holder kept in a named field: `HGET key 'owner'`
            "HGET"
                if args.len() == 3
                    && args
                        .get(2)
                        .is_some_and(|(e, _)| string_literal(e).is_some()) =>
            {
                Val::Get(key)
            }
            "EXISTS" => Val::Exists(key, args.len() == 2),
            "TTL" | "PTTL" if args.len() == 2 => Val::Ttl(key),
            "HLEN" | "SCARD" | "ZCARD" if args.len() == 2 => Val::Count(key),
            "MGET" if key == ALL_KEYS && args.len() == 2 => Val::AllValues,
            "DEL" | "UNLINK" if caller_dependent => Val::Other,
            "DEL" | "UNLINK" => {
                self.writes.push(write(WriteKind::Release, cmd.clone()));
                Val::Other
            }
            "PEXPIRE" | "EXPIRE" | "PEXPIREAT" | "EXPIREAT" if caller_dependent => Val::Other,
            "PEXPIRE" | "EXPIRE" | "PEXPIREAT" | "EXPIREAT" => {
                self.writes.push(write(WriteKind::Renew, cmd.clone()));
                Val::Other
            }
            "SET" if caller_dependent && (has("KEEPTTL") || has("XX")) => Val::Other,
            "SETNX" if value_is_argv => Val::Acquired(key),
            "SET" if has("NX") => {
                if value_is_argv {
                    Val::Acquired(key)
                } else {
                    Val::Other
                }
            }
            "SET" if has("KEEPTTL") => {
                self.writes
                    .push(write(WriteKind::Renew, "SET ... KEEPTTL".to_string()));
                Val::Other
            }
            "SET" if has("XX") => {
                let expiry = ["PX", "EX", "PXAT", "EXAT"].into_iter().find(|w| has(w));
                if let Some(x) = expiry {
                    self.writes
                        .push(write(WriteKind::Renew, format!("SET ... XX {x}")));
                }
                Val::Other
            }
            "SET" if value_is_argv => Val::Wrote(key),
            // a hash lock whose field is the holder (`HINCRBY lock ARGV[2] 1`): the script has
            // just recorded the caller as a holder, unless it joined a lock held by others
            "HSET" | "HINCRBY" if value_is_argv && !joins => Val::Wrote(key),
            // a key known to be absent is created by the script: it holds what it wrote
            "SET" | "SETEX" | "PSETEX" | "HSET" | "HMSET" | "HSETNX" | "HINCRBY" | "SADD"
            | "ZADD" | "RPUSH" | "LPUSH" | "INCR" | "INCRBY"
                if absent =>
            {
                Val::Wrote(key)
            }
            _ => Val::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writes(src: &str) -> Vec<(WriteKind, String, String, bool)> {
        scan(src)
            .unwrap_or_else(|e| panic!("{src}: {e:?}"))
            .writes
            .into_iter()
            .map(|w| (w.kind, w.command, w.key, w.guarded))
            .collect()
    }

    fn all_guarded(src: &str) {
        let w = writes(src);
        assert!(!w.is_empty(), "no writes found in {src}");
        assert!(w.iter().all(|x| x.3), "unguarded write in {src}: {w:?}");
    }

    fn unguarded(src: &str) {
        let w = writes(src);
        assert!(
            w.iter().any(|x| !x.3),
            "expected an unguarded write in {src}: {w:?}"
        );
    }

    #[test]
    fn token_prefix_compares_are_guards() {
        all_guarded("local v = redis.call('get', KEYS[1])\nif v and string.sub(v, 1, string.len(ARGV[1])) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0");
        all_guarded("local v = redis.call('get', KEYS[1])\nif v and string.find(v, ARGV[1], 1, true) == 1 then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0");
        // found somewhere in the value, or a part not at its start: no ownership check
        unguarded("local v = redis.call('get', KEYS[1])\nif v and string.find(v, ARGV[1], 1, true) then return redis.call('del', KEYS[1]) end return 0");
        unguarded("local v = redis.call('get', KEYS[1])\nif v and string.find(v, ARGV[1], 1, true) == 2 then return redis.call('del', KEYS[1]) end return 0");
        unguarded("local v = redis.call('get', KEYS[1])\nif v and string.sub(v, 3) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0");
    }

    #[test]
    fn local_functions_that_check_the_owner_guard_their_callers() {
        all_guarded("local function owns(k)\n  return redis.call('get', k) == ARGV[1]\nend\nif owns(KEYS[1]) then return redis.call('del', KEYS[1]) end return 0");
        all_guarded("local function owns(k)\n  return redis.call('get', k) == ARGV[1]\nend\nif not owns(KEYS[1]) then return 0 end\nreturn redis.call('pexpire', KEYS[1], ARGV[2])");
        // a helper that checks existence only, or checks another key: no guard
        unguarded("local function held(k)\n  return redis.call('exists', k) == 1\nend\nif held(KEYS[1]) then return redis.call('del', KEYS[1]) end return 0");
        unguarded("local function owns(k)\n  return redis.call('get', k) == ARGV[1]\nend\nif owns(KEYS[2]) then return redis.call('del', KEYS[1]) end return 0");
    }

    #[test]
    fn writes_to_keys_a_function_is_given_are_left_to_its_callers() {
        // a Redis Functions library: the keys are the callback's parameter
        let lib = "#!lua name=locks\nlocal function release(keys, args)\n  return redis.call('del', keys[1])\nend\nredis.register_function('release', release)";
        assert_eq!(writes(lib), vec![]);
        let helper = "local function set_locks(key, v, ttl)\n  redis.call('set', key, v, 'XX', 'PX', ttl)\n  redis.call('pexpire', key, ttl)\nend\nset_locks(KEYS[1], ARGV[1], ARGV[2])";
        assert_eq!(writes(helper), vec![]);
        // called under the caller's check, which is not followed into the helper
        let under_check = "local function rel(k) return redis.call('del', k) end\nif redis.call('get', KEYS[1]) == ARGV[1] then return rel(KEYS[1]) end";
        assert_eq!(writes(under_check), vec![]);
        // the script's own keys inside a function are still judged
        unguarded("local function drop()\n  return redis.call('del', KEYS[1])\nend\nreturn drop()");
    }

    #[test]
    fn canonical_release_in_any_case_and_order() {
        all_guarded("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0");
        all_guarded("if ARGV[1] == redis.call(\"GET\", KEYS[1]) then return redis.call(\"DEL\", KEYS[1]) else return 0 end");
        all_guarded("if redis.call('Get',KEYS[1]) == ARGV[1] then return redis.call('Unlink',KEYS[1]) else return 0 end");
        all_guarded("local v = redis.call('GET', KEYS[1])\nif v == ARGV[1] then\n  return redis.call('DEL', KEYS[1])\nend\nreturn 0");
        all_guarded("local key = KEYS[1]\nlocal token = ARGV[1]\nif redis.call('get', key) == token then return redis.call('del', key) end return 0");
        all_guarded("if tostring(redis.call('get', KEYS[1])) == tostring(ARGV[1]) then return redis.call('del', KEYS[1]) end return 0");
    }

    #[test]
    fn early_return_else_and_and_chains() {
        all_guarded("if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end return redis.call('pexpire', KEYS[1], ARGV[2])");
        all_guarded("if redis.call('get', KEYS[1]) ~= ARGV[1] then return redis.error_reply('not owner') end redis.call('del', KEYS[1]) return 1");
        all_guarded("if redis.call('get', KEYS[1]) ~= ARGV[1] then error('lost') end redis.call('del', KEYS[1]) return 1");
        all_guarded("if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 else return redis.call('del', KEYS[1]) end");
        all_guarded("if not (redis.call('get', KEYS[1]) == ARGV[1]) then return 0 end return redis.call('expire', KEYS[1], ARGV[2])");
        all_guarded("if redis.call('exists', KEYS[1]) == 1 and redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0");
        all_guarded(
            "return redis.call('get', KEYS[1]) == ARGV[1] and redis.call('del', KEYS[1]) or 0",
        );
        all_guarded("local v = redis.call('get', KEYS[1])\nif v == false or v ~= ARGV[1] then return 0 end\nreturn redis.call('pexpire', KEYS[1], ARGV[2])");
    }

    #[test]
    fn assertions_guard_what_follows() {
        all_guarded("assert(redis.call('get', KEYS[1]) == ARGV[1], 'not the holder')\nreturn redis.call('pexpire', KEYS[1], ARGV[2])");
        unguarded(
            "assert(redis.call('get', KEYS[1]) ~= ARGV[1])\nreturn redis.call('del', KEYS[1])",
        );
    }

    #[test]
    fn renew_forms() {
        all_guarded("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('set', KEYS[1], ARGV[1], 'XX', 'PX', ARGV[2]) end return 0");
        all_guarded("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpireat', KEYS[1], ARGV[2]) end return 0");
        assert_eq!(
            writes("return redis.call('set', KEYS[1], ARGV[1], 'KEEPTTL')")[0].1,
            "SET ... KEEPTTL"
        );
        assert_eq!(
            writes("return redis.call('set', KEYS[1], ARGV[1], 'xx', 'px', ARGV[2])")[0].1,
            "SET ... XX PX"
        );
    }

    #[test]
    fn acquire_then_expire_is_owned() {
        all_guarded("if redis.call('setnx', KEYS[1], ARGV[1]) == 1 then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0");
        all_guarded("redis.call('set', KEYS[1], ARGV[1])\nredis.call('pexpire', KEYS[1], ARGV[2])\nreturn 1");
        all_guarded("if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return nil end redis.call('del', KEYS[1]) return 1");
    }

    #[test]
    fn hash_locks_with_holder_fields() {
        // reentrant acquire: take it when free or already ours, then set the expiry
        all_guarded("if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);");
        // renew
        all_guarded("if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;");
        // reentrant release
        all_guarded("if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;");
    }

    #[test]
    fn unguarded_forms_are_found() {
        unguarded("return redis.call('del', KEYS[1])");
        unguarded("redis.call('get', KEYS[1]) return redis.call('del', KEYS[1])");
        unguarded(
            "local v = redis.call('get', KEYS[1])\nredis.call('del', KEYS[1])\nreturn v == ARGV[1]",
        );
        unguarded("if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('set', KEYS[2], 1) end return redis.call('del', KEYS[1])");
        unguarded("if redis.call('get', KEYS[1]) ~= ARGV[1] then redis.log(redis.LOG_WARNING, 'x') end return redis.call('pexpire', KEYS[1], ARGV[2])");
        unguarded("if redis.call('get', KEYS[2]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0");
        unguarded("if redis.call('get', KEYS[1]) == 'locked' then return redis.call('del', KEYS[1]) end return 0");
        unguarded(
            "if redis.call('get', KEYS[1]) then return redis.call('del', KEYS[1]) end return 0",
        );
        unguarded("if redis.call('get', KEYS[1]) == ARGV[1] or true then return redis.call('del', KEYS[1]) end return 0");
        unguarded("return redis.call('set', KEYS[1], ARGV[1], 'XX', 'PX', ARGV[2])");
    }

    #[test]
    fn multi_key_guards() {
        all_guarded("local v = redis.call('mget', unpack(KEYS))\nfor i, _ in ipairs(KEYS) do if v[i] ~= ARGV[1] then return false end end\nredis.call('del', unpack(KEYS)) return 1");
        all_guarded("for i = 1, #KEYS do if redis.call('get', KEYS[i]) ~= ARGV[1] then return 0 end end\nfor _, k in ipairs(KEYS) do redis.call('pexpire', k, ARGV[2]) end return 1");
        all_guarded("for _, k in ipairs(KEYS) do if redis.call('get', k) ~= ARGV[1] then return 0 end end\nreturn redis.call('del', KEYS[1], KEYS[2])");
        // one key checked, all deleted
        unguarded("if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end\nreturn redis.call('del', unpack(KEYS))");
        // a loop that stops early has not checked every key
        unguarded("for i = 1, #KEYS do if redis.call('get', KEYS[i]) ~= ARGV[1] then break end end\nreturn redis.call('del', unpack(KEYS))");
        // a check of the current key does not cover all keys
        unguarded("for _, k in ipairs(KEYS) do if redis.call('get', k) ~= ARGV[1] then return 0 end redis.call('del', unpack(KEYS)) end");
        // a loop over something else
        unguarded("for _, k in ipairs(ARGV) do if redis.call('get', k) ~= ARGV[1] then return 0 end end\nreturn redis.call('del', unpack(KEYS))");
        // the element of this iteration is checked before its own write
        all_guarded("for _, k in ipairs(KEYS) do if redis.call('get', k) == ARGV[1] then redis.call('del', k) end end");
        let s = scan("local v = redis.call('mget', unpack(KEYS))\nfor i, _ in ipairs(KEYS) do if v[i] ~= ARGV[1] then return false end end\nredis.call('del', unpack(KEYS))").unwrap();
        assert_eq!(s.writes[0].key, "unpack(KEYS)");
    }

    #[test]
    fn aliases_and_boolean_locals() {
        all_guarded("local rcall = redis.call\nif rcall('GET', KEYS[1]) == ARGV[1] then return rcall('DEL', KEYS[1]) end return 0");
        unguarded("local rcall = redis.call\nreturn rcall('DEL', KEYS[1])");
        all_guarded("local holds = redis.call('hexists', KEYS[1], ARGV[1]) == 1\nif not holds then return nil end\nredis.call('hdel', KEYS[1], ARGV[1])\nif redis.call('hlen', KEYS[1]) == 0 then redis.call('unlink', KEYS[1]) end return 1");
        all_guarded("local mine = redis.call('get', KEYS[1]) == ARGV[1]\nif mine then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0");
        unguarded("local mine = redis.call('get', KEYS[1]) == ARGV[1]\nif not mine then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0");
    }

    #[test]
    fn owner_in_a_named_hash_field() {
        all_guarded("if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0");
        unguarded("if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0");
        let s = scan("if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end").unwrap();
        assert!(s.check_of("KEYS[1]").is_some());
    }

    #[test]
    fn expiry_of_a_key_the_script_creates_or_repairs() {
        all_guarded("if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('HMSET', KEYS[1], 'id', ARGV[1]) redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end return 0");
        all_guarded("if redis.call('exists', KEYS[1]) ~= 1 then redis.call('set', KEYS[1], 'x') redis.call('expire', KEYS[1], 10) end");
        // exists, so the write does not create it
        unguarded("if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HMSET', KEYS[1], 'id', ARGV[1]) redis.call('PEXPIRE', KEYS[1], ARGV[2]) end");
        // several keys: `~= 1` does not say which one is missing
        unguarded("if redis.call('exists', KEYS[1], KEYS[2]) ~= 1 then redis.call('set', KEYS[1], 'x') redis.call('expire', KEYS[1], 10) end");
        // no TTL at all: giving it one is a repair, not a renewal
        all_guarded("if redis.call('ttl', KEYS[1]) == -1 then return redis.call('expire', KEYS[1], ARGV[1]) end return 0");
        unguarded("if redis.call('ttl', KEYS[1]) == -2 then return redis.call('expire', KEYS[1], ARGV[1]) end return 0");
        unguarded("if redis.call('ttl', KEYS[1]) == -1 then return redis.call('del', KEYS[1]) end return 0");
    }

    #[test]
    fn joining_a_lock_held_by_others_is_not_owning_it() {
        unguarded("if redis.call('exists', KEYS[1]) == 0 then redis.call('hset', KEYS[1], ARGV[2], 1) redis.call('expire', KEYS[1], ARGV[1]) return 1 end\nif redis.call('hexists', KEYS[1], ARGV[2]) == 0 then redis.call('hincrby', KEYS[1], ARGV[2], 1) redis.call('expire', KEYS[1], ARGV[1]) return 1 end return 0");
        // free, or ours: taking it is fine
        all_guarded("if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then redis.call('hincrby', KEYS[1], ARGV[2], 1) redis.call('pexpire', KEYS[1], ARGV[1]) return nil end return redis.call('pttl', KEYS[1])");
        all_guarded("if redis.call('hexists', KEYS[1], ARGV[2]) == 0 and redis.call('exists', KEYS[1]) == 0 then redis.call('hset', KEYS[1], ARGV[2], 1) redis.call('pexpire', KEYS[1], ARGV[1]) end");
        // a lock with a limited number of holders: a caller within the limit takes a slot
        all_guarded("if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then return 1 end\nif redis.call('hlen', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end\nredis.call('hset', KEYS[1], ARGV[1], 1)\nredis.call('pexpire', KEYS[1], ARGV[2]) return 1");
        unguarded("if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then return 1 end\nredis.call('hset', KEYS[1], ARGV[1], 1)\nredis.call('pexpire', KEYS[1], ARGV[2]) return 1");
    }

    #[test]
    fn keys_and_checks() {
        let src = "local lock = KEYS[1]\nlocal v = redis.call('get', lock)\nredis.call('del', lock)\nreturn v == ARGV[1]";
        let s = scan(src).unwrap();
        assert_eq!(s.writes[0].key, "KEYS[1]");
        let (a, b) = s.check_of("KEYS[1]").unwrap();
        assert_eq!(&src[a..b], "v == ARGV[1]");
        // reading without comparing (a pop) is not a check
        let s = scan("local v = redis.call('get', KEYS[1])\nredis.call('del', KEYS[1])\nreturn v")
            .unwrap();
        assert!(s.check_of("KEYS[1]").is_none());
        // nor is an ordering comparison (a rate limiter)
        let s = scan("local n = redis.call('get', KEYS[1])\nif n and tonumber(n) >= tonumber(ARGV[1]) then return 0 end\nredis.call('incr', KEYS[1])\nredis.call('expire', KEYS[1], ARGV[2])\nreturn 1").unwrap();
        assert!(s.check_of("KEYS[1]").is_none());
        assert!(!s.writes[0].guarded);
        // nor a comparison with a constant
        let s = scan("if redis.call('get', KEYS[1]) == '1' then redis.call('del', KEYS[1]) end")
            .unwrap();
        assert!(s.check_of("KEYS[1]").is_none());
        let s = scan("for _, k in ipairs(KEYS) do redis.call('del', k) end").unwrap();
        assert_eq!(s.writes[0].key, "k");
        assert!(s.check_of("k").is_none());
        let src = "  return redis.call('del', KEYS[1])  ";
        let s = scan(src).unwrap();
        let (a, b) = s.writes[0].range;
        assert_eq!(&src[a..b], "redis.call('del', KEYS[1])");
    }

    fn keys(src: &str) -> Vec<(String, KeyShape)> {
        scan(src)
            .unwrap_or_else(|e| panic!("{src}: {e:?}"))
            .keys
            .into_iter()
            .map(|k| (k.command, k.shape))
            .collect()
    }

    #[test]
    fn where_each_key_comes_from() {
        let k = keys("local lock = KEYS[1]\nlocal fence = lock .. ':fence'\nif redis.call('set', lock, ARGV[1], 'NX') then return redis.call('incr', fence) end\nredis.call('incr', 'lock:' .. ARGV[2])\nredis.call('del', 'lock:x', KEYS[2])\nreturn redis.call('publish', ARGV[3], 'x')");
        assert_eq!(
            k,
            vec![
                ("SET".into(), KeyShape::Declared(Some(1))),
                (
                    "INCR".into(),
                    KeyShape::Derived {
                        from: Some(1),
                        appended: true
                    }
                ),
                (
                    "INCR".into(),
                    KeyShape::Built(
                        KeyRef::lit("lock:").concat(KeyRef::hole(Some("ARGV[2]".into())))
                    )
                ),
                ("DEL".into(), KeyShape::Literal(KeyRef::lit("lock:x"))),
                ("DEL".into(), KeyShape::Declared(Some(2))),
            ],
            "a channel is no key"
        );
        // loops over KEYS, unpack, a prefix, a function's parameter, a reply
        let k = keys("for _, k in ipairs(KEYS) do redis.call('del', k) end\nfor i = 1, #KEYS do redis.call('del', KEYS[i]) end\nredis.call('del', unpack(KEYS))\nredis.call('get', 'x:' .. KEYS[1])\nlocal function f(key) return redis.call('del', key) end\nlocal owner = redis.call('get', KEYS[1])\nredis.call('del', owner)");
        let shapes: Vec<KeyShape> = k.into_iter().map(|(_, s)| s).collect();
        assert_eq!(
            shapes,
            vec![
                KeyShape::Declared(None),
                KeyShape::Declared(None),
                KeyShape::Declared(None),
                KeyShape::Derived {
                    from: Some(1),
                    appended: false
                },
                KeyShape::Unknown,
                KeyShape::Declared(Some(1)),
                KeyShape::Unknown,
            ]
        );
        // literal text only is a literal key; the range is the key expression
        let src = "return redis.call('get', 'lock:' .. 'a')";
        let s = scan(src).unwrap();
        assert_eq!(s.keys[0].shape, KeyShape::Literal(KeyRef::lit("lock:a")));
        let (a, b) = s.keys[0].range;
        assert_eq!(&src[a..b], "'lock:' .. 'a'");
    }

    #[test]
    fn syntax_errors_have_positions() {
        let src = "if redis.call('get', KEYS[1]) == ARGV[1] then\n  return redis.call('del', KEYS[1]\nend";
        let e = scan(src).unwrap_err();
        assert!(!e.is_empty());
        assert!(e[0].range.0 > 40, "{e:?}");
    }
}
