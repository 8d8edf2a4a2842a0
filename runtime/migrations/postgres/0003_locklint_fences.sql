-- Fence counters: one strictly increasing number per name (see FenceCounter).
CREATE TABLE IF NOT EXISTS locklint_fences (
    name  TEXT   PRIMARY KEY,
    fence BIGINT NOT NULL
);
