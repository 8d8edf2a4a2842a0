//! SQL-ish text: lock tables, upserts, fenced writes, advisory locks, PL/pgSQL bodies, with
//! every quoting form (strings, `E''`, dollar quotes, quoted identifiers, comments) and deep
//! expressions.

use super::Gen;
use crate::rng::{Draw, Rng};

pub fn generate(rng: &mut Rng, max_len: usize) -> String {
    let mut g = Gen::new(rng, max_len);
    let n = g.rng.range(1, 8);
    for _ in 0..n {
        if g.full() {
            break;
        }
        statement(&mut g, 0);
        g.pick(&[";\n", ";", "\n;\n", " ; -- done\n"]);
    }
    g.out
}

fn table(g: &mut Gen) {
    g.pick(&[
        "locks",
        "job_locks",
        "scheduler_locks",
        "invoices",
        "public.leases",
        "\"Locks\"",
        "`mutex`",
        "t",
    ]);
}

fn column(g: &mut Gen) {
    g.pick(&[
        "name",
        "owner",
        "locked_by",
        "expires_at",
        "locked_until",
        "fence",
        "epoch",
        "amount",
        "id",
        "\"Owner\"",
        "t.owner",
        "excluded.owner",
    ]);
}

pub(crate) fn statement(g: &mut Gen, depth: usize) {
    match g.rng.below(14) {
        0 => {
            g.push("CREATE TABLE ");
            table(g);
            g.push(" (name text PRIMARY KEY, owner text NOT NULL, expires_at timestamptz, fence bigint DEFAULT 0, UNIQUE (owner, name))");
        }
        1 | 2 => {
            g.push("INSERT INTO ");
            table(g);
            g.push(" (name, owner, expires_at) VALUES (");
            value(g, depth + 1);
            g.push(", ");
            value(g, depth + 1);
            g.push(", ");
            value(g, depth + 1);
            g.push(")");
            match g.rng.below(4) {
                0 => g.push(" ON CONFLICT (name) DO NOTHING"),
                1 => {
                    g.push(" ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at WHERE ");
                    condition(g, depth + 1);
                }
                2 => g.push(" ON DUPLICATE KEY UPDATE owner = IF(expires_at < UTC_TIMESTAMP(6), VALUES(owner), owner)"),
                _ => {}
            }
            if g.rng.one_in(3) {
                g.push(" RETURNING fence");
            }
        }
        3 | 4 => {
            g.push("UPDATE ");
            table(g);
            g.push(" SET ");
            column(g);
            g.push(" = ");
            value(g, depth + 1);
            if g.rng.one_in(2) {
                g.push(", expires_at = ");
                value(g, depth + 1);
            }
            if !g.rng.one_in(5) {
                g.push(" WHERE ");
                condition(g, depth + 1);
            }
        }
        5 => {
            g.push("DELETE FROM ");
            table(g);
            g.push(" WHERE ");
            condition(g, depth + 1);
        }
        6 | 7 => {
            g.pick(&["SELECT ", "PERFORM ", "SELECT 1 WHERE "]);
            g.pick(&[
                "pg_advisory_lock(",
                "pg_try_advisory_lock(",
                "pg_advisory_unlock(",
                "pg_advisory_xact_lock(",
                "pg_advisory_lock_shared(",
                "pg_advisory_unlock_all(",
                "pg_try_advisory_xact_lock(",
            ]);
            if !g.out.ends_with("all(") {
                value(g, depth + 1);
                if g.rng.one_in(3) {
                    g.push(", ");
                    value(g, depth + 1);
                }
            }
            g.push(")");
        }
        8 if g.deeper(depth) => {
            g.pick(&[
                "DO $$ BEGIN ",
                "DO $body$ DECLARE x int; BEGIN ",
                "CREATE OR REPLACE FUNCTION f() RETURNS void AS $$ BEGIN ",
            ]);
            let tag = if g.out.ends_with("DECLARE x int; BEGIN ") {
                "$body$"
            } else {
                "$$"
            };
            for _ in 0..g.rng.range(1, 4) {
                if g.rng.one_in(2) {
                    g.push("IF ");
                    condition(g, depth + 1);
                    g.push(" THEN ");
                    statement(g, depth + 1);
                    g.push("; END IF; ");
                } else {
                    statement(g, depth + 1);
                    g.push("; ");
                }
            }
            g.push("END ");
            g.push(tag);
            if g.out.contains("FUNCTION") {
                g.push(" LANGUAGE plpgsql");
            }
        }
        9 if g.deeper(depth) => {
            g.push("WITH c AS (");
            statement(g, depth + 1);
            g.push(") UPDATE ");
            table(g);
            g.push(" SET fence = fence + 1 WHERE name = (SELECT name FROM c)");
        }
        10 => g.pick(&[
            "BEGIN",
            "COMMIT",
            "\\connect test",
            "COPY t FROM stdin;\n1\t2\n\\.",
            "SET lock_timeout = '1s'",
            "LOCK TABLE locks IN EXCLUSIVE MODE",
            "CREATE UNIQUE INDEX ON locks (name)",
            "ALTER TABLE locks ADD COLUMN fence bigint",
            "DELIMITER //",
            "GO",
            "-- name: take_lock",
            "/* /* nested */ comment */ SELECT 1",
        ]),
        _ => {
            g.push("SELECT ");
            value(g, depth + 1);
            g.push(" FROM ");
            table(g);
            if g.rng.one_in(2) {
                g.push(" WHERE ");
                condition(g, depth + 1);
            }
            if g.rng.one_in(3) {
                g.push(" FOR UPDATE SKIP LOCKED");
            }
        }
    }
}

