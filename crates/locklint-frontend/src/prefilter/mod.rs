//! Which Rust files can hold anything the analysis reads, decided from their bytes before any
//! parse (most of a large tree has nothing to do with locks and is never parsed).
//!
//! [`can_contribute`] is a superset of what the Rust front-end recognises in a file on its own:
//! the front-end records Redis commands from builders (`cmd(..)`, `Cmd::new()`, `Pipeline`),
//! script invocations (`invoke`), and command methods (`get`, `set_nx`, `del` ...) only in files
//! that name a Redis client ([`names_redis`]: a part of an identifier that starts with `redis`
//! or `fred`), `set_nx` or `setnx`; SQL and Lua only where a library that takes
//! such text is named (`sqlx`, `sql_query`, `from_string`, `from_sql_and_values`,
//! `Script::new`, fred's `eval`) or an ORM write is (`diesel`, `sea_orm` and a write's
//! `update`, `insert_into`, `update_many` ...), a string literal starts like SQL or a constant holds
//! `redis.call(`; suppressions and the runtime crate's types are spelled `locklint`, the
//! Redlock crates `rslock` and `redlock`.
//! A file that passes none of these tests gives an intermediate form with no operation, no
//! statement and no script; what it can still give (a const, a struct field, a function other
//! files call) is only needed when a parsed file names it, and [`Mentions`] finds the files
//! that name it (the project layer decides which names, `locklint_project::reach`).
//!
//! The file is read once ([`read`]): one pass over its identifiers ([`Spelling`]), which it
//! keeps when it is left out; each distinct identifier is looked into once for the words that
//! count inside one, and each occurrence of a listed identifier is looked up by its hash.

mod mentions;
mod spelling;
mod sql_literal;

pub use mentions::{Appears, Keywords, Mentions, CONST, FN, METHOD, STRUCT};
pub use spelling::Spelling;

use std::collections::HashMap;
use std::sync::OnceLock;

/// Words that, anywhere in an identifier and in any case, mean the front-end may find
/// something in the file: suppressions and the runtime crate, the Redlock crates the audit
/// recognises. Two more things do: Lua that calls Redis (`redis.call(`, `redis.pcall(`, any
/// case: a script held in a constant) and a `Script::new` (a Redis script).
const LIBRARY_WORDS: &[&str] = &["locklint", "rslock", "redlock"];

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

/// Words (any case, anywhere in an identifier) that make the front-end read ORM writes
/// (`walker::orm`).
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

/// Words that make the front-end take command methods for Redis commands: a client's name
/// starting a part of an identifier ([`names_redis`]), or an NX acquire's name anywhere in
/// one, in any case.
const CLIENT_WORDS: &[&str] = &["redis", "fred"];
const NX_WORDS: &[&str] = &["set_nx", "setnx"];

/// Where an identifier of [`ANY_FILE_IDENTS`] must stand to count, by the bytes around it
/// (ASCII whitespace skipped; a `/` may start a comment in between, so it counts too; `::`
/// counts, a lone `:` does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stands {
    /// Called or named as a path: `cmd(..)`, `cmd::<T>(..)`, `.cmd(..)`.
    Called,
    /// The type of a path: `Cmd::new()`, `Pipeline::with_capacity(..)`.
    PathType,
    /// A method called: `.invoke_async(..)`, `.invoke::<T>(..)`.
    Method,
}

/// Identifiers that start a Redis operation in any file, where they stand as the front-end
/// reads them: a `cmd(..)` / `Cmd::new()` builder, a `Pipeline::new()`, a script's `invoke`;
/// and the calls that take SQL text.
const ANY_FILE_IDENTS: &[(&str, Stands)] = &[
    ("cmd", Stands::Called),
    ("Cmd", Stands::PathType),
    ("Pipeline", Stands::PathType),
    ("invoke", Stands::Method),
    ("invoke_async", Stands::Method),
    ("sql_query", Stands::Called),
];

/// sea-orm's calls that take SQL text, in a path that names a `Statement`
/// (`Statement::from_string(..)`): they count in a file with an identifier that holds
/// `Statement`.
const STATEMENT_IDENTS: &[&str] = &["from_string", "from_sql_and_values"];

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

