-- Idempotency claims: the primary key makes the second claim of (scope, key) a no-op.
CREATE TABLE IF NOT EXISTS locklint_claims (
    scope      VARCHAR(255) NOT NULL,
    claim_key  VARCHAR(255) NOT NULL,
    claimed_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (scope, claim_key)
) ENGINE = InnoDB;
