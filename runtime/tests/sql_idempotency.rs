//! claim_once against PostgreSQL, MariaDB and SQLite.

mod support;

use locklint_runtime::idempotency::{claim_once, Claim, ClaimTable};
use support::sql::{mysql_with, pg_with, sqlite_with};

const CONTENDERS: usize = 16;

/// Counts the outcomes of `CONTENDERS` concurrent claims of one key.
fn assert_one_winner(results: Vec<Claim>) {
    let claimed = results.iter().filter(|c| **c == Claim::Claimed).count();
    assert_eq!(claimed, 1, "exactly one Claimed: {results:?}");
    assert_eq!(results.len(), CONTENDERS);
}

macro_rules! concurrent_claims {
    ($pool:expr) => {{
        let pool = $pool;
        ClaimTable::default().migrate(&pool).await.unwrap();
        ClaimTable::default().migrate(&pool).await.unwrap(); // idempotent
        let mut tasks = Vec::new();
        for _ in 0..CONTENDERS {
            let pool = pool.clone();
            tasks.push(tokio::spawn(async move {
                claim_once(&pool, "invoice:2026-11", "customer-42")
                    .await
                    .unwrap()
            }));
        }
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        assert_one_winner(results);
        // Other keys and scopes are independent.
        assert_eq!(
            claim_once(&pool, "invoice:2026-11", "customer-43")
                .await
                .unwrap(),
            Claim::Claimed
        );
        assert_eq!(
            claim_once(&pool, "invoice:2026-12", "customer-42")
                .await
                .unwrap(),
            Claim::Claimed
        );
        assert_eq!(
            claim_once(&pool, "invoice:2026-11", "customer-42")
                .await
                .unwrap(),
            Claim::AlreadyDone
        );
        // Unclaim makes the key claimable again, once.
        let table = ClaimTable::default();
        assert!(table
            .unclaim(&pool, "invoice:2026-11", "customer-42")
            .await
            .unwrap());
        assert!(!table
            .unclaim(&pool, "invoice:2026-11", "customer-42")
            .await
            .unwrap());
        assert_eq!(
            table
                .claim(&pool, "invoice:2026-11", "customer-42")
                .await
                .unwrap(),
            Claim::Claimed
        );

        // Inside a transaction: a rolled-back claim leaves nothing behind.
        let mut tx = pool.begin().await.unwrap();
        assert_eq!(
            claim_once(&mut *tx, "job", "rolled-back").await.unwrap(),
            Claim::Claimed
        );
        assert_eq!(
            claim_once(&mut *tx, "job", "rolled-back").await.unwrap(),
            Claim::AlreadyDone
        );
        tx.rollback().await.unwrap();
        let mut tx = pool.begin().await.unwrap();
        assert_eq!(
            claim_once(&mut *tx, "job", "rolled-back").await.unwrap(),
            Claim::Claimed
        );
        tx.commit().await.unwrap();
        assert_eq!(
            claim_once(&pool, "job", "rolled-back").await.unwrap(),
            Claim::AlreadyDone
        );

        // A custom table.
        let custom = ClaimTable::new("invoice_claims").unwrap();
        custom.migrate(&pool).await.unwrap();
        assert_eq!(custom.claim(&pool, "s", "k").await.unwrap(), Claim::Claimed);
        assert_eq!(
            custom.claim(&pool, "s", "k").await.unwrap(),
            Claim::AlreadyDone
        );
    }};
}

#[tokio::test]
async fn pg_concurrent_claims_have_exactly_one_winner() {
    let db = pg_with(CONTENDERS as u32).await;
    concurrent_claims!(db.pool.clone());
    db.cleanup().await;
}

#[tokio::test]
async fn mysql_concurrent_claims_have_exactly_one_winner() {
    let db = mysql_with(CONTENDERS as u32).await;
    concurrent_claims!(db.pool.clone());
    db.cleanup().await;
}

#[tokio::test]
async fn sqlite_concurrent_claims_have_exactly_one_winner() {
    let db = sqlite_with(8).await;
    concurrent_claims!(db.pool.clone());
}

#[tokio::test]
async fn pg_claim_waits_for_a_concurrent_uncommitted_claim() {
    let db = pg_with(4).await;
    ClaimTable::default().migrate(&db.pool).await.unwrap();
    let mut first = db.pool.begin().await.unwrap();
    assert_eq!(
        claim_once(&mut *first, "run", "1").await.unwrap(),
        Claim::Claimed
    );
    let pool = db.pool.clone();
    let second = tokio::spawn(async move { claim_once(&pool, "run", "1").await.unwrap() });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        !second.is_finished(),
        "the second claim waits for the first transaction"
    );
    first.rollback().await.unwrap();
    assert_eq!(
        second.await.unwrap(),
        Claim::Claimed,
        "first rolled back: second wins"
    );
    db.cleanup().await;
}

#[test]
fn claim_table_names_are_validated() {
    assert!(ClaimTable::new("x y").is_err());
    assert!(ClaimTable::new("app.claims").is_ok());
}