/// Whether the Rust text `text` can contribute a fact or a finding by itself: it names a
/// library the front-end recognises or a suppression, starts a Redis builder, holds a string
/// literal that starts like SQL, or names a Redis client and a command method.
pub fn can_contribute(text: &str) -> bool {
    reason(text).is_some()
}

/// Why [`can_contribute`] lets `text` through, if it does.
pub fn reason(text: &str) -> Option<&'static str> {
    read(text).reason
}

/// A Rust file as the prefilter read it.
#[derive(Debug, Clone)]
pub struct Read {
    /// Why it is let through ([`reason`]), if it is.
    pub reason: Option<&'static str>,
    /// Its identifiers, for the names later asked of a file left out.
    pub spelling: Spelling,
}

/// Read a Rust file once: whether it can contribute, and its identifiers.
pub fn read(text: &str) -> Read {
    let bytes = text.as_bytes();
    let exact = exact_words();
    let mut spelling = spelling::Builder::default();
    let mut found = 0u16;
    let mut prev: (usize, usize) = (0, 0);
    spelling::identifiers(bytes, |start, end, h, flags| {
        let word = &bytes[start..end];
        if spelling.add(h, flags) {
            found |= inside_memo(h, word);
        }
        if let Some((w, groups, stands)) = exact.get(h) {
            if w.as_bytes() == word && stands.is_none_or(|s| stands_as(bytes, start, end, s)) {
                found |= groups;
            }
        }
        if ends_with_ignore_case(word, b"redis") {
            let after = &bytes[end..];
            if starts_with_ignore_case(after, b".call(")
                || starts_with_ignore_case(after, b".pcall(")
            {
                found |= Group::Library.bit();
            }
        }
        if word == b"new" && &bytes[prev.0..prev.1] == b"Script" {
            let gap: Vec<u8> = bytes[prev.1..start]
                .iter()
                .copied()
                .filter(|b| !b.is_ascii_whitespace())
                .collect();
            if gap.starts_with(b"::") {
                found |= Group::Library.bit();
            }
        }
        prev = (start, end);
    });
    let has = |g: Group| found & g.bit() != 0;
    let reason = if has(Group::Library) {
        Some("names locklint, a Redis script or a lock library")
    } else if has(Group::AnyFile) || (has(Group::StatementCall) && has(Group::Statement)) {
        Some("starts a Redis command builder or hands SQL to a library")
    } else if sql_literal::has_sql_literal(bytes, has(Group::SqlMethods)) {
        Some("holds a string that starts like SQL")
    } else if has(Group::Redis) && has(Group::Commands) {
        Some("names a Redis client and a command")
    } else if has(Group::Sqlx) && has(Group::Queries) {
        Some("names sqlx and a query")
    } else if has(Group::Orm) && has(Group::OrmWrites) {
        Some("names an ORM and a write")
    } else {
        None
    };
    Read {
        reason,
        spelling: spelling.finish(),
    }
}

/// Whether `text` names a Redis client: an identifier with a part (after `_`, a digit or a
/// lower-case letter before an upper-case one, or at its start) that starts with `redis` or
/// `fred` in any case (`deadpool_redis`, `RedisPool`, `REDIS_URL`, `fred::prelude`, `rediss://`;
/// not `HalAcquireDisplay`, `Alfred`).
pub fn names_redis(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut found = false;
    spelling::identifiers(bytes, |start, end, _, _| {
        found = found || client_part(&bytes[start..end]);
    });
    found
}

/// Whether an identifier has a part that starts with a client's name ([`names_redis`]).
fn client_part(word: &[u8]) -> bool {
    (0..word.len()).any(|p| {
        part_starts(word, p)
            && CLIENT_WORDS
                .iter()
                .any(|w| starts_with_ignore_case(&word[p..], w.as_bytes()))
    })
}

