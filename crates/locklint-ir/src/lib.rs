//! The intermediate form every front-end produces and every rule reads: lock-relevant
//! operations (Redis commands today) grouped by function, with key templates and spans.

pub mod diagnostic;
pub mod isolate;
pub mod lua;
pub mod names;
pub mod source;
pub mod sql;
pub mod suggest;
pub mod vocabulary;

use crate::source::{FileRef, SourceFile, Span};
use std::fmt;

/// One piece of a key template.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Part {
    Lit(String),
    /// A dynamic piece (`{}`), with the expression's name when it has one.
    Hole(Option<String>),
    /// A `const`/`static` defined in another file, resolved project-wide.
    Const(String),
}

/// Parts of a key template past which it is no longer tracked.
const MAX_KEY_PARTS: usize = 64;
/// Template text past which it is no longer tracked (Redis keys in real code are far shorter;
/// a longer text is a value built in a chain, not a key).
const MAX_KEY_TEXT: usize = 256;
/// Names a key keeps of those it passed through.
const MAX_KEY_NAMES: usize = 16;

/// A Redis key as far as it can be resolved statically.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct KeyRef {
    pub parts: Vec<Part>,
    /// The key is (or contains, for a bare hole) this function parameter (index, name).
    pub param: Option<(usize, String)>,
    /// The key is this field of `self` (impl type, field name).
    pub field: Option<Box<(String, String)>>,
    /// The key is the result of calling this function (name, arity); resolved project-wide.
    pub call: Option<Box<(String, usize)>>,
    /// The type whose associated function `call` is (`Keys` of `Keys::lock(id)`).
    #[serde(default)]
    pub call_in: Option<Box<str>>,
    /// Names the key passed through (variables, fields, parameters): hints of its purpose.
    pub names: Vec<String>,
}

impl KeyRef {
    pub fn lit(s: &str) -> Self {
        KeyRef {
            parts: vec![Part::Lit(s.to_string())],
            ..Default::default()
        }
    }

    pub fn hole(name: Option<String>) -> Self {
        KeyRef {
            parts: vec![Part::Hole(name.clone())],
            names: name.into_iter().collect(),
            ..Default::default()
        }
    }

    /// Whether the template has any literal text.
    pub fn has_literal(&self) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, Part::Lit(s) if !s.is_empty()))
    }

    /// Whether the whole key is a compile-time constant.
    pub fn is_constant(&self) -> bool {
        !self.parts.is_empty() && self.parts.iter().all(|p| matches!(p, Part::Lit(_)))
    }

    pub fn constant_text(&self) -> Option<String> {
        if !self.is_constant() {
            return None;
        }
        Some(
            self.parts
                .iter()
                .map(|p| match p {
                    Part::Lit(s) => s.as_str(),
                    _ => "",
                })
                .collect(),
        )
    }

    /// Concatenate two templates. A template that grows past what a key can be (a string
    /// built in a loop of `s = s + ..` statements) becomes one hole: keys stay small however
    /// long the chain that built them.
    pub fn concat(mut self, other: KeyRef) -> KeyRef {
        for p in other.parts {
            self.push(p);
        }
        let text: usize = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Lit(s) => s.len(),
                _ => 2,
            })
            .sum();
        if self.parts.len() > MAX_KEY_PARTS || text > MAX_KEY_TEXT {
            self.parts = vec![Part::Hole(None)];
        }
        self.add_names(other.names);
        self.param = self.param.or(other.param);
        self.field = self.field.or(other.field);
        self
    }

    /// Record names the key passed through: new ones only, and a bounded number (the first
    /// ones and the latest ones are kept).
    pub fn add_names(&mut self, names: impl IntoIterator<Item = String>) {
        for n in names {
            if self.names.contains(&n) {
                continue;
            }
            if self.names.len() >= MAX_KEY_NAMES {
                self.names.remove(MAX_KEY_NAMES / 2);
            }
            self.names.push(n);
        }
    }

    pub fn push(&mut self, part: Part) {
        match (self.parts.last_mut(), part) {
            (Some(Part::Lit(a)), Part::Lit(b)) => a.push_str(&b),
            (Some(Part::Hole(_)), Part::Hole(_)) => {}
            (_, Part::Lit(b)) if b.is_empty() => {}
            (_, p) => self.parts.push(p),
        }
    }

    /// The canonical template text: holes as `{}`, literal braces doubled.
    pub fn template(&self) -> String {
        let mut s = String::new();
        for p in &self.parts {
            match p {
                Part::Lit(l) => s.push_str(&l.replace('{', "{{").replace('}', "}}")),
                Part::Hole(_) | Part::Const(_) => s.push_str("{}"),
            }
        }
        s
    }

    /// A readable form for messages: literal text with `{name}` holes.
    pub fn display(&self) -> String {
        let mut s = String::new();
        for p in &self.parts {
            match p {
                Part::Lit(l) => s.push_str(l),
                Part::Hole(Some(n)) => {
                    s.push('{');
                    s.push_str(n);
                    s.push('}');
                }
                Part::Hole(None) => s.push_str("{}"),
                Part::Const(n) => {
                    s.push('{');
                    s.push_str(n);
                    s.push('}');
                }
            }
        }
        s
    }
}

