//! Where Rust code hands SQL or Lua text to a library: sqlx, tokio-postgres/postgres, diesel,
//! sea-orm, redis scripts and fred. Also tells pools from held connections and transactions.

use locklint_ir::vocabulary::words;
use locklint_ir::{Executor, Language, Library};

/// A call site that takes SQL or Lua text: which argument, in which language.
pub struct Site {
    pub arg: usize,
    pub language: Language,
    pub origin: Library,
}

/// Path calls: `sqlx::query("..")`, `sql_query("..")`, `Statement::from_string(b, "..")`,
/// `redis::Script::new("..")`.
pub fn call_site(name: &str, full: &str, nargs: usize, sqlx_file: bool) -> Option<Site> {
    let sql = |arg, origin| {
        Some(Site {
            arg,
            language: Language::Sql,
            origin,
        })
    };
    match name {
        "query" | "query_as" | "query_scalar" | "query_with" | "query_as_with"
        | "query_scalar_with"
            if nargs >= 1 && (full.contains("sqlx") || sqlx_file) =>
        {
            sql(0, Library::Sqlx)
        }
        "sql_query" if nargs == 1 => sql(0, Library::Diesel),
        "from_string" if full.contains("Statement") && nargs == 2 => sql(1, Library::SeaOrm),
        "from_sql_and_values" if full.contains("Statement") && nargs == 3 => {
            sql(1, Library::SeaOrm)
        }
        "new" if full.ends_with("Script::new") && nargs == 1 => Some(Site {
            arg: 0,
            language: Language::Lua,
            origin: Library::RedisScript,
        }),
        _ => None,
    }
}

/// A path call of a project's database module named like sqlx's query functions
/// (`utils::database::query(..)`, `db::query_as(..)`): it takes SQL text first when that text
/// starts like SQL.
pub fn database_wrapper(name: &str, full: &str) -> bool {
    let segments: Vec<&str> = full.split("::").collect();
    let modules = &segments[..segments.len().saturating_sub(1)];
    let db_module = modules.iter().any(|seg| {
        matches!(
            seg.to_ascii_lowercase().as_str(),
            "database" | "db" | "sql" | "pg" | "postgres" | "storage"
        )
    });
    db_module && matches!(name, "query" | "query_as" | "query_scalar")
}

/// sqlx query macros: the argument holding the SQL.
pub fn macro_site(name: &str, full: &str, sqlx_file: bool) -> Option<usize> {
    if !(full.contains("sqlx") || sqlx_file) {
        return None;
    }
    match name {
        "query" | "query_scalar" | "query_unchecked" | "query_scalar_unchecked" => Some(0),
        "query_as" | "query_as_unchecked" => Some(1),
        _ => None,
    }
}

/// Methods that take SQL text first (tokio-postgres, postgres, sqlx `Executor`) or Lua text
/// (fred `eval`, `script_load`).
pub fn method_site(name: &str) -> Option<Language> {
    match name {
        "execute" | "query" | "query_one" | "query_opt" | "query_raw" | "execute_raw"
        | "prepare" | "prepare_cached" | "batch_execute" | "simple_query" | "fetch_one"
        | "fetch_all" | "fetch_optional" => Some(Language::Sql),
        "eval" | "script_load" => Some(Language::Lua),
        _ => None,
    }
}

/// Methods that run a prepared sqlx/diesel query on an executor given as the argument.
pub fn is_exec_method(name: &str) -> bool {
    matches!(
        name,
        "execute"
            | "fetch"
            | "fetch_one"
            | "fetch_all"
            | "fetch_optional"
            | "fetch_many"
            | "load"
            | "get_result"
            | "get_results"
            | "first"
    )
}

/// Text that starts like a SQL statement (for method calls whose name alone is not enough).
pub fn looks_like_sql(text: &str) -> bool {
    let mut t = text.trim_start();
    while let Some(rest) = t.strip_prefix("--") {
        t = rest
            .split_once('\n')
            .map(|(_, r)| r)
            .unwrap_or("")
            .trim_start();
    }
    let first: String = t
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_uppercase();
    if first == "DO" {
        return is_do_block(&t[2..]);
    }
    matches!(
        first.as_str(),
        "SELECT"
            | "INSERT"
            | "UPDATE"
            | "DELETE"
            | "WITH"
            | "CREATE"
            | "ALTER"
            | "DROP"
            | "BEGIN"
            | "COMMIT"
            | "ROLLBACK"
            | "LOCK"
            | "SET"
            | "TRUNCATE"
            | "MERGE"
            | "CALL"
            | "DO"
            | "VALUES"
            | "REPLACE"
            | "UPSERT"
    )
}