/// Whether a part of an identifier starts at `p`: its start, or after `_`, a digit, a
/// non-ASCII byte, or a lower-case letter before an upper-case one.
fn part_starts(word: &[u8], p: usize) -> bool {
    p == 0 || {
        let (before, at) = (word[p - 1], word[p]);
        before == b'_'
            || before.is_ascii_digit()
            || !before.is_ascii()
            || (before.is_ascii_lowercase() && at.is_ascii_uppercase())
    }
}

/// A word that counts inside an identifier, in lower case, with its group and whether it must
/// start a part of the identifier.
type InsideWord = (&'static str, u16, bool);

/// The words that count inside an identifier, by their first letter (its lower-case byte).
fn inside_words() -> &'static [Vec<InsideWord>; 256] {
    static WORDS: OnceLock<[Vec<InsideWord>; 256]> = OnceLock::new();
    WORDS.get_or_init(|| {
        let mut v = Vec::new();
        v.extend(
            LIBRARY_WORDS
                .iter()
                .map(|w| (*w, Group::Library.bit(), false)),
        );
        v.extend(CLIENT_WORDS.iter().map(|w| (*w, Group::Redis.bit(), true)));
        v.extend(NX_WORDS.iter().map(|w| (*w, Group::Redis.bit(), false)));
        v.push(("sqlx", Group::Sqlx.bit(), false));
        v.extend(ORM_WORDS.iter().map(|w| (*w, Group::Orm.bit(), false)));
        let mut by_first: [Vec<(&'static str, u16, bool)>; 256] =
            std::array::from_fn(|_| Vec::new());
        for w in v {
            by_first[w.0.as_bytes()[0] as usize].push(w);
        }
        by_first
    })
}

/// The longest identifier [`inside_memo`] keeps.
const MEMO_LEN: usize = 22;

/// One identifier [`inside_memo`] keeps: its hash, length, bytes and groups.
#[derive(Clone, Copy)]
struct Memo {
    h: u64,
    len: u8,
    bytes: [u8; MEMO_LEN],
    groups: u16,
}

thread_local! {
    /// Per thread, the groups of identifiers read lately, one per slot picked by the hash's
    /// low bits: most identifiers of a file were read in others.
    static MEMO: std::cell::RefCell<Vec<Memo>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`inside`] of the identifier `word` (of hash `h`), kept per thread for identifiers short
/// enough: a slot answers only for the very bytes it holds.
fn inside_memo(h: u64, word: &[u8]) -> u16 {
    const SLOTS: usize = 1 << 14;
    if word.len() > MEMO_LEN {
        return inside(word);
    }
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if m.is_empty() {
            let empty = Memo {
                h: 0,
                len: u8::MAX,
                bytes: [0; MEMO_LEN],
                groups: 0,
            };
            m.resize(SLOTS, empty);
        }
        let slot = &mut m[h as usize & (SLOTS - 1)];
        if slot.h == h && usize::from(slot.len) == word.len() && &slot.bytes[..word.len()] == word {
            return slot.groups;
        }
        let groups = inside(word);
        slot.h = h;
        slot.len = word.len() as u8;
        slot.bytes[..word.len()].copy_from_slice(word);
        slot.groups = groups;
        groups
    })
}

/// The groups of the words that count inside an identifier: any case, anywhere (a client's
/// name only where a part starts), and `Statement` as written. One pass over the identifier:
/// a word is compared only where its first letter is.
fn inside(word: &[u8]) -> u16 {
    const SHORTEST: usize = 4;
    if word.len() < SHORTEST {
        return 0;
    }
    let words = inside_words();
    let mut found = 0;
    for p in 0..=word.len() - SHORTEST {
        let c = word[p];
        let starting = &words[c.to_ascii_lowercase() as usize];
        if starting.is_empty() && c != b'S' {
            continue;
        }
        let rest = &word[p..];
        for &(w, group, part) in starting {
            if starts_with_ignore_case(rest, w.as_bytes()) && (!part || part_starts(word, p)) {
                found |= group;
            }
        }
        if c == b'S' && rest.starts_with(b"Statement") {
            found |= Group::Statement.bit();
        }
    }
    found
}

