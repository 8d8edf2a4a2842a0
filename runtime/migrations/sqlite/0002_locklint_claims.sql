-- Idempotency claims: the primary key makes the second claim of (scope, key) a no-op.
CREATE TABLE IF NOT EXISTS locklint_claims (
    scope      TEXT    NOT NULL,
    claim_key  TEXT    NOT NULL,
    claimed_at INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    PRIMARY KEY (scope, claim_key)
);
