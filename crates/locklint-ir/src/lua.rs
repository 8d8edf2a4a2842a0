//! Lua scripts in the intermediate form: per script, the key-deleting and expiry-changing
//! `redis.call`s with whether an ownership check dominates each, and the keys whose value the
//! script compares, and where every key a call names comes from (`KEYS`, a literal, a key
//! built in the script). Filled by the Lua front-end; read by the Lua rules and the audit.

use crate::source::Span;

/// What the Lua front-end extracted from one file.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct LuaIr {
    pub scripts: Vec<Script>,
}

/// One parsed Redis script.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Script {
    /// Index in [`crate::FileIr::embedded`].
    pub embedded: usize,
    /// Names the script is attached to: the `const`/`static`/`let` holding its text, the Rust
    /// function that builds it, the `.lua` file's name.
    pub names: Vec<String>,
    /// One of [`Script::names`] says the script belongs to a lock (lock, unlock, release,
    /// renew, extend, lease, mutex).
    pub lock_named: bool,
    /// `DEL`/`UNLINK`/expiry calls with their file spans.
    pub writes: Vec<(KeyWrite, Span)>,
    /// Keys whose value (`GET`, or an ownership read) the script compares somewhere, with the
    /// file span of the first such comparison.
    pub checked: Vec<(String, Span)>,
    /// The keys every `redis.call`/`redis.pcall` of a command that takes keys names, with
    /// the file span of each key expression, in source order.
    #[serde(default)]
    pub keys: Vec<(KeyUse, Span)>,
}

impl Script {
    /// Where the script compares the value of `key`.
    pub fn check_of(&self, key: &str) -> Option<Span> {
        self.checked.iter().find(|(k, _)| k == key).map(|(_, s)| *s)
    }
}

/// What a key-changing call does to a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WriteKind {
    /// `DEL`, `UNLINK`.
    Release,
    /// `PEXPIRE`, `EXPIRE`, `PEXPIREAT`, `EXPIREAT`, `SET .. KEEPTTL`, `SET .. XX PX`.
    Renew,
}

/// A `redis.call`/`redis.pcall` that deletes a key or changes its expiry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyWrite {
    pub kind: WriteKind,
    /// The command as users know it: `DEL`, `PEXPIRE`, `SET ... KEEPTTL`.
    pub command: String,
    /// The key's identity: `KEYS[1]` (also through a local bound to it), else the expression.
    pub key: String,
    /// Byte range of the whole call in the script text.
    pub range: (usize, usize),
    /// Whether an ownership check of the same key dominates the call.
    pub guarded: bool,
    /// The call writes every key the script received (`unpack(KEYS)`, or the variable of a
    /// loop over `KEYS`).
    #[serde(default)]
    pub every_key: bool,
}

/// A key a `redis.call`/`redis.pcall` of the script names, as the script writes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyUse {
    /// The command, upper-cased: `GET`, `DEL`.
    pub command: String,
    pub shape: KeyShape,
    /// The key expression as written, whitespace collapsed: `'lock:' .. ARGV[1]`.
    pub text: String,
    /// Byte range of the key expression in the script text.
    pub range: (usize, usize),
}

/// Where a key a script uses comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeyShape {
    /// An element of `KEYS`: `KEYS[2]` (`Some(2)`), or one chosen at run time (`KEYS[i]`,
    /// the element of a loop over `KEYS`, `unpack(KEYS)`: `None`).
    Declared(Option<usize>),
    /// A literal key name: `'lock:x'`.
    Literal(crate::KeyRef),
    /// A key built from an element of `KEYS` (`KEYS[1] .. ':fence'`): the element's index
    /// when written as a number, and whether text is only appended to it.
    Derived { from: Option<usize>, appended: bool },
    /// A key built inside the script from text and values that are not keys
    /// (`'lock:' .. ARGV[1]`), as a template whose holes are the values; or a key name passed
    /// in `ARGV` (`redis.call('del', ARGV[1])`).
    Built(crate::KeyRef),
    /// Anything else (a function's parameter, a reply): not known.
    Unknown,
}