fn starts_with_ignore_case(text: &[u8], w: &[u8]) -> bool {
    text.get(..w.len())
        .is_some_and(|t| t.eq_ignore_ascii_case(w))
}

fn ends_with_ignore_case(text: &[u8], w: &[u8]) -> bool {
    text.len() >= w.len() && text[text.len() - w.len()..].eq_ignore_ascii_case(w)
}

/// Whether the identifier at `start..end` stands as `stands` says.
fn stands_as(bytes: &[u8], start: usize, end: usize, stands: Stands) -> bool {
    let after = bytes[end..].trim_ascii_start();
    let prev = bytes[..start]
        .iter()
        .rev()
        .find(|b| !b.is_ascii_whitespace());
    let path = after.starts_with(b"::") || after.starts_with(b"/");
    let called = path || after.starts_with(b"(");
    match stands {
        Stands::Called => called,
        Stands::PathType => path,
        Stands::Method => called && matches!(prev, Some(b'.' | b'/')),
    }
}

/// The word lists [`read`] looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// [`LIBRARY_WORDS`], Lua calling Redis, `Script::new`.
    Library,
    /// [`ANY_FILE_IDENTS`], whole identifiers where they stand so.
    AnyFile,
    /// [`STATEMENT_IDENTS`], whole identifiers called.
    StatementCall,
    /// An identifier that holds `Statement`.
    Statement,
    /// A client's name or [`NX_WORDS`].
    Redis,
    /// [`COMMAND_IDENTS`], whole identifiers.
    Commands,
    /// `sqlx`, any case, anywhere in an identifier.
    Sqlx,
    /// [`SQLX_IDENTS`], whole identifiers.
    Queries,
    /// [`ORM_WORDS`], any case, anywhere in an identifier.
    Orm,
    /// [`ORM_IDENTS`], whole identifiers.
    OrmWrites,
    /// [`sql_literal::SQL_METHOD_IDENTS`], whole identifiers.
    SqlMethods,
}

