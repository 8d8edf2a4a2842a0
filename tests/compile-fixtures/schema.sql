-- The tables the fixtures' `sqlx::query!` calls are checked against.
-- scripts/sqlx-prepare-fixtures.sh compiles the fixtures against a schema built from this file
-- and stores the query data in .sqlx/; tests/sqlx_data.rs checks that data against it again.

CREATE TABLE job_checkpoints (
    job_id      bigint PRIMARY KEY,
    state       text   NOT NULL,
    fence_token bigint NOT NULL
);

CREATE TABLE job_locks (
    name       text PRIMARY KEY,
    owner      text NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE TABLE worker_leases (
    worker      text PRIMARY KEY,
    lease_until timestamptz NOT NULL
);