impl fmt::Display for KeyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

/// Which expiry a write carries in the same command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Expiry {
    Ex,
    Px,
    ExAt,
    PxAt,
    KeepTtl,
}

/// What an operation does to its key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum OpKind {
    /// `GET`, `EXISTS` (a read whose result a later write may depend on).
    Read,
    /// `SET` and its variants. `nx`: only if absent (an acquire). `xx`: only if present.
    /// `compare`: the write is conditional on the current value (`IFEQ`).
    Write {
        nx: bool,
        xx: bool,
        expiry: Option<Expiry>,
        compare: bool,
    },
    /// `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT`, `GETEX`.
    Expire,
    /// `DEL`, `UNLINK`, `GETDEL`.
    Delete,
    /// An atomic compare-and-delete (`DELEX ... IFEQ`, `del_ex` with `ValueComparison::IFEQ`).
    CompareDelete,
    /// `INCR`, `INCRBY`.
    Incr,
    /// `WATCH` (optimistic transaction).
    Watch,
    /// A Lua script invoked with this key (`Script::new(..).key(k).invoke_async(..)`).
    Script,
}

impl OpKind {
    pub fn is_acquire(&self) -> bool {
        matches!(self, OpKind::Write { nx: true, .. })
    }

    /// A write that carries its own expiry and re-sets an existing key (`SET ... XX PX`).
    /// A plain write with an expiry and no condition (`SET key v PX ttl`, `set_ex`, `pset_ex`).
    pub fn is_plain_write_with_expiry(&self) -> bool {
        matches!(
            self,
            OpKind::Write {
                nx: false,
                xx: false,
                expiry: Some(_),
                compare: false
            }
        )
    }

    pub fn is_renewing_write(&self) -> bool {
        matches!(
            self,
            OpKind::Write {
                xx: true,
                nx: false,
                expiry: Some(_),
                compare: false
            }
        )
    }
}

/// The value an acquire writes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Value {
    /// A literal, possibly through a `const` or a local binding: the text shown to users.
    Constant(String),
    /// Anything computed at run time.
    Dynamic,
}

/// What the program does with a command's reply.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ResultUse {
    /// Read, compared, matched or passed on.
    Used,
    /// Thrown away; the reason says how (`let _`, `()` reply type, `exec`, statement, `is_ok`).
    Ignored(std::borrow::Cow<'static, str>),
    /// Bound to a variable (index of the binding statement's end); used if the name appears later.
    Bound { names: Vec<String>, after: usize },
    /// Flows out of the function as its return value.
    Returned,
}

/// Identifies an operation or call inside the project: (file, function, index).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct NodeId {
    pub file: usize,
    pub func: usize,
    pub index: usize,
}

impl NodeId {
    /// The function the node is in.
    pub fn func_id(self) -> FnId {
        FnId {
            file: self.file,
            func: self.func,
        }
    }
}

/// Identifies a function inside the project: its file's position and its index among that
/// file's functions.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct FnId {
    pub file: usize,
    pub func: usize,
}

