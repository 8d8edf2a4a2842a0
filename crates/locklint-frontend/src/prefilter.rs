//! Which Rust files can hold anything the analysis reads, decided from their bytes before any
//! parse (most of a large tree has nothing to do with locks and is never parsed).
//!
//! [`can_contribute`] is a superset of what the Rust front-end recognises in a file on its own:
//! the front-end records Redis commands from builders (`cmd(..)`, `Cmd::new()`, `Pipeline`),
//! script invocations (`invoke`), and command methods (`get`, `set_nx`, `del` ...) only in files
//! that name `redis`, `fred`, `set_nx` or `setnx`; SQL and Lua only where a library that takes
//! such text is named (`sqlx`, `sql_query`, `from_string`, `from_sql_and_values`,
//! `Script::new`, fred's `eval`) or an ORM write is (`diesel`, `sea_orm` and a write's
//! `update`, `insert_into`, `update_many` ...), a string literal starts like SQL or a constant holds
//! `redis.call(`; suppressions and the runtime crate's types are spelled `locklint`, the
//! Redlock crates `rslock` and `redlock`.
//! A file that passes none of these tests gives an intermediate form with no operation, no
//! statement and no script; what it can still give (a const, a struct field, a function other
//! files call) is only needed when a parsed file names it, and [`Mentions`] finds the files
//! that name it (the project layer decides which names, `locklint_project::reach`).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::sync::OnceLock;

/// Words whose presence (any case) means the front-end may find something in the file:
/// suppressions and the runtime crate, Redis scripts, the Redlock crates the audit recognises,
/// and Lua that calls Redis (a script held in a constant).
const LIBRARY_WORDS: &[&str] = &[
    "locklint",
    "script::new",
    "rslock",
    "redlock",
    "redis.call(",
    "redis.pcall(",
];

/// sqlx's query functions and macros, in a file that names sqlx.
const SQLX_IDENTS: &[&str] = &[
    "query",
    "query_as",
    "query_scalar",
    "query_with",
    "query_as_with",
    "query_scalar_with",
    "query_unchecked",
    "query_as_unchecked",
    "query_scalar_unchecked",
];

/// Words (any case) that make the front-end read ORM writes (`walker::orm`).
const ORM_WORDS: &[&str] = &["diesel", "sea_orm"];

/// The calls an ORM write starts from or is run by (diesel's `update`, `insert_into` ...,
/// sea-orm's `update_many`, `insert`, an active model's `update`), and the `table_name` a
/// sea-orm entity declares its table with, in a file that names the ORM.
const ORM_IDENTS: &[&str] = &[
    "table_name",
    "update",
    "delete",
    "insert",
    "insert_into",
    "replace_into",
    "insert_or_ignore_into",
    "update_many",
    "delete_many",
];

/// Words (any case) that make the front-end take command methods for Redis commands.
const REDIS_WORDS: &[&str] = &["redis", "fred", "set_nx", "setnx"];

/// Identifiers that start a Redis operation in any file: a `cmd(..)` / `Cmd::new()` builder,
/// a `Pipeline`, a script's `invoke`; and those that take SQL text.
const ANY_FILE_IDENTS: &[&str] = &[
    "cmd",
    "Cmd",
    "Pipeline",
    "invoke",
    "invoke_async",
    "sql_query",
    "from_string",
    "from_sql_and_values",
];