impl Group {
    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// The whole identifiers of every list by their hash: the word as listed, the groups that list
/// it, and where it must stand; with a sieve of their hashes' low bits, which tells most
/// identifiers apart without a look-up.
struct Exact {
    words: HashMap<u64, (&'static str, u16, Option<Stands>), foldhash::fast::FixedState>,
    sieve: spelling::Sieve,
}

impl Exact {
    /// The word of hash `h`, if one is listed.
    fn get(&self, h: u64) -> Option<&(&'static str, u16, Option<Stands>)> {
        self.sieve.may_hold(h).then(|| self.words.get(&h)).flatten()
    }
}

fn exact_words() -> &'static Exact {
    static WORDS: OnceLock<Exact> = OnceLock::new();
    WORDS.get_or_init(|| {
        let mut words: HashMap<_, _, _> = HashMap::default();
        let mut add = |w: &'static str, g: Group, stands: Option<Stands>| {
            let entry = words
                .entry(spelling::ident_hash(w.as_bytes()))
                .or_insert((w, 0, stands));
            assert_eq!(entry.0, w, "two listed words share a hash");
            entry.1 |= g.bit();
        };
        for (w, stands) in ANY_FILE_IDENTS {
            add(w, Group::AnyFile, Some(*stands));
        }
        for w in STATEMENT_IDENTS {
            add(w, Group::StatementCall, Some(Stands::Called));
        }
        for (words, g) in [
            (COMMAND_IDENTS, Group::Commands),
            (SQLX_IDENTS, Group::Queries),
            (ORM_IDENTS, Group::OrmWrites),
            (sql_literal::SQL_METHOD_IDENTS, Group::SqlMethods),
        ] {
            for w in words {
                add(w, g, None);
            }
        }
        // 4,096 bits
        let sieve = spelling::Sieve::new(64, words.keys().copied());
        Exact { words, sieve }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_identifier_answers_only_for_its_own_bytes() {
        // two identifiers given one hash share a slot: each gets its own groups
        let redis = Group::Redis.bit();
        assert_eq!(inside_memo(7, b"redis_pool"), redis);
        assert_eq!(inside_memo(7, b"plain_name"), 0);
        assert_eq!(inside_memo(7, b"redis_pool"), redis);
        assert_eq!(inside_memo(7, b"redis_poo"), inside(b"redis_poo"));
        let long = b"a_very_long_identifier_with_redlock_inside";
        assert_eq!(inside_memo(9, long), Group::Library.bit());
        assert_eq!(inside_memo(9, b"alfred_x"), 0);
    }

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
    fn builders_count_only_where_they_stand_as_the_front_end_reads_them() {
        for text in [
            "let v = redis::cmd(\"GET\").arg(k);",
            "let v = cmd (\"GET\");",
            "let v = cmd::<X>(K);",
            "p.cmd(\"SET\")",
            "let c = redis::Cmd::new();",
            "let c = Cmd :: new();",
            "let p = Pipeline::with_capacity(2);",
            "s.key(k).invoke_async(&mut c)",
            "s.key(k)\n    .invoke::<i32>(&mut c)",
            "diesel::sql_query(q)",
            "let s = Statement::from_string(b, q);",
        ] {
            assert!(can_contribute(text), "{text}");
        }
        for text in [
            "fn msgctl(id: c_int, cmd: c_int) -> c_int;",
            "pub struct X { pub cmd: u16 }",
            "let mut cmd = Command::new(\"ls\"); cmd.arg(x);",
            "(cmd << 8)",
            "/// like the expression `invoke(a, b)`",
            "fn invoke(&self) {}",
            "let x: Pipeline = make();",
            "let v = RawValue::from_string(json)?;",
        ] {
            assert!(!can_contribute(text), "{text}");
        }
    }

    #[test]
    fn a_client_is_named_where_a_part_of_an_identifier_starts_with_it() {
        for text in [
            "use deadpool_redis::Pool;",
            "struct RedisPool;",
            "let url = env(\"REDIS_URL\");",
            "let u = \"rediss://host\";",
            "use fred::prelude::*;",
            "// a Redis lock",
            "let r = bb8redis::x;",
        ] {
            assert!(names_redis(text), "{text}");
        }
        for text in [
            "HalAcquireDisplayOwnership(x)",
            "let d = ShareDisposition;",
            "let n = \"Alfred\";",
            "let x = predispose();",
        ] {
            assert!(!names_redis(text), "{text}");
        }
        assert!(
            !can_contribute("HalAcquireDisplayOwnership(); s.set(1);"),
            "a command method where no client is named"
        );
        assert!(can_contribute("let c: RedisConn = x; c.set(k, v)"));
    }

    #[test]
    fn scripts_are_named_as_the_front_end_reads_them() {
        assert!(can_contribute("let s = Script::new(SRC);"));
        assert!(can_contribute("let s = redis::Script :: new(SRC);"));
        assert!(
            !can_contribute("let s = icu::Script::new_unchecked(3);"),
            "another function of a type named Script"
        );
        assert!(can_contribute(
            "const S: &str = \"return REDIS.CALL('del', KEYS[1])\";"
        ));
        assert!(can_contribute("const S: &str = \"redis.pcall('get', k)\";"));
        assert!(!can_contribute("const S: &str = \"redis.callback\";"));
    }

    #[test]
    fn escapes_and_other_characters_before_a_keyword_are_read() {
        for text in [
            "const Q: &str = \"\\x20SELECT 1\";",
            "const Q: &str = \"\\u{a0}SELECT 1\";",
            "const Q: &str = \"\\u{53}ELECT 1\";",
            "const Q: &str = \"\\x2d- c\\nSELECT 1\";",
            "const Q: &str = \"\u{b}SELECT 1\";",
            "const Q: &str = \"\u{2003}select 1\";",
        ] {
            assert!(can_contribute(text), "{text}");
        }
        for text in [
            "let hay = b\"\\xFEfoo\";",
            "let hay = \"\\x00foo\";",
            "let i = Input::new(\"\u{3b2}123\"); x.execute(1)",
            "const C: &str = \"\\u{10FFFF}\";",
            "t.execute(\"\u{2603}\")",
        ] {
            assert!(!can_contribute(text), "{text}");
        }
    }
}
