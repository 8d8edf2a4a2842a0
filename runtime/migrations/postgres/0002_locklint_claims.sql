-- Idempotency claims: the primary key makes the second claim of (scope, key) a no-op.
CREATE TABLE IF NOT EXISTS locklint_claims (
    scope      TEXT        NOT NULL,
    claim_key  TEXT        NOT NULL,
    claimed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, claim_key)
);