/// What tells two Redis operations apart as the same key or not.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum KeyIdentity {
    /// A key template with literal text (`lock:job:{}`).
    Template(String),
    /// A struct field that holds the key (`self.key` of `Locker`), the same across the project.
    Field { ty: String, field: String },
    /// Parameter `index` of a function.
    Param { func: FnId, index: usize },
    /// A local variable of a function.
    Local { func: FnId, name: String },
}

impl KeyIdentity {
    /// The scope in which two operations on this identity are the same lock: struct fields
    /// across the project, key templates within one file (unrelated files reuse names like
    /// `foo`); parameters and locals have no scope beyond their function.
    pub fn scoped(&self, file: usize) -> Option<ScopedKey> {
        match self {
            KeyIdentity::Field { ty, field } => Some(ScopedKey::Field {
                ty: ty.clone(),
                field: field.clone(),
            }),
            KeyIdentity::Template(t) => Some(ScopedKey::Template {
                file,
                template: t.clone(),
            }),
            KeyIdentity::Param { .. } | KeyIdentity::Local { .. } => None,
        }
    }
}

/// A key identity in the scope where it names one lock (see [`KeyIdentity::scoped`]).
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum ScopedKey {
    Field { ty: String, field: String },
    Template { file: usize, template: String },
}

/// A condition the current path depends on: a read op or a call result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Dep(pub NodeId);

/// Where a command was issued from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Channel {
    /// A command sent on its own.
    Direct,
    /// Inside a pipeline; `atomic` for `MULTI`/`EXEC`.
    Pipeline { id: usize, atomic: bool },
}

/// One Redis command found in the source.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Op {
    pub id: NodeId,
    pub kind: OpKind,
    /// Command as written, for messages: `set_nx`, `SETNX`, `SET ... NX`.
    pub command: String,
    pub key: KeyRef,
    pub key_span: Span,
    pub value: Option<(Value, Span)>,
    /// The value written is this parameter of the function (by position, receiver excluded):
    /// at a call site of the function, the caller's argument is the value.
    #[serde(default)]
    pub value_param: Option<usize>,
    /// The whole command expression.
    pub span: Span,
    /// The enclosing statement (`let .. = ..;` or `expr;`), when the command is the only
    /// operation of a plain statement of its block: what deleting the command deletes.
    pub stmt: Option<Span>,
    /// The innermost `if`/`while` condition, match guard, block tail expression or returned
    /// value holding the command: what a fix lays out again when the command is not a
    /// statement of its own.
    #[serde(default)]
    pub expr: Option<Span>,
    /// The operator switch the command runs behind: the boolean an enclosing `if` tests on
    /// its own (`if force {`, `if args.force_unlock {`) when its name says it switches on a
    /// deliberate override (`vocabulary::is_override_switch`).
    #[serde(default)]
    pub switch: Option<String>,
    /// Written inside a macro invocation's arguments (`join!(..)`, `dbg!(..)`).
    pub in_macro: bool,
    pub result: ResultUse,
    pub deps: Vec<Dep>,
    pub channel: Channel,
    /// Inside an optimistic transaction (`WATCH`/`redis::transaction`), where a read-compare-write is atomic.
    pub watched: bool,
    /// The receiver of a typed command method: `self.con` of `self.con.del(..)`.
    pub receiver: Option<Span>,
    /// The variable the receiver is reached from (`self` of `self.con`, `con` of `&mut *con`),
    /// when it is a path of fields from one.
    #[serde(default)]
    pub receiver_root: Option<String>,
    /// The command's arguments after its name, each as written: a typed method's arguments,
    /// or a builder's `.arg(..)`s.
    pub args: Vec<Span>,
    /// The initialisers of the local bindings an argument's options come from
    /// (`let opts = SetOptions::default().with_expiration(SetExpiry::EX(86_400));` for
    /// `set_options(&key, &token, opts)`).
    #[serde(default)]
    pub option_spans: Vec<Span>,
    /// Every key of a command that names several (`DEL k1 k2`, `del(&[k1, k2])`, `EXISTS`,
    /// `UNLINK`, `TOUCH`, `WATCH`), with each key's span, in order; for a script invocation,
    /// on the operation of its first `.key(..)`, every key it passes as `KEYS`.
    #[serde(default)]
    pub keys: Vec<(KeyRef, Span)>,
    /// For a script invocation, the name the script is reached from: the `const`/`static`/
    /// local holding the `Script` or its text (`RELEASE` of `RELEASE.key(k)`,
    /// `Script::new(RELEASE_LUA).key(k)`).
    #[serde(default)]
    pub script: Option<String>,
    /// A method named like a Redis command on a wrapper (`delete_key(&k)`,
    /// `set_key_if_not_exists_with_expiry(&k, v, ttl)`, `commands::described`): the command when
    /// the project defines no function of that name (a wrapper crate outside the project); the
    /// call beside it is followed where the project does.
    #[serde(default)]
    pub described: bool,
}

