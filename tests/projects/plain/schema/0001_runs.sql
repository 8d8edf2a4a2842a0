CREATE TABLE invoice_runs (
    period TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    epoch  BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE job_locks (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
