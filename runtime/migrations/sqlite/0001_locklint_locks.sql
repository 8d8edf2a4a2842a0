-- Lock table: one row per lock name. Rows are never deleted, so the fence keeps growing
-- across acquisitions; a released or expired row is taken over by the next acquirer.
-- expires_at is milliseconds since the Unix epoch, computed from julianday('now').
CREATE TABLE IF NOT EXISTS locklint_locks (
    name       TEXT    NOT NULL PRIMARY KEY,
    owner      TEXT    NOT NULL,
    fence      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
