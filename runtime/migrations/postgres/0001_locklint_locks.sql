-- Lock table: one row per lock name. Rows are never deleted, so the fence keeps growing
-- across acquisitions; a released or expired row is taken over by the next acquirer.
CREATE TABLE IF NOT EXISTS locklint_locks (
    name       TEXT        PRIMARY KEY,
    owner      TEXT        NOT NULL,
    fence      BIGINT      NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