/// What a method call's receiver is declared as.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Receiver {
    /// A parameter's or an annotated local's type, the impl's type for `self`; for a path
    /// call, the type the path names (`Cmd` of `Cmd::new(..)`, the impl's type for `Self::`).
    Type(String),
    /// A field of a value of this type (`self.pool`, `state.redis`): its type is the field's
    /// declared type, looked up project-wide.
    Field { owner: String, field: String },
}

/// A call to a function or method that may be a lock helper.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Call {
    pub id: NodeId,
    pub name: String,
    /// A method call; `on_self` when the receiver is `self`.
    pub method: bool,
    pub on_self: bool,
    /// What tells a method call's receiver's type, when something does.
    #[serde(default)]
    pub receiver: Option<Box<Receiver>>,
    /// Arguments (excluding the receiver) as key templates.
    pub args: Vec<KeyRef>,
    /// Arguments as values written, with their spans (a literal is a constant).
    #[serde(default)]
    pub values: Vec<(Value, Span)>,
    pub span: Span,
    pub result: ResultUse,
    pub deps: Vec<Dep>,
    /// Per argument, the parameters of the calling function it is made of.
    #[serde(default)]
    pub arg_params: Vec<ArgParams>,
}

/// Which parameters of the calling function a call's argument is made of.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArgParams {
    /// The argument is this parameter, through references and conversions (`&key`,
    /// `key.into().as_bytes()`).
    pub direct: Option<usize>,
    /// The argument is what a helper call builds from these parameters
    /// (`KeyValue::build_key(prefix, key)`).
    pub built_from: Vec<usize>,
}

/// Events of a function body in source order.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Event {
    Op(Box<Op>),
    Call(Box<Call>),
    /// A SQL statement run here: index into [`FileIr::embedded`].
    Sql {
        id: NodeId,
        embedded: usize,
    },
    /// A database connection held in a local variable ends here (closed, dropped, detached
    /// from its pool, or out of scope): a session ends with its connection.
    ConnEnd(ConnEnd),
}

impl Event {
    pub fn id(&self) -> NodeId {
        match self {
            Event::Op(o) => o.id,
            Event::Call(c) => c.id,
            Event::Sql { id, .. } => *id,
            Event::ConnEnd(c) => c.id,
        }
    }
}

/// How a connection held in a local variable ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EndKind {
    /// `conn.close()`: the connection is closed, whatever it came from.
    Close,
    /// `conn.close_on_drop()`: a pooled connection that closes instead of going back.
    CloseOnDrop,
    /// `conn.detach()`: taken out of its pool; it closes when whatever holds it is dropped.
    Detach,
    /// `drop(conn)`.
    Drop,
    /// The variable goes out of scope (and is not returned).
    ScopeEnd,
}

/// A connection variable that ends (see [`Event::ConnEnd`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ConnEnd {
    pub id: NodeId,
    /// The variable holding the connection.
    pub var: String,
    pub kind: EndKind,
    /// Dropping it hands the connection back to its pool (a pooled connection neither closed,
    /// marked to close on drop nor detached): its session, and the session's locks, live on.
    pub to_pool: bool,
    /// The call, or for a scope's end the end of the block.
    pub span: Span,
}

