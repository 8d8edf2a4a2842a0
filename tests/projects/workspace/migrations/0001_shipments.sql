-- Shipments carry a fencing column: every write under a lock must compare it.
CREATE TABLE shipments (
    id     BIGINT PRIMARY KEY,
    status TEXT NOT NULL,
    fence  BIGINT NOT NULL DEFAULT 0
);