/// Identifiers that are Redis operations in a file that names a client
/// (`commands::is_command_method`, `pipe()`, transactions, fred's script methods).
const COMMAND_IDENTS: &[&str] = &[
    "get",
    "exists",
    "set",
    "set_ex",
    "pset_ex",
    "set_nx",
    "set_options",
    "expire",
    "pexpire",
    "expire_at",
    "pexpire_at",
    "get_ex",
    "getex",
    "del",
    "unlink",
    "del_ex",
    "get_del",
    "getdel",
    "incr",
    "incr_by",
    "pipe",
    "transaction",
    "transaction_async",
    "eval",
    "script_load",
    // wrappers' methods named like commands (`commands::described`)
    "delete_key",
    "delete_keys",
    "delete_multiple_keys",
    "del_key",
    "remove_key",
    "unlink_key",
    "get_key",
    "get_key_value",
    "set_key_expiry",
    "set_expiry",
    "set_key_ttl",
    "expire_key",
    "set_key_if_not_exists_with_expiry",
    "set_if_not_exists_with_expiry",
    "set_key_nx_with_expiry",
    "set_nx_with_expiry",
    "set_nx_with_ttl",
];

/// The first words `embed::looks_like_sql` accepts (upper case).
const SQL_STARTS: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "CREATE", "ALTER", "DROP", "BEGIN", "COMMIT",
    "ROLLBACK", "LOCK", "SET", "TRUNCATE", "MERGE", "CALL", "DO", "VALUES", "REPLACE", "UPSERT",
];

/// Whether the Rust text `text` can contribute a fact or a finding by itself: it names a
/// library the front-end recognises or a suppression, starts a Redis builder, holds a string
/// literal that starts like SQL, or names a Redis client and a command method.
pub fn can_contribute(text: &str) -> bool {
    reason(text).is_some()
}

/// The word lists [`reason`] looks for, each a group of one automaton.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// [`LIBRARY_WORDS`], any case, anywhere.
    Library,
    /// [`ANY_FILE_IDENTS`], whole identifiers.
    AnyFile,
    /// [`REDIS_WORDS`], any case, anywhere.
    Redis,
    /// [`COMMAND_IDENTS`], whole identifiers.
    Commands,
    /// `sqlx`, any case, anywhere.
    Sqlx,
    /// [`SQLX_IDENTS`], whole identifiers.
    Queries,
    /// [`ORM_WORDS`], any case, anywhere.
    Orm,
    /// [`ORM_IDENTS`], whole identifiers.
    OrmWrites,
}

impl Group {
    const ALL: [Group; 8] = [
        Group::Library,
        Group::AnyFile,
        Group::Redis,
        Group::Commands,
        Group::Sqlx,
        Group::Queries,
        Group::Orm,
        Group::OrmWrites,
    ];