impl ConnEnd {
    /// Whether the session ends with it.
    pub fn ends_session(&self) -> bool {
        match self.kind {
            EndKind::Close | EndKind::CloseOnDrop | EndKind::Detach => true,
            EndKind::Drop | EndKind::ScopeEnd => !self.to_pool,
        }
    }
}

/// A function or method.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Function {
    pub name: String,
    /// `Some(type)` for methods in an `impl` block.
    pub impl_type: Option<String>,
    pub has_self: bool,
    pub params: Vec<String>,
    /// Each parameter's declared type as written (`&mut redis::Connection`), by position.
    #[serde(default)]
    pub param_types: Vec<String>,
    /// The function's name.
    pub span: Span,
    /// The whole function, from its signature to the end of its body.
    pub whole: Span,
    pub events: Vec<Event>,
    /// Uses of the names that hold a lock holder's token (`vocabulary::is_token_name`) in the
    /// body, with their byte offsets, sorted by name, then offset (see [`Function::uses_of`]);
    /// the front-end reads every identifier's uses to tell whether a reply is read, and keeps
    /// only these.
    pub uses: Vec<(String, usize)>,
    /// Key template of the returned value, when the function builds a key.
    pub returns_key: Option<KeyRef>,
    /// Byte offset where a fix can add a module-level item this function sees (the end of
    /// the line of the file's last leading `use`); `None` inside inline modules.
    pub item_slot: Option<usize>,
}

impl Function {
    /// The declared type of parameter `name`, as written.
    pub fn param_type(&self, name: &str) -> Option<&str> {
        let at = self.params.iter().position(|p| p == name)?;
        self.param_types.get(at).map(String::as_str)
    }

    /// The uses of one identifier, in source order (a binary search of the sorted `uses`).
    pub fn uses_of(&self, name: &str) -> &[(String, usize)] {
        let from = self.uses.partition_point(|(n, _)| n.as_str() < name);
        let to = from + self.uses[from..].partition_point(|(n, _)| n == name);
        &self.uses[from..to]
    }
}

/// A problem reading a file that is reported as a finding (`parse-error`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ParseProblem {
    pub message: String,
    pub span: Span,
    /// What to do about it.
    pub help: String,
    /// The text may be valid: it exceeds a bound of the analysis (its size or nesting), not
    /// the grammar.
    #[serde(default)]
    pub limit: Limit,
}

/// Whether a [`ParseProblem`] is a bound of the analysis rather than the grammar, and what it
/// left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Limit {
    /// A syntax error (or a failure of the analysis): not a bound.
    #[default]
    None,
    /// One part (an embedded script) was not analysed; the rest of the file was.
    Part,
    /// The whole file was not analysed.
    File,
}

/// Maps byte offsets of a decoded text (a string literal's value) to byte offsets of the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TextMap {
    /// `(text offset, file offset)` at which a verbatim run (or one escape) starts.
    points: Vec<(usize, usize)>,
}

impl TextMap {
    /// A text that is the file itself from `base` on.
    pub fn identity(base: usize) -> Self {
        TextMap {
            points: vec![(0, base)],
        }
    }

    pub fn push(&mut self, text: usize, file: usize) {
        if let Some(&(t, _)) = self.points.last() {
            if t == text {
                self.points.pop();
            }
        }
        self.points.push((text, file));
    }

    /// The file offset of a text offset.
    pub fn to_source(&self, text: usize) -> usize {
        let i = self.points.partition_point(|&(t, _)| t <= text);
        match i.checked_sub(1).and_then(|i| self.points.get(i)) {
            Some(&(t, f)) => f + (text - t),
            None => self.points.first().map(|&(_, f)| f).unwrap_or(0),
        }
    }

    /// A file span for a text span.
    pub fn span(&self, start: usize, end: usize) -> Span {
        let s = self.to_source(start);
        let e = if end > start {
            self.to_source(end - 1) + 1
        } else {
            s
        };
        Span::new(s, e)
    }
}

/// The language of an embedded text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Language {
    Sql,
    Lua,
}

/// What runs a SQL statement, as far as the code shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Executor {
    /// A connection pool (`&PgPool`, `Pool<Postgres>`, deadpool/bb8 pools): each call may use a
    /// different connection.
    Pool,
    /// One held connection.
    Connection,
    /// A transaction.
    Transaction,
    Unknown,
}

