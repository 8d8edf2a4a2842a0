//! The monthly invoicing job, done right.
//!
//! The buggy original took a lock, read "customers without an invoice for this period" and
//! inserted invoices; two workers whose locks overlapped (lock expired during a GC pause,
//! lock taken on one pooled connection and released on another, ...) billed customers twice.
//!
//! Here:
//! * an **advisory lock** keeps a second worker from doing the same scan at the same time
//!   (efficiency only: nothing breaks if it fails),
//! * `invoices` has a **unique key `(period, customer_id)`** and inserts use
//!   `ON CONFLICT DO NOTHING`, so no interleaving can bill a customer twice (correctness),
//! * the e-mail for each invoice is queued with **`claim_once`** in the same transaction as
//!   the invoice, so it is queued exactly once,
//! * the job's state row is updated with a **fenced write**: a worker that lost the lock
//!   while paused cannot overwrite the state written by its successor.
//!
//! Run against PostgreSQL (uses its own schema `invoicing_example`, recreated each run):
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run -p locklint-runtime --example invoicing
//! ```

use std::time::Duration;

use locklint_runtime::advisory::AdvisoryLock;
use locklint_runtime::fence::{FenceCounter, FenceError, FencedTable, FencedWrite};
use locklint_runtime::idempotency::{claim_once, Claim, ClaimTable};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};

const SCHEMA: &str = "invoicing_example";
const CUSTOMERS: i64 = 25;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let base: PgConnectOptions = url.parse::<PgConnectOptions>()?.disable_statement_logging();
    {
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(base.clone())
            .await?;
        sqlx::raw_sql(&format!(
            "DROP SCHEMA IF EXISTS {SCHEMA} CASCADE; CREATE SCHEMA {SCHEMA};"
        ))
        .execute(&admin)
        .await?;
        admin.close().await;
    }
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(base.options([("search_path", SCHEMA)]))
        .await?;
    migrate(&pool).await?;

    let period = "2026-11";
    // Two workers start at the same time (e.g. two replicas of the cron job), and a third
    // run happens later (a retry after a timeout). Customers are billed once.
    let (a, b) = tokio::join!(
        run_invoicing(&pool, period, "worker-a"),
        run_invoicing(&pool, period, "worker-b")
    );
    println!("worker-a: {}", a?);
    println!("worker-b: {}", b?);
    println!("retry:    {}", run_invoicing(&pool, period, "retry").await?);

    let invoices: i64 = sqlx::query_scalar("SELECT count(*) FROM invoices WHERE period = $1")
        .bind(period)
        .fetch_one(&pool)
        .await?;
    let emails: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(&pool)
        .await?;
    let (status, fence): (String, i64) =
        sqlx::query_as("SELECT status, fence FROM invoice_runs WHERE period = $1")
            .bind(period)
            .fetch_one(&pool)
            .await?;
    println!(
        "{CUSTOMERS} customers -> {invoices} invoices, {emails} e-mails queued; \
         run state {status:?} at fence {fence}"
    );
    assert_eq!(invoices, CUSTOMERS, "every customer billed exactly once");
    assert_eq!(emails, CUSTOMERS, "every e-mail queued exactly once");

    // A worker that drew its fence earlier (and was paused) cannot overwrite the state.
    match set_run_state(&pool, period, locklint_runtime::FencingToken(1), "stale").await {
        Err(FenceError::StaleFence { presented, current }) => {
            println!("stale worker with fence {presented} rejected (row is at {current:?})")
        }
        other => return Err(format!("expected a stale-fence rejection, got {other:?}").into()),
    }
    pool.close().await;
    Ok(())
}

async fn migrate(pool: &PgPool) -> Result<(), BoxError> {
    sqlx::raw_sql(&format!(
        "CREATE TABLE customers (id BIGINT PRIMARY KEY, name TEXT NOT NULL);
         INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, {CUSTOMERS}) g;
         CREATE TABLE invoices (
             period      TEXT   NOT NULL,
             customer_id BIGINT NOT NULL REFERENCES customers (id),
             amount      BIGINT NOT NULL,
             UNIQUE (period, customer_id)
         );
         CREATE TABLE outbox (customer_id BIGINT NOT NULL, body TEXT NOT NULL);
         CREATE TABLE invoice_runs (period TEXT PRIMARY KEY, status TEXT NOT NULL);"
    ))
    .execute(pool)
    .await?;
    FencedTable::with_columns("invoice_runs", "period", "fence")?
        .add_fence_column(pool)
        .await?;
    ClaimTable::default().migrate(pool).await?;
    FenceCounter::default().migrate(pool).await?;
    Ok(())
}

/// One run of the job; returns a summary line.
async fn run_invoicing(pool: &PgPool, period: &str, worker: &str) -> Result<String, BoxError> {
    let lock_name = format!("invoicing:{period}");
    // Efficiency: if another worker is running this period right now, let it.
    let Some(guard) = AdvisoryLock::try_lock(pool, lock_name.as_str()).await? else {
        return Ok(format!(
            "{worker} skipped: another worker holds {lock_name}"
        ));
    };
    // A fence for this run, drawn while holding the lock: later runs draw larger ones.
    let fence = FenceCounter::default().next(pool, &lock_name).await?;
    sqlx::query(
        "INSERT INTO invoice_runs (period, status) VALUES ($1, 'new') ON CONFLICT DO NOTHING",
    )
    .bind(period)
    .execute(pool)
    .await?;
    set_run_state(pool, period, fence, "running").await?;

    let customers: Vec<i64> = sqlx::query_scalar(
        "SELECT c.id FROM customers c WHERE NOT EXISTS \
         (SELECT 1 FROM invoices i WHERE i.period = $1 AND i.customer_id = c.id) ORDER BY c.id",
    )
    .bind(period)
    .fetch_all(pool)
    .await?;
    let mut created = 0;
    for customer in customers {
        // Simulate work so that overlapping runs would interleave.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let mut tx = pool.begin().await?;
        // Correctness: the unique key makes the insert idempotent.
        let inserted = sqlx::query(
            "INSERT INTO invoices (period, customer_id, amount) VALUES ($1, $2, $3) \
             ON CONFLICT (period, customer_id) DO NOTHING",
        )
        .bind(period)
        .bind(customer)
        .bind(1000 + customer)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        // A side effect queued exactly once, atomically with the invoice.
        if claim_once(
            &mut *tx,
            &format!("invoice-email:{period}"),
            &customer.to_string(),
        )
        .await?
            == Claim::Claimed
        {
            sqlx::query("INSERT INTO outbox (customer_id, body) VALUES ($1, $2)")
                .bind(customer)
                .bind(format!("Your invoice for {period}"))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        created += inserted;
    }

    set_run_state(pool, period, fence, "done").await?;
    guard.unlock().await?;
    Ok(format!(
        "{worker} (fence {fence}) created {created} invoices"
    ))
}

/// Fenced update of the run's state row.
async fn set_run_state(
    pool: &PgPool,
    period: &str,
    fence: locklint_runtime::FencingToken,
    status: &str,
) -> Result<u64, FenceError> {
    let runs =
        FencedTable::with_columns("invoice_runs", "period", "fence").expect("valid identifiers");
    // Same-token updates are allowed (`<=`), older tokens are rejected.
    FencedWrite::new(
        "UPDATE invoice_runs SET status = $3, fence = $1 WHERE period = $2 AND fence <= $1",
        fence,
    )
    .bind(period)
    .bind(status)
    .current_fence_from(&runs, period)
    .execute(pool)
    .await
}
