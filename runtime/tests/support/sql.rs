//! SQL servers for tests.
//!
//! * PostgreSQL at `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`),
//! * MariaDB/MySQL at `MYSQL_URL` (default `mysql://root@127.0.0.1:3306/test`),
//! * SQLite in a temporary file.
//!
//! When a server is not reachable, a throwaway one is started from the binaries on `PATH`
//! (PostgreSQL also from `/usr/lib/postgresql/<version>/bin`) on a free port in a temporary
//! directory; a watchdog shell stops it and removes the directory when the test process
//! exits. When that is impossible the test panics naming the Debian package to install.
//! Every test gets its own PostgreSQL schema / MariaDB database / SQLite file.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Connection, MySqlConnection, MySqlPool, PgConnection, PgPool, SqlitePool};
use tokio::sync::OnceCell;

const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// A lowercase name unique to this process and call: `<prefix>_<pid>_<n>_<random>`.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let r = getrandom::u32().expect("getrandom") % 1_000_000;
    format!("{prefix}_{}_{n}_{r}", std::process::id())
}

/// Awaits a pool's `close()`, which waits for every checked-out connection to be returned:
/// a test that still holds one (a guard, a transaction) would otherwise hang forever.
async fn close_or_panic(close: impl std::future::Future<Output = ()>) {
    if tokio::time::timeout(Duration::from_secs(20), close)
        .await
        .is_err()
    {
        panic!("pool did not close within 20 s: a connection is still checked out");
    }
}

// ---------------------------------------------------------------- PostgreSQL

/// A PostgreSQL schema private to one test; `pool` has it as `search_path`.
pub struct PgDb {
    /// Pool whose connections use the private schema.
    pub pool: PgPool,
    /// The schema name.
    pub schema: String,
    /// Connect options for extra standalone connections (also on the private schema).
    pub options: PgConnectOptions,
}

impl PgDb {
    /// A standalone connection on the private schema.
    pub async fn connect(&self) -> PgConnection {
        PgConnection::connect_with(&self.options)
            .await
            .expect("connect to PostgreSQL")
    }

    /// Closes the pool and drops the schema. Panics instead of hanging if a connection is
    /// still checked out of the pool (closing waits for every connection to come back).
    pub async fn cleanup(self) {
        close_or_panic(self.pool.close()).await;
        let mut admin = PgConnection::connect_with(&pg_base_options().await)
            .await
            .expect("connect to PostgreSQL");
        let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema))
            .execute(&mut admin)
            .await;
    }
}

/// A fresh schema on the test PostgreSQL server with a pool of up to `max` connections.
pub async fn pg_with(max: u32) -> PgDb {
    let base = pg_base_options().await;
    let schema = unique("ll");
    let mut admin = PgConnection::connect_with(&base)
        .await
        .expect("connect to PostgreSQL");
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin)
        .await
        .expect("create schema");
    admin.close().await.ok();
    let options = base.options([("search_path", schema.as_str())]);
    let pool = PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options.clone())
        .await
        .expect("PostgreSQL pool");
    PgDb {
        pool,
        schema,
        options,
    }
}

/// A fresh schema with a pool of up to 10 connections.
pub async fn pg() -> PgDb {
    pg_with(10).await
}

/// The connect options of the test PostgreSQL server (reachable `DATABASE_URL`, or a
/// throwaway server).
pub async fn pg_base_options() -> PgConnectOptions {
    static URL: OnceCell<String> = OnceCell::const_new();
    let url = URL
        .get_or_init(|| async {
            let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_PG_URL.to_owned());
            match try_pg(&url).await {
                Ok(()) => url,
                Err(first) => match start_postgres().await {
                    Ok(url) => url,
                    Err(why) => panic!(
                        "PostgreSQL is not reachable at {url} ({first}) and no throwaway server \
                         could be started: {why}. Install the Debian package `postgresql` \
                         (apt-get install postgresql, or run scripts/ensure-services.sh) or \
                         set DATABASE_URL."
                    ),
                },
            }
        })
        .await;
    PgConnectOptions::from_str(url).expect("valid PostgreSQL URL")
}