    fn words(self) -> &'static [&'static str] {
        match self {
            Group::Library => LIBRARY_WORDS,
            Group::AnyFile => ANY_FILE_IDENTS,
            Group::Redis => REDIS_WORDS,
            Group::Commands => COMMAND_IDENTS,
            Group::Sqlx => &["sqlx"],
            Group::Queries => SQLX_IDENTS,
            Group::Orm => ORM_WORDS,
            Group::OrmWrites => ORM_IDENTS,
        }
    }

    /// A word of the group counts in any case and anywhere; else only as a whole identifier
    /// spelled as listed.
    fn any_case(self) -> bool {
        matches!(
            self,
            Group::Library | Group::Redis | Group::Sqlx | Group::Orm
        )
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// Every word of every [`Group`] in one case-insensitive automaton: a file is read once.
struct Words {
    finder: AhoCorasick,
    /// Per pattern (a word in lower case): the groups that list it, with the word as listed.
    spellings: Vec<Vec<(Group, &'static str)>>,
}

impl Words {
    fn new() -> Words {
        let mut patterns: Vec<String> = Vec::new();
        let mut spellings: Vec<Vec<(Group, &'static str)>> = Vec::new();
        for g in Group::ALL {
            for w in g.words() {
                let lower = w.to_ascii_lowercase();
                let at = match patterns.iter().position(|p| *p == lower) {
                    Some(i) => i,
                    None => {
                        patterns.push(lower);
                        spellings.push(Vec::new());
                        patterns.len() - 1
                    }
                };
                spellings[at].push((g, w));
            }
        }
        Words {
            finder: any_case(&patterns),
            spellings,
        }
    }

    /// The groups `text` holds a word of (bits of [`Group::bit`]); stops early at a library
    /// word, which lets the file through whatever else it holds.
    fn groups(&self, text: &str) -> u8 {
        let bytes = text.as_bytes();
        let mut found = 0u8;
        for m in self.finder.find_overlapping_iter(text) {
            let at = &bytes[m.start()..m.end()];
            for &(g, w) in &self.spellings[m.pattern().as_usize()] {
                if found & g.bit() != 0 {
                    continue;
                }
                let counts =
                    g.any_case() || (at == w.as_bytes() && whole_ident(bytes, m.start(), m.end()));
                if counts {
                    found |= g.bit();
                }
            }
            if found & Group::Library.bit() != 0 {
                break;
            }
        }
        found
    }
}

fn any_case(words: &[String]) -> AhoCorasick {
    AhoCorasickBuilder::new()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .build(words)
        .expect("a fixed word list builds")
}

/// Why [`can_contribute`] lets `text` through, if it does.
pub fn reason(text: &str) -> Option<&'static str> {
    static WORDS: OnceLock<Words> = OnceLock::new();
    let found = WORDS.get_or_init(Words::new).groups(text);
    let has = |g: Group| found & g.bit() != 0;
    if has(Group::Library) {
        return Some("names locklint, a Redis script or a lock library");
    }
    if has(Group::AnyFile) {
        return Some("starts a Redis command builder or hands SQL to a library");
    }
    if has_sql_literal(text.as_bytes()) {
        return Some("holds a string that starts like SQL");
    }
    if has(Group::Redis) && has(Group::Commands) {
        return Some("names a Redis client and a command");
    }
    if has(Group::Sqlx) && has(Group::Queries) {
        return Some("names sqlx and a query");
    }
    if has(Group::Orm) && has(Group::OrmWrites) {
        return Some("names an ORM and a write");
    }
    None
}

/// Methods that run SQL text given as their first argument (`embed::method_site`).
const SQL_METHOD_IDENTS: &[&str] = &[
    "execute",
    "query",
    "query_one",
    "query_opt",
    "query_raw",
    "execute_raw",
    "prepare",
    "prepare_cached",
    "batch_execute",
    "simple_query",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
];

/// Whether `text` holds a string literal whose decoded text may start like a SQL statement
/// where the front-end reads SQL: the initialiser of a `const` or `static` (after `=`), or
/// the first argument of a method that runs SQL (after `(`, in a file that names such a
/// method). A literal is a `"` after whitespace, `r`, `#`s or `b`; its text starts like SQL
/// after whitespace and escapes (`\n`, `\t`, a line continuation), with a SQL keyword not
/// followed by a letter, or a `--` comment (taken as SQL: what follows is not looked at).
/// Quotes that close a literal or sit in comments are tested too, which only lets more
/// files through.
fn has_sql_literal(text: &[u8]) -> bool {
    static METHODS: OnceLock<Mentions> = OnceLock::new();
    let mut methods: Option<bool> = None;
    memchr::memchr_iter(b'"', text).any(|at| {
        if !starts_like_sql(&text[at + 1..]) {
            return false;
        }
        match opened_after(&text[..at]) {
            Some(b'=') => true,
            Some(b'(') => *methods.get_or_insert_with(|| {
                METHODS
                    .get_or_init(|| {
                        Mentions::new(SQL_METHOD_IDENTS.iter().map(|n| (*n, Appears::Used)))
                    })
                    .any(std::str::from_utf8(text).unwrap_or(""))
            }),
            _ => false,
        }
    })
}

/// The byte before a literal's opening (`r`, `#`s and `b` of its prefix and whitespace
/// skipped).
fn opened_after(before: &[u8]) -> Option<u8> {
    let mut t = before;
    while let [rest @ .., b'#'] = t {
        t = rest;
    }
    if let [rest @ .., b'r'] = t {
        t = rest;
    }
    if let [rest @ .., b'b'] = t {
        t = rest;
    }
    t.trim_ascii_end().last().copied()
}

fn starts_like_sql(mut t: &[u8]) -> bool {
    loop {
        match t {
            [c, rest @ ..] if c.is_ascii_whitespace() => t = rest,
            [b'\\', b'n' | b't' | b'r' | b'\n' | b'\r', rest @ ..] => t = rest,
            // an escape that may decode to whitespace: cannot tell, let the file through
            [b'\\', b'u' | b'x', ..] => return true,
            [b'-', b'-', ..] => return true,
            // non-ASCII whitespace before the keyword
            [c, ..] if !c.is_ascii() => return true,
            _ => break,
        }
    }
    let word_len = t.iter().take_while(|c| c.is_ascii_alphabetic()).count();
    if word_len == 0 || word_len > 8 {
        return false;
    }
    let word = &t[..word_len];
    if word.eq_ignore_ascii_case(b"DO") {
        // `embed::is_do_block`, over the raw text: escapes may stand for the whitespace
        let rest = &t[2..];
        let after = rest.trim_ascii_start();
        return after.len() < rest.len()
            && (after.starts_with(b"$")
                || after.starts_with(b"'")
                || after.starts_with(b"\\")
                || after
                    .get(..8)
                    .is_some_and(|w| w.eq_ignore_ascii_case(b"LANGUAGE")));
    }
    SQL_STARTS
        .iter()
        .any(|k| k.len() == word_len && k.as_bytes().eq_ignore_ascii_case(word))
}

/// Names searched for in files that were not parsed, each as a whole identifier: a use of the
/// name anywhere, or only its definition as an item of some kinds (`fn name`, `struct name`).
pub struct Mentions {
    finder: Option<AhoCorasick>,
    /// Per pattern of the automaton: how it must appear, and its index as given.
    appears: Vec<(Appears, usize)>,
    /// How many names were given (empty ones included).
    given: usize,
}

/// How a name must appear in a text for [`Mentions::find`] to report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appears {
    /// Anywhere, as a whole identifier.
    Used,
    /// As the name of an item being defined with one of these keywords (`fn`; `struct`;
    /// `const` or `static`, `mut` allowed between).
    Defined(&'static [&'static str]),
    /// As the type of an `impl` block: after `impl`, after `for` (`impl Trait for Type`), or
    /// after the generics of the impl (`impl<T> Type<T>`; a `->` does not count).
    Implemented,
}