fn condition(g: &mut Gen, depth: usize) {
    if !g.deeper(depth) {
        column(g);
        g.push(" = $1");
        return;
    }
    match g.rng.below(7) {
        0 | 1 => {
            condition(g, depth + 1);
            g.pick(&[" AND ", " OR ", " AND NOT "]);
            condition(g, depth + 1);
        }
        2 => {
            g.push("(");
            condition(g, depth + 1);
            g.push(")");
        }
        3 => {
            g.push("EXISTS (SELECT 1 FROM ");
            table(g);
            g.push(" WHERE ");
            condition(g, depth + 1);
            g.push(")");
        }
        _ => {
            value(g, depth + 1);
            g.pick(&[
                " = ",
                " < ",
                " <= ",
                " > ",
                " <> ",
                " != ",
                " IS NOT DISTINCT FROM ",
                " >= ",
            ]);
            value(g, depth + 1);
        }
    }
}

fn value(g: &mut Gen, depth: usize) {
    if !g.deeper(depth) {
        atom(g);
        return;
    }
    match g.rng.below(9) {
        0 | 1 => {
            value(g, depth + 1);
            g.pick(&[
                " + ",
                " - ",
                " || ",
                " * ",
                "::bigint + ",
                " + interval '1 second' * ",
            ]);
            value(g, depth + 1);
        }
        2 => {
            g.push("(");
            value(g, depth + 1);
            g.push(")");
        }
        3 => {
            g.pick(&[
                "coalesce(",
                "greatest(",
                "hashtext(",
                "now() + make_interval(secs => ",
                "lower(",
            ]);
            value(g, depth + 1);
            g.push(")");
        }
        4 => {
            g.push("CASE WHEN ");
            condition(g, depth + 1);
            g.push(" THEN ");
            value(g, depth + 1);
            g.push(" ELSE ");
            value(g, depth + 1);
            g.push(" END");
        }
        5 => {
            g.push("(SELECT ");
            value(g, depth + 1);
            g.push(" FROM ");
            table(g);
            g.push(")");
        }
        _ => atom(g),
    }
}

fn atom(g: &mut Gen) {
    match g.rng.below(6) {
        0 => g.pick(&["$1", "$2", "$3", "?", "?2", ":token", "$10"]),
        1 => g.pick(&[
            "'worker-1'",
            "'it''s'",
            "E'\\'; DROP'",
            "$q$ ; $q$",
            "''",
            "'é'",
            "U&'\\0041'",
            "B'101'",
        ]),
        2 => g.pick(&[
            "now()",
            "CURRENT_TIMESTAMP",
            "now() + interval '30 seconds'",
            "UTC_TIMESTAMP(6)",
            "datetime('now')",
            "clock_timestamp()",
        ]),
        3 => g.number(),
        _ => column(g),
    }
}
