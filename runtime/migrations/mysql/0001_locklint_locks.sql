-- Lock table: one row per lock name. Rows are never deleted, so the fence keeps growing
-- across acquisitions; a released or expired row is taken over by the next acquirer.
-- Times are UTC_TIMESTAMP(6) values, independent of the session time zone.
CREATE TABLE IF NOT EXISTS locklint_locks (
    name       VARCHAR(255) NOT NULL PRIMARY KEY,
    owner      VARCHAR(64)  NOT NULL,
    fence      BIGINT       NOT NULL,
    expires_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB;