/// A function's definition.
pub const FN: &[&str] = &["fn"];
/// A struct's or an enum's definition (an enum's one-field variants are typed like fields).
pub const STRUCT: &[&str] = &["struct", "enum"];
/// A `const` or `static` item's definition.
pub const CONST: &[&str] = &["const", "static"];

impl Mentions {
    /// A finder for `names`, each with how it must appear (an empty name is never found).
    pub fn new<'n>(names: impl IntoIterator<Item = (&'n str, Appears)>) -> Mentions {
        let mut given = 0;
        let (patterns, appears): (Vec<&str>, Vec<(Appears, usize)>) = names
            .into_iter()
            .enumerate()
            .inspect(|_| given += 1)
            .filter(|(_, (n, _))| !n.is_empty())
            .map(|(i, (n, a))| (n, (a, i)))
            .unzip();
        let finder = (!patterns.is_empty()).then(|| {
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::Standard)
                .build(&patterns)
                .expect("identifiers build an automaton")
        });
        Mentions {
            finder,
            appears,
            given,
        }
    }

    /// Whether `text` holds any of the names as it must appear.
    pub fn any(&self, text: &str) -> bool {
        let Some(finder) = &self.finder else {
            return false;
        };
        let bytes = text.as_bytes();
        finder.find_overlapping_iter(text).any(|m| {
            self.fits(
                bytes,
                m.start(),
                m.end(),
                self.appears[m.pattern().as_usize()].0,
            )
        })
    }

    fn fits(&self, bytes: &[u8], start: usize, end: usize, appears: Appears) -> bool {
        whole_ident(bytes, start, end)
            && match appears {
                Appears::Used => true,
                Appears::Defined(keywords) => after_keyword(bytes, start, keywords),
                Appears::Implemented => {
                    after_keyword(bytes, start, &["impl", "for"]) || after_generics(bytes, start)
                }
            }
    }

    /// The indexes (in the order given to [`Mentions::new`]) of the names `text` holds as
    /// whole identifiers (as definitions where asked), each once, in no particular order.
    pub fn find(&self, text: &str) -> Vec<usize> {
        let Some(finder) = &self.finder else {
            return Vec::new();
        };
        let bytes = text.as_bytes();
        let mut found = vec![false; self.given];
        let mut out = Vec::new();
        // overlapping: a name that is a suffix of another (`lock` in `unlock`) is still seen
        for m in finder.find_overlapping_iter(text) {
            let (appears, p) = self.appears[m.pattern().as_usize()];
            if found[p] || !self.fits(bytes, m.start(), m.end(), appears) {
                continue;
            }
            found[p] = true;
            out.push(p);
        }
        out
    }
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || !b.is_ascii()
}