/// SQL or Lua text found in a file: a whole `.sql`/`.lua` file, or a string literal passed to
/// a database or Redis scripting API.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Embedded {
    pub language: Language,
    pub text: String,
    pub map: TextMap,
    /// The literal (or the whole file).
    pub span: Span,
    /// Where it came from.
    pub origin: Origin,
    /// Function (index in [`FileIr::functions`]) that runs it, when found in Rust code.
    pub func: Option<usize>,
    /// The call that runs it.
    pub exec: Option<SqlExec>,
    /// A write built with an ORM's query builder ([`Origin::Orm`]) has no text: the front-end
    /// that read the call chain gives its statement here, and the SQL front-end moves it into
    /// [`FileIr::sql`] in place of parsing a text.
    #[serde(default)]
    pub statement: Option<Box<sql::Statement>>,
}

impl Embedded {
    /// Whether this is a statement read from an ORM call chain, with no SQL text to edit.
    pub fn is_orm(&self) -> bool {
        matches!(self.origin, Origin::Orm { .. })
    }
}

/// Where an SQL or Lua text came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Origin {
    /// A whole `.sql` or `.lua` file.
    File,
    /// A string constant that its own file does not run.
    Const,
    /// A library function that takes the text (`sqlx::query`, `diesel::sql_query`, sea-orm's
    /// `Statement::from_string`, `redis::Script::new`).
    Library(Library),
    /// An sqlx macro (`query!`, `query_as!` ...).
    SqlxMacro,
    /// A method that takes the text first, by name (`execute`, `query`, fred's `eval`).
    Method(String),
    /// The script of a Redis `EVAL` command.
    Eval,
    /// The literal of a `format!` whose result a local holds and a library call runs
    /// (`let q = format!("UPDATE .. INTERVAL '{mins} minutes'"); sqlx::query(&q)`): its `{..}`
    /// holes are left in the text, so a statement that does not parse is not reported.
    Formatted,
    /// A write built with an ORM's query builder (diesel's DSL, sea-orm's entities and active
    /// models): no text, its statement read from the Rust call chain ([`Embedded::statement`]);
    /// the embedded span is the chain. `entity`: the sea-orm entity module whose name the
    /// statement's table stands in for, when the file does not declare that entity's table
    /// (the project's [`FileIr::orm_tables`] may: `job_lock` → `job_locks`).
    Orm {
        library: Library,
        entity: Option<String>,
    },
}

/// The libraries whose functions take SQL or Lua text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Library {
    Sqlx,
    Diesel,
    SeaOrm,
    RedisScript,
}

impl Origin {
    /// A text that is certainly SQL when it is handed to SQL (a file, sqlx, diesel, sea-orm):
    /// parse errors in it are worth reporting.
    pub fn is_certainly_sql(&self) -> bool {
        matches!(
            self,
            Origin::File
                | Origin::SqlxMacro
                | Origin::Library(Library::Sqlx | Library::Diesel | Library::SeaOrm)
        )
    }
}

/// A SQL statement executed from Rust code.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SqlExec {
    /// Position in the function's event order.
    pub id: NodeId,
    pub executor: Executor,
    /// The name of the executing call (`execute`, `fetch_one`, `query`).
    pub method: String,
    /// The executing call.
    pub span: Span,
    /// What the code does with the returned rows.
    pub result: ResultUse,
    /// The bound parameters in order, as the spans that removing each one deletes
    /// (`.bind(x)` with the line break before it, `, x` in a macro or a parameter slice);
    /// `None` when the statement is not written at the call or its binds are not all visible.
    pub binds: Option<Vec<Span>>,
    /// What each bound parameter is, in the same order as `binds` (a literal, a const, a
    /// parameter of the function: see [`KeyRef`]).
    #[serde(default)]
    pub bind_keys: Vec<KeyRef>,
    /// What each bound parameter names, in the same order, when it is a constant that names
    /// something: a string literal, or an enum variant (`JobStatus::Running.to_string()`), in
    /// lower case (as [`sql::Operand::named_literal`]).
    #[serde(default)]
    pub bind_literals: Vec<Option<String>>,
    /// The local variable holding the connection it runs on (`conn` of `&mut *conn`), when the
    /// executor is one.
    #[serde(default)]
    pub conn: Option<String>,
    /// Whether dropping that connection, where the statement runs, closes it (`Some(true)`: a
    /// dedicated connection, a detached one, one marked to close on drop) or hands it back to
    /// its pool (`Some(false)`).
    #[serde(default)]
    pub conn_closes: Option<bool>,
}