async fn try_pg(url: &str) -> Result<(), String> {
    let opts = PgConnectOptions::from_str(url).map_err(|e| e.to_string())?;
    match tokio::time::timeout(Duration::from_secs(5), PgConnection::connect_with(&opts)).await {
        Ok(Ok(c)) => {
            c.close().await.ok();
            Ok(())
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("connect timed out".into()),
    }
}

fn find_binary(name: &str, extra_dirs: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra_dirs.iter().cloned())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn debian_pg_dirs() -> Vec<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .collect();
    versions.sort_by_key(|v| std::cmp::Reverse(v.0));
    versions.into_iter().map(|(_, p)| p).collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// Starts `server` (a shell command line) under a watchdog that stops it (SIGINT, then
/// SIGKILL) and removes `dir` once this test process has exited.
fn spawn_with_watchdog(server: &str, dir: &Path) -> Result<(), String> {
    let script = format!(
        "{server} >{log} 2>&1 & srv=$!\n\
         while kill -0 {parent} 2>/dev/null && kill -0 $srv 2>/dev/null; do sleep 0.5; done\n\
         kill -INT $srv 2>/dev/null; i=0\n\
         while kill -0 $srv 2>/dev/null && [ $i -lt 20 ]; do sleep 0.5; i=$((i+1)); done\n\
         kill -KILL $srv 2>/dev/null; wait $srv 2>/dev/null; rm -rf {dir}\n",
        log = sh_quote(&dir.join("server.log")),
        parent = std::process::id(),
        dir = sh_quote(dir),
    );
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(|_| ())
        .map_err(|e| format!("cannot spawn sh: {e}"))
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Starts a throwaway PostgreSQL server (see the module docs) and returns its URL.
pub async fn start_postgres() -> Result<String, String> {
    let dirs = debian_pg_dirs();
    let initdb = find_binary("initdb", &dirs).ok_or("`initdb` not found")?;
    let postgres = find_binary("postgres", &dirs).ok_or("`postgres` not found")?;
    let dir = tempfile::Builder::new()
        .prefix("locklint-pg-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    // PostgreSQL refuses to run as root: run it as the `postgres` (or `nobody`) user.
    let run_as = if is_root() {
        let user = if run(Command::new("id").arg("postgres")).is_ok() {
            "postgres"
        } else {
            "nobody"
        };
        run(Command::new("chown").arg("-R").arg(user).arg(&dir))?;
        Some(user)
    } else {
        None
    };
    let as_user = |bin: &Path| match run_as {
        Some(user) => format!(
            "setpriv --reuid={user} --regid={user} --init-groups {}",
            sh_quote(bin)
        ),
        None => sh_quote(bin),
    };
    let data = dir.join("data");
    run(Command::new("sh").arg("-c").arg(format!(
        "{} -D {} -U postgres -A trust -E UTF8 --no-sync",
        as_user(&initdb),
        sh_quote(&data)
    )))?;
    let port = free_port();
    spawn_with_watchdog(
        &format!(
            "{} -D {} -k {} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off",
            as_user(&postgres),
            sh_quote(&data),
            sh_quote(&dir)
        ),
        &dir,
    )?;
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    for _ in 0..120 {
        if try_pg(&url).await.is_ok() {
            eprintln!("started throwaway PostgreSQL at {url} in {}", dir.display());
            return Ok(url);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    Err(format!("throwaway PostgreSQL did not come up: {log}"))
}

// ---------------------------------------------------------------- MariaDB / MySQL

/// A MariaDB database private to one test.
pub struct MyDb {
    /// Pool connected to the private database.
    pub pool: MySqlPool,
    /// The database name.
    pub database: String,
}

impl MyDb {
    /// Closes the pool and drops the database. Panics instead of hanging if a connection is
    /// still checked out of the pool.
    pub async fn cleanup(self) {
        close_or_panic(self.pool.close()).await;
        let mut admin = MySqlConnection::connect_with(&mysql_base_options().await)
            .await
            .expect("connect to MariaDB");
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {}", self.database))
            .execute(&mut admin)
            .await;
    }
}

/// A fresh database on the test MariaDB server with a pool of up to `max` connections.
pub async fn mysql_with(max: u32) -> MyDb {
    let base = mysql_base_options().await;
    let database = unique("ll");
    let mut admin = MySqlConnection::connect_with(&base)
        .await
        .expect("connect to MariaDB");
    sqlx::query(&format!("CREATE DATABASE {database}"))
        .execute(&mut admin)
        .await
        .expect("create database");
    admin.close().await.ok();
    let pool = MySqlPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(base.database(&database))
        .await
        .expect("MariaDB pool");
    MyDb { pool, database }
}

/// A fresh database with a pool of up to 10 connections.
pub async fn mysql() -> MyDb {
    mysql_with(10).await
}

/// The connect options of the test MariaDB server (reachable `MYSQL_URL`, or a throwaway
/// server).
pub async fn mysql_base_options() -> MySqlConnectOptions {
    static URL: OnceCell<String> = OnceCell::const_new();
    let url = URL
        .get_or_init(|| async {
            let url = std::env::var("MYSQL_URL").unwrap_or_else(|_| DEFAULT_MYSQL_URL.to_owned());
            match try_mysql(&url).await {
                Ok(()) => url,
                Err(first) => match start_mariadb().await {
                    Ok(url) => url,
                    Err(why) => panic!(
                        "MariaDB/MySQL is not reachable at {url} ({first}) and no throwaway \
                         server could be started: {why}. Install the Debian package \
                         `mariadb-server` (apt-get install mariadb-server, or run \
                         scripts/ensure-services.sh) or set MYSQL_URL."
                    ),
                },
            }
        })
        .await;
    MySqlConnectOptions::from_str(url).expect("valid MySQL URL")
}

async fn try_mysql(url: &str) -> Result<(), String> {
    let opts = MySqlConnectOptions::from_str(url).map_err(|e| e.to_string())?;
    match tokio::time::timeout(Duration::from_secs(5), MySqlConnection::connect_with(&opts)).await {
        Ok(Ok(c)) => {
            c.close().await.ok();
            Ok(())
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("connect timed out".into()),
    }
}

/// Starts a throwaway MariaDB server (see the module docs) and returns its URL.
pub async fn start_mariadb() -> Result<String, String> {
    let sbin = [PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")];
    let install = find_binary("mariadb-install-db", &sbin)
        .or_else(|| find_binary("mysql_install_db", &sbin))
        .ok_or("`mariadb-install-db` not found")?;
    let server = find_binary("mariadbd", &sbin)
        .or_else(|| find_binary("mysqld", &sbin))
        .ok_or("`mariadbd` not found")?;
    let dir = tempfile::Builder::new()
        .prefix("locklint-mariadb-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    let data = dir.join("data");
    let user = if is_root() { " --user=root" } else { "" };
    run(Command::new("sh").arg("-c").arg(format!(
        "{} --no-defaults --datadir={} --auth-root-authentication-method=normal \
         --skip-test-db{user}",
        sh_quote(&install),
        sh_quote(&data)
    )))?;
    let port = free_port();
    spawn_with_watchdog(
        &format!(
            "{} --no-defaults --datadir={} --port={port} --socket={} --pid-file={} \
             --bind-address=127.0.0.1 --innodb-flush-log-at-trx-commit=0{user}",
            sh_quote(&server),
            sh_quote(&data),
            sh_quote(&dir.join("mysqld.sock")),
            sh_quote(&dir.join("mysqld.pid")),
        ),
        &dir,
    )?;
    let url = format!("mysql://root@127.0.0.1:{port}/mysql");
    for _ in 0..120 {
        if try_mysql(&url).await.is_ok() {
            eprintln!("started throwaway MariaDB at {url} in {}", dir.display());
            return Ok(url);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    Err(format!("throwaway MariaDB did not come up: {log}"))
}

// ---------------------------------------------------------------- SQLite

/// A SQLite database in a temporary file, deleted on drop.
pub struct LiteDb {
    /// Pool on the file (WAL mode, 30 s busy timeout).
    pub pool: SqlitePool,
    _dir: tempfile::TempDir,
}

/// A fresh SQLite database file with a pool of up to `max` connections.
pub async fn sqlite_with(max: u32) -> LiteDb {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join("test.db"))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(Duration::from_secs(30));
    let pool = SqlitePoolOptions::new()
        .max_connections(max)
        .connect_with(options)
        .await
        .expect("SQLite pool");
    LiteDb { pool, _dir: dir }
}

/// A fresh SQLite database with a pool of up to 4 connections.
pub async fn sqlite() -> LiteDb {
    sqlite_with(4).await
}
