//! PostgreSQL steps the proofs share: a private schema with the fixtures' tables, a
//! tokio-postgres client on it, and a database clock that disagrees with the client's.

use crate::sql_support::{pg, PgDb};

/// A private schema with the tables of `tests/compile-fixtures/schema.sql` (the tables the
/// fixtures' queries are written against).
pub async fn db() -> PgDb {
    let db = pg().await;
    let schema = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema.sql"))
        .expect("schema.sql");
    sqlx::raw_sql(&schema)
        .execute(&db.pool)
        .await
        .expect("schema.sql applies");
    db
}

/// A private schema with no tables.
pub async fn empty_db() -> PgDb {
    pg().await
}

/// A private schema with the table a `.sql` fixture creates (its `CREATE` statement, which
/// its `.fixed` form must leave as it is).
pub async fn db_of_sql_fixture(rel: &str) -> PgDb {
    let db = empty_db().await;
    let create = crate::source::sql_statement(rel, "CREATE");
    assert_eq!(
        create,
        crate::source::sql_statement(&format!("{rel}.fixed"), "CREATE"),
        "the fix leaves the table alone"
    );
    sqlx::raw_sql(&create).execute(&db.pool).await.unwrap();
    db
}

/// A tokio-postgres client on the private schema. With `shadowed_clock`, the schema's own
/// `now()` is found before `pg_catalog.now()`: see [`set_clock_behind`].
pub async fn client(db: &PgDb, shadowed_clock: bool) -> tokio_postgres::Client {
    let base = crate::sql_support::pg_base_options().await;
    let path = if shadowed_clock {
        format!("{},pg_catalog", db.schema)
    } else {
        db.schema.clone()
    };
    let mut config = tokio_postgres::Config::new();
    config
        .host(base.get_host())
        .port(base.get_port())
        .user(base.get_username())
        .dbname(base.get_database().unwrap_or("postgres"))
        .options(format!("-c search_path={path}"));
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("tokio-postgres connects");
    tokio::spawn(connection);
    client
}

/// The database's clock runs `behind` (an interval such as `'1 hour'`) behind the client's:
/// the schema gets its own `now()`, which connections whose `search_path` lists the schema
/// before `pg_catalog` (see [`client`]) call instead of `pg_catalog.now()`.
pub async fn set_clock_behind(db: &PgDb, behind: &str) {
    sqlx::raw_sql(&format!(
        "CREATE FUNCTION {schema}.now() RETURNS timestamptz LANGUAGE sql STABLE \
         AS $$ SELECT pg_catalog.now() - interval '{behind}' $$",
        schema = db.schema
    ))
    .execute(&db.pool)
    .await
    .expect("create the schema's now()");
}