fn whole_ident(text: &[u8], start: usize, end: usize) -> bool {
    (start == 0 || !is_ident_byte(text[start - 1]))
        && (end == text.len() || !is_ident_byte(text[end]))
}

/// Whether the identifier at `start` follows one of `keywords` (and whitespace; `mut` may
/// stand between).
fn after_keyword(text: &[u8], start: usize, keywords: &[&str]) -> bool {
    let word_before = |end: usize| -> Option<(usize, &[u8])> {
        let before = &text[..end];
        let trimmed = before.trim_ascii_end();
        if trimmed.len() == before.len() {
            return None;
        }
        let from = trimmed
            .iter()
            .rposition(|&b| !is_ident_byte(b))
            .map_or(0, |i| i + 1);
        Some((from, &trimmed[from..]))
    };
    let Some((from, word)) = word_before(start) else {
        return false;
    };
    let is_keyword = |w: &[u8]| keywords.iter().any(|k| k.as_bytes() == w);
    if is_keyword(word) {
        return true;
    }
    word == b"mut" && word_before(from).is_some_and(|(_, w)| is_keyword(w))
}

/// Whether the identifier at `start` follows a `>` that is not the end of `->`.
fn after_generics(text: &[u8], start: usize) -> bool {
    let trimmed = text[..start].trim_ascii_end();
    trimmed.ends_with(b">") && !trimmed.ends_with(b"->")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_and_library_words_let_a_file_through() {
        assert!(can_contribute("use redis::AsyncCommands; c.get(&k)"));
        assert!(can_contribute("let ok = c.set_nx(&k, 1)?;"));
        assert!(
            can_contribute("let v = cmd(\"GET\").arg(k);"),
            "a builder needs no client name"
        );
        assert!(can_contribute("s.key(k).invoke_async(&mut c)"));
        assert!(can_contribute(
            "const S: &str = \"return redis.call('del', KEYS[1])\";"
        ));
        assert!(
            !can_contribute("pub const REDISTRIBUTE_FLAGS: u32 = 1;"),
            "a client's name without a command"
        );
        assert!(!can_contribute("map.get(&k); // no client"));
        assert!(can_contribute("// locklint: allow(get-then-set) -- reason"));
        assert!(can_contribute("let s = Script::new(SRC);"));
        assert!(can_contribute("diesel::sql_query(q)"));
        assert!(can_contribute("sqlx::query(Q).execute(&pool)"));
        assert!(can_contribute("use sqlx::query; let r = query!(Q);"));
        assert!(!can_contribute("pub const SQLX_SQL_QUERY_FLAGS: u32 = 1;"));
        assert!(can_contribute(
            "use diesel::prelude::*; diesel::update(locks::table).set(o).execute(c)"
        ));
        assert!(can_contribute(
            "use sea_orm::EntityTrait; lock::Entity::delete_many().exec(db)"
        ));
        assert!(
            !can_contribute("use sea_orm::EntityTrait; lock::Entity::find().all(db)"),
            "an ORM read"
        );
        assert!(
            can_contribute("use sea_orm::entity::prelude::*;\n#[sea_orm(table_name = \"locks\")]"),
            "an entity's table"
        );
        assert!(
            !can_contribute("fn update(x: u32) -> u32 { x }"),
            "a write's name without an ORM"
        );
        assert!(!can_contribute("fn main() { println!(\"hello\"); }"));
        assert!(!can_contribute(
            "struct Settings; // offset\nlet s = \"settings\";"
        ));
    }

    #[test]
    fn literals_that_start_like_sql_let_a_file_through() {
        for text in [
            r#"c.execute("UPDATE jobs SET x = 1", &[])"#,
            r#"const Q: &str = "\n    select 1";"#,
            r##"let q = r#"
                  delete from t"#;"##,
            r#"let q = "-- comment\nSELECT 1";"#,
            r#"let q = "\
                INSERT INTO t VALUES (1)";"#,
            r#"let h = "Set-Cookie";"#,
            "let q = \"\u{a0}SELECT 1\";",
            r#"let q = "DO $$ BEGIN END $$";"#,
        ] {
            assert!(can_contribute(text), "{text}");
        }
        for text in [
            r#"let s = "Settings";"#,
            r#"let s = "selection is empty";"#,
            r#"let s = "";"#,
            r#"let s = "123 update";"#,
            r#"h.insert("Set-Cookie", v)"#,
            r#"println!("delete {}", x)"#,
            r#"f("SELECT 1") // no method that runs SQL"#,
            r#"w!("Do not bind to Internet shell folder handlers")"#,
        ] {
            assert!(!can_contribute(text), "{text}");
        }
    }

    #[test]
    fn mentions_are_whole_identifiers_and_definitions_follow_fn() {
        let m = Mentions::new([
            ("acquire", Appears::Used),
            ("lock", Appears::Used),
            ("release", Appears::Defined(FN)),
            ("KEY", Appears::Defined(CONST)),
            ("Pool", Appears::Defined(STRUCT)),
        ]);
        assert!(m
            .find("let x = try_acquire(1); unlock(); released()")
            .is_empty());
        let mut found = m.find("a.acquire(); unlock(); lock(k)");
        found.sort();
        assert_eq!(found, vec![0, 1]);
        assert!(m.find("x.release(k)").is_empty());
        assert_eq!(m.find("pub async fn release(&self) {}"), vec![2]);
        assert_eq!(m.find("fn\n    release()"), vec![2]);
        assert!(m.find("define_fn release").is_empty());
        assert_eq!(m.find("pub(crate) static mut KEY: &str = \"\";"), vec![3]);
        assert_eq!(m.find("const KEY: &str = \"\";"), vec![3]);
        assert!(m.find("let x = KEY; struct Other;").is_empty());
        assert_eq!(m.find("pub struct Pool<T> { c: T }"), vec![4]);
        assert!(m.find("fn make() -> Pool { Pool::new() }").is_empty());
        let ty = Mentions::new([("Pool", Appears::Implemented)]);
        for text in ["impl Pool {", "impl<T> Pool<T> {", "impl Drop for Pool {"] {
            assert_eq!(ty.find(text), vec![0], "{text}");
        }
        for text in [
            "fn f() -> Pool {",
            "let p: Vec<u8> = Pool::new();",
            "struct Pool;",
        ] {
            assert!(ty.find(text).is_empty(), "{text}");
        }
        assert!(Mentions::new([]).find("anything").is_empty());
        let gap = Mentions::new([("", Appears::Used), ("x", Appears::Used)]);
        assert_eq!(gap.find("let x = 1;"), vec![1], "indexes as given");
    }
}
