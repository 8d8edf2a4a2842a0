//! The test harness itself: throwaway servers start from the installed binaries, so the SQL
//! suites also run on machines without running database servers.

mod support;

use std::str::FromStr;
use std::time::Duration;

use locklint_runtime::table::TableLock;
use sqlx::mysql::MySqlConnectOptions;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, MySqlConnection, PgConnection};

#[tokio::test]
async fn throwaway_postgres_starts_and_serves_a_lock_table() {
    let url = support::sql::start_postgres()
        .await
        .unwrap_or_else(|e| panic!("install the Debian package `postgresql`: {e}"));
    assert!(
        !url.contains(":5432/"),
        "a fresh server on a free port: {url}"
    );
    let pool = sqlx::PgPool::connect_with(PgConnectOptions::from_str(&url).unwrap())
        .await
        .unwrap();
    let locks = TableLock::new(pool.clone());
    locks.migrate().await.unwrap();
    let lease = locks
        .try_acquire("x", Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert!(locks.release(&lease).await.unwrap());
    pool.close().await;
    let conn = PgConnection::connect(&url).await.unwrap();
    conn.close().await.unwrap();
}

#[tokio::test]
async fn throwaway_mariadb_starts_and_serves_a_lock_table() {
    let url = support::sql::start_mariadb()
        .await
        .unwrap_or_else(|e| panic!("install the Debian package `mariadb-server`: {e}"));
    assert!(
        !url.contains(":3306/"),
        "a fresh server on a free port: {url}"
    );
    let mut conn = MySqlConnection::connect_with(&MySqlConnectOptions::from_str(&url).unwrap())
        .await
        .unwrap();
    sqlx::query("CREATE DATABASE harness_check")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let pool = sqlx::MySqlPool::connect_with(
        MySqlConnectOptions::from_str(&url)
            .unwrap()
            .database("harness_check"),
    )
    .await
    .unwrap();
    let locks = TableLock::new(pool.clone());
    locks.migrate().await.unwrap();
    let lease = locks
        .try_acquire("x", Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert!(locks.release(&lease).await.unwrap());
    pool.close().await;
}