/// Everything a front-end extracted from one file. It serialises without its file (the
/// analysis cache stores it by the file's content): a deserialised `FileIr` holds an empty file
/// until its reader sets [`FileIr::file`].
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct FileIr {
    #[serde(skip, default = "unread_file")]
    pub file: FileRef,
    pub functions: Vec<Function>,
    /// `const`/`static` string or literal items: name → value text.
    pub consts: Vec<(String, KeyRef)>,
    /// Struct literal field initialisers: (type, field) → key template.
    pub field_inits: Vec<(String, String, KeyRef)>,
    /// Struct fields declared with a type whose methods they call: (struct, field, type).
    #[serde(default)]
    pub field_types: Vec<(String, String, String)>,
    pub problems: Vec<ParseProblem>,
    /// SQL and Lua texts in this file.
    pub embedded: Vec<Embedded>,
    /// The tables this file's sea-orm entities declare (`#[sea_orm(table_name = "..")]`), by
    /// the entity's module: an inline module's name, or the module the file is.
    #[serde(default)]
    pub orm_tables: Vec<(String, String)>,
    /// The fields of the struct literals of this file that are named like a point in time,
    /// each with whether its value reads the client's clock: what the constructors of a
    /// struct inserted whole by an ORM (`.values(mutex)`) put in it.
    #[serde(default)]
    pub literal_times: Vec<LiteralTime>,
    /// Parsed SQL (filled by the SQL front-end).
    pub sql: sql::SqlIr,
    /// Parsed Lua scripts (filled by the Lua front-end).
    pub lua: lua::LuaIr,
}

/// A field of a struct literal named like a point in time (`expires_at: Some(Utc::now()
/// .naive_utc().add(lease))` in `MutexLock { .. }`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LiteralTime {
    /// The struct's name (`Self` read as the type of the `impl` it is in).
    pub type_name: String,
    pub field: String,
    /// The value reads the client's clock (`Utc::now()`, `SystemTime::now()`).
    pub client_clock: bool,
    /// The field and its value.
    pub span: Span,
}

fn unread_file() -> FileRef {
    SourceFile::new(std::path::PathBuf::new(), String::new())
}

impl FileIr {
    /// The form of a file before any front-end ran: nothing found in it yet.
    pub fn new(file: FileRef) -> Self {
        FileIr {
            file,
            functions: Vec::new(),
            consts: Vec::new(),
            field_inits: Vec::new(),
            field_types: Vec::new(),
            problems: Vec::new(),
            embedded: Vec::new(),
            orm_tables: Vec::new(),
            literal_times: Vec::new(),
            sql: Default::default(),
            lua: Default::default(),
        }
    }

    /// Give every node the file's position in the project. A front-end stamps the position it
    /// was given; an analysis stored by content (the analysis cache) is placed where the file
    /// is now, so adding or removing other files does not invalidate it.
    pub fn place_at(&mut self, index: usize) {
        let place = |id: &mut NodeId| id.file = index;
        for f in &mut self.functions {
            for e in &mut f.events {
                match e {
                    Event::Op(op) => {
                        place(&mut op.id);
                        op.deps.iter_mut().for_each(|d| place(&mut d.0));
                    }
                    Event::Call(c) => {
                        place(&mut c.id);
                        c.deps.iter_mut().for_each(|d| place(&mut d.0));
                    }
                    Event::Sql { id, .. } => place(id),
                    Event::ConnEnd(c) => place(&mut c.id),
                }
            }
        }
        for e in &mut self.embedded {
            if let Some(exec) = &mut e.exec {
                place(&mut exec.id);
            }
        }
    }
}