/// What follows `DO` in an anonymous code block: its code, quoted (`$$`, `$tag$`, `'..'`), or
/// `LANGUAGE`; "Do not ..." is prose.
pub fn is_do_block(rest: &str) -> bool {
    let after = rest.trim_start();
    after.len() < rest.len()
        && (after.starts_with(['$', '\'']) || after.to_ascii_uppercase().starts_with("LANGUAGE"))
}

/// What a declared type says about an executor.
pub fn executor_of_type(ty: &str) -> Option<Executor> {
    let t = ty.replace(' ', "");
    if t.contains("Transaction") {
        Some(Executor::Transaction)
    } else if t.contains("PoolConnection")
        || t.contains("PooledConnection")
        || t.contains("Connection")
        || t.contains("Client")
        || t.contains("Object")
    {
        Some(Executor::Connection)
    } else if t.contains("Pool") {
        Some(Executor::Pool)
    } else {
        None
    }
}

/// What a sea-orm type says about an executor, in a file that names sea-orm: its
/// `DatabaseConnection` is a pool (every statement takes a connection from it and gives it
/// back), whatever its name says; a `DatabaseTransaction` holds one connection.
pub fn sea_orm_executor_of_type(ty: &str) -> Option<Executor> {
    let t = ty.replace(' ', "");
    let t = t.trim_start_matches('&').trim_start_matches("mut");
    let last = t.rsplit("::").next().unwrap_or(t);
    match last {
        "DatabaseConnection" => Some(Executor::Pool),
        "DatabaseTransaction" => Some(Executor::Transaction),
        _ => None,
    }
}

/// What a name says about an executor (`tx`, `pool`, `conn`).
pub fn executor_of_name(name: &str) -> Option<Executor> {
    let w = words(name);
    let has = |x: &[&str]| w.iter().any(|a| x.contains(&a.as_str()));
    if has(&["tx", "txn", "trx", "transaction"]) {
        Some(Executor::Transaction)
    } else if has(&["pool"]) {
        Some(Executor::Pool)
    } else if has(&["conn", "connection", "client", "session"]) {
        Some(Executor::Connection)
    } else {
        None
    }
}

/// What a method call on an executor returns (`pool.acquire()` is a connection).
pub fn executor_of_method(name: &str) -> Option<Executor> {
    match name {
        "acquire" | "get" | "get_owned" | "detach" | "connect" | "dedicated_connection" => {
            Some(Executor::Connection)
        }
        "begin" | "transaction" | "build_transaction" | "begin_with" => Some(Executor::Transaction),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn do_blocks_are_sql_and_prose_is_not() {
        assert!(looks_like_sql("DO $$ BEGIN PERFORM 1; END $$"));
        assert!(looks_like_sql("do language plpgsql $x$ begin end $x$"));
        assert!(looks_like_sql("DO 'BEGIN END'"));
        assert!(!looks_like_sql("Do not require validated URLs"));
        assert!(!looks_like_sql("DO"));
    }

    #[test]
    fn sql_detection() {
        assert!(looks_like_sql("  -- lock\n  UPDATE t SET a = 1"));
        assert!(!looks_like_sql("{ user(id: 1) { name } }"));
        assert!(!looks_like_sql("hello"));
    }

    #[test]
    fn executors() {
        assert_eq!(executor_of_type("&PgPool"), Some(Executor::Pool));
        assert_eq!(executor_of_type("Pool<Postgres>"), Some(Executor::Pool));
        assert_eq!(
            executor_of_type("&mut PoolConnection<Postgres>"),
            Some(Executor::Connection)
        );
        assert_eq!(
            executor_of_type("&mut Transaction<'_, Postgres>"),
            Some(Executor::Transaction)
        );
        assert_eq!(
            sea_orm_executor_of_type("&DatabaseConnection"),
            Some(Executor::Pool)
        );
        assert_eq!(
            sea_orm_executor_of_type("&sea_orm::DatabaseTransaction"),
            Some(Executor::Transaction)
        );
        assert_eq!(sea_orm_executor_of_type("&mut PgConnection"), None);
        assert_eq!(executor_of_name("db_pool"), Some(Executor::Pool));
        assert_eq!(executor_of_name("tx"), Some(Executor::Transaction));
        assert_eq!(executor_of_name("conn"), Some(Executor::Connection));
        assert_eq!(executor_of_name("state"), None);
    }
}
