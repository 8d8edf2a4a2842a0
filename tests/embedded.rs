//! SQL and Lua text embedded in Rust is collected with an exact map back to the file, and each
//! executed statement knows what ran it (pool, connection, transaction).

use locklint::frontend;
use locklint::ir::{Executor, Language};
use locklint::source::SourceFile;

const SRC: &str = r####"use sqlx::PgPool;
const RELEASE: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0"#;

async fn run(pool: &PgPool, con: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<()> {
    sqlx::query("UPDATE invoice_state \
                 SET last_run = 'done' WHERE id = $1")
        .bind(7)
        .execute(pool)
        .await?;
    let mut tx = pool.begin().await?;
    sqlx::query!("DELETE FROM jobs WHERE id = $1", 3).execute(&mut *tx).await?;
    let mut conn = pool.acquire().await?;
    sqlx::query_scalar::<_, bool>(r#"SELECT pg_try_advisory_lock(42)"#).fetch_one(&mut *conn).await?;
    let _: i32 = redis::Script::new(RELEASE).key("lock:x").arg("t").invoke_async(con).await?;
    Ok(())
}

fn pg(client: &mut postgres::Client) {
    client.execute("SELECT pg_advisory_unlock(42)", &[]).unwrap();
    client.execute("not sql at all", &[]).unwrap();
}
"####;

#[test]
fn embedded_texts_map_back_and_know_their_executor() {
    let file = SourceFile::new("embedded.rs".into(), SRC.to_string());
    let ir = frontend::analyze(0, file.clone());
    let found: Vec<(Language, &str, Option<Executor>)> = ir
        .embedded
        .iter()
        .map(|e| {
            (
                e.language,
                e.text.as_str(),
                e.exec.as_ref().map(|x| x.executor),
            )
        })
        .collect();
    assert_eq!(found.len(), 5, "{found:#?}");
    assert_eq!(found[0].0, Language::Sql);
    assert_eq!(
        found[0].1,
        "UPDATE invoice_state SET last_run = 'done' WHERE id = $1"
    );
    assert_eq!(found[0].2, Some(Executor::Pool));
    assert_eq!(found[1].1, "DELETE FROM jobs WHERE id = $1");
    assert_eq!(found[1].2, Some(Executor::Transaction));
    assert_eq!(found[2].1, "SELECT pg_try_advisory_lock(42)");
    assert_eq!(found[2].2, Some(Executor::Connection));
    assert_eq!(found[3].0, Language::Lua);
    assert!(found[3].1.starts_with("if redis.call(\"get\""));
    assert_eq!(found[4].1, "SELECT pg_advisory_unlock(42)");
    assert_eq!(found[4].2, Some(Executor::Connection));

    // positions inside the literal map back to the file, across the `\` continuation
    let e = &ir.embedded[0];
    let at = e.text.find("WHERE").unwrap();
    let span = e.map.span(at, at + "WHERE".len());
    assert_eq!(file.snippet(span), "WHERE");
    let lc = file.line_col(span.start);
    assert_eq!((lc.line, lc.column), (6, 40));
    let lua = &ir.embedded[3];
    let del = lua.text.find("del").unwrap();
    assert_eq!(file.snippet(lua.map.span(del, del + 3)), "del");
    assert_eq!(file.line_col(lua.map.to_source(del)).line, 2);

    // the statements are events of the function, in order
    let run = &ir.functions[0];
    let sql_events = run
        .events
        .iter()
        .filter(|e| matches!(e, locklint::ir::Event::Sql { .. }))
        .count();
    assert_eq!(sql_events, 3);
}

#[test]
fn sql_and_lua_files_are_whole_texts() {
    let f = SourceFile::new("m.sql".into(), "UPDATE t SET a = 1;\n".into());
    let ir = frontend::analyze(0, f);
    assert_eq!(ir.embedded.len(), 1);
    assert_eq!(ir.embedded[0].language, Language::Sql);
    assert_eq!(ir.embedded[0].map.to_source(7), 7);
    let f = SourceFile::new("release.lua".into(), "return 1\n".into());
    assert_eq!(frontend::analyze(0, f).embedded[0].language, Language::Lua);
}

#[test]
fn scripts_built_in_static_initialisers_are_collected() {
    let src = "use std::sync::LazyLock;\nstatic RELEASE: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(r\"return redis.call('del', KEYS[1])\"));\n";
    let file = SourceFile::new("s.rs".into(), src.to_string());
    let ir = frontend::analyze(0, file.clone());
    assert_eq!(ir.embedded.len(), 1);
    assert_eq!(ir.embedded[0].language, Language::Lua);
    let at = ir.embedded[0].text.find("del").unwrap();
    assert_eq!(file.snippet(ir.embedded[0].map.span(at, at + 3)), "del");
}

/// The connection each statement runs on, and where each connection variable ends: closed,
/// marked to close on drop, detached, dropped or out of scope, and whether dropping it hands
/// it back to a pool.
#[test]
fn connection_variables_record_how_they_end() {
    use locklint::ir::{EndKind, Event};
    const CONNS: &str = r#"use sqlx::{Connection, PgConnection, PgPool};
async fn run(pool: &PgPool, url: &str) -> sqlx::Result<()> {
    let mut pooled = pool.acquire().await?;
    sqlx::query("SELECT pg_advisory_lock(1)").execute(&mut *pooled).await?;
    let mut marked = pool.acquire().await?;
    marked.close_on_drop();
    let mut detached = pool.acquire().await?;
    drop(detached.detach());
    let own = PgConnection::connect(url).await?;
    own.close().await?;
    let mut kept = PgConnection::connect(url).await?;
    sqlx::query("SELECT 1").execute(&mut kept).await?;
    sqlx::query("SELECT 2").execute(pool).await?;
    drop(pooled);
    let cache = std::collections::HashMap::<u8, u8>::new();
    drop(cache);
    Ok(())
}
async fn handed_on(pool: &PgPool) -> sqlx::Result<sqlx::pool::PoolConnection<sqlx::Postgres>> {
    let conn = pool.acquire().await?;
    Ok(conn)
}
"#;
    let file = SourceFile::new("conns.rs".into(), CONNS.to_string());
    let ir = frontend::analyze(0, file.clone());
    let on: Vec<Option<&str>> = ir
        .embedded
        .iter()
        .map(|e| e.exec.as_ref().and_then(|x| x.conn.as_deref()))
        .collect();
    assert_eq!(on, [Some("pooled"), Some("kept"), None]);
    let closes: Vec<Option<bool>> = ir
        .embedded
        .iter()
        .map(|e| e.exec.as_ref().and_then(|x| x.conn_closes))
        .collect();
    assert_eq!(closes, [Some(false), Some(true), None]);
    let ends: Vec<(&str, EndKind, bool, &str)> = ir.functions[0]
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ConnEnd(c) => Some((c.var.as_str(), c.kind, c.to_pool, file.snippet(c.span))),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        [
            ("marked", EndKind::CloseOnDrop, false, "close_on_drop()"),
            ("detached", EndKind::Detach, false, "detach()"),
            ("own", EndKind::Close, false, "close()"),
            ("pooled", EndKind::Drop, true, "drop(pooled)"),
            ("pooled", EndKind::ScopeEnd, true, "}"),
            ("marked", EndKind::ScopeEnd, false, "}"),
            ("detached", EndKind::ScopeEnd, false, "}"),
            ("own", EndKind::ScopeEnd, false, "}"),
            ("kept", EndKind::ScopeEnd, false, "}"),
        ]
    );
    // a connection the function returns does not end in it
    assert!(!ir.functions[1]
        .events
        .iter()
        .any(|e| matches!(e, Event::ConnEnd(_))));
}
