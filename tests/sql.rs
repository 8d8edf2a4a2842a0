//! The SQL front-end end to end: statement-level recovery from malformed SQL, exact spans in
//! SQL embedded in Rust, PL/pgSQL bodies, and the project-wide schema.

use locklint::diagnostic::Diagnostic;
use locklint::engine::{self, Options};
use locklint::frontend;
use locklint::ir::FileIr;
use locklint::source::SourceFile;

fn analyse(files: &[(&str, &str)]) -> Vec<Diagnostic> {
    let irs: Vec<FileIr> = files
        .iter()
        .enumerate()
        .map(|(i, (path, text))| {
            frontend::analyze(i, SourceFile::new((*path).into(), (*text).to_string()))
        })
        .collect();
    engine::findings(&irs, &Options::default())
}

fn at(d: &Diagnostic) -> (&'static str, usize, usize) {
    let s = d.primary.start();
    (d.rule, s.line, s.column)
}

#[test]
fn a_defect_after_a_malformed_statement_is_still_found() {
    let sql = "CREATE TABLE job_locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);\n\
               UPDATE job_locks SET owner = $1 expires_at = now() WHERE name = $2;\n\
               SELECT 'a;b' FROM (SELECT 1) x;\n\
               DELETE FROM job_locks WHERE name = $1;\n";
    let found: Vec<_> = analyse(&[("locks.sql", sql)]).iter().map(at).collect();
    assert_eq!(
        found,
        vec![("parse-error", 2, 33), ("lock-table-no-owner-check", 4, 23)]
    );
}

#[test]
fn the_fixture_with_malformed_sql_still_analyses_the_rest() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/parse-error/bad_sql_missing_comma.sql"
    ))
    .unwrap();
    // the same file with the good statement turned into a defect
    let broken = text.replace("AND owner = $2", "");
    let found: Vec<_> = analyse(&[("m.sql", &broken)])
        .iter()
        .map(|d| d.rule)
        .collect();
    assert_eq!(found, vec!["parse-error", "lock-table-no-owner-check"]);
}

#[test]
fn parse_errors_only_for_text_that_is_certainly_sql() {
    let src = r#"
async fn run(pool: &sqlx::PgPool, client: &tokio_postgres::Client) -> anyhow::Result<()> {
    sqlx::query("UPDATE jobs SET state = 'done' WHERE id = $1 AND (").execute(pool).await?;
    client.execute("SELECT broken(", &[]).await?;
    Ok(())
}
"#;
    let found: Vec<_> = analyse(&[("run.rs", src)]).iter().map(at).collect();
    assert_eq!(found, vec![("parse-error", 3, 67)]);
}

#[test]
fn spans_in_rust_literals_point_at_the_sql() {
    let src = "async fn release(pool: &sqlx::PgPool, name: &str) -> sqlx::Result<()> {\n    \
               sqlx::query(\"DELETE FROM job_locks \\\n                 WHERE name = $1\")\n        \
               .bind(name)\n        .execute(pool)\n        .await?;\n    \
               sqlx::query(r#\"UPDATE job_locks SET expires_at = now() + interval '1 minute'\n        WHERE name = $1\"#)\n        \
               .bind(name).execute(pool).await?;\n    Ok(())\n}\n";
    let findings = analyse(&[("release.rs", src)]);
    // each statement where it starts in its literal, its `WHERE` (past a `\` continuation and
    // a raw string's line break) as the related location
    let found: Vec<_> = findings.iter().map(at).collect();
    assert_eq!(
        found,
        vec![
            ("lock-table-no-owner-check", 2, 18),
            ("lock-table-no-owner-check", 7, 20)
        ]
    );
    let filters: Vec<_> = findings
        .iter()
        .flat_map(|d| &d.related)
        .map(|r| {
            let s = r.location.start();
            (s.line, s.column)
        })
        .collect();
    assert_eq!(filters, vec![(3, 18), (8, 9)]);
}

#[test]
fn statements_inside_plpgsql_bodies_are_analysed() {
    let sql = "CREATE FUNCTION release_lock(n text) RETURNS void LANGUAGE plpgsql AS $fn$\n\
               DECLARE\n  done boolean;\n\
               BEGIN\n  IF n IS NOT NULL THEN\n    DELETE FROM job_locks WHERE name = n;\n  END IF;\n\
               END;\n$fn$;\n";
    let found: Vec<_> = analyse(&[("f.sql", sql)]).iter().map(at).collect();
    assert_eq!(found, vec![("lock-table-no-owner-check", 6, 27)]);
}

#[test]
fn the_schema_of_one_file_applies_to_sql_in_another() {
    let schema = "CREATE TABLE payouts (id BIGINT PRIMARY KEY, amount BIGINT NOT NULL);\n\
                  ALTER TABLE payouts ADD COLUMN fencing_token BIGINT NOT NULL DEFAULT 0;\n";
    let code = "async fn pay(pool: &sqlx::PgPool) -> sqlx::Result<()> {\n    \
                sqlx::query(\"UPDATE payouts SET amount = 0 WHERE id = $1\").execute(pool).await?;\n    \
                sqlx::query(\"UPDATE payouts SET amount = 0 WHERE id = $1 AND fencing_token < $2\").execute(pool).await?;\n    \
                Ok(())\n}\n";
    let found: Vec<_> = analyse(&[("schema.sql", schema), ("pay.rs", code)])
        .iter()
        .map(at)
        .collect();
    assert_eq!(found, vec![("unfenced-write", 2, 48)]);
}

#[test]
fn the_runtime_crate_is_clean() {
    let report = engine::run(&Options {
        paths: vec![
            concat!(env!("CARGO_MANIFEST_DIR"), "/runtime/src").into(),
            concat!(env!("CARGO_MANIFEST_DIR"), "/runtime/migrations").into(),
            concat!(env!("CARGO_MANIFEST_DIR"), "/runtime/examples").into(),
        ],
        ..Default::default()
    });
    let found: Vec<_> = report.findings.iter().map(at).collect();
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn fence_counters_idempotent_writes_and_released_locks_are_fine() {
    let sql = "CREATE TABLE fences (name TEXT PRIMARY KEY, fence BIGINT NOT NULL);\n\
               INSERT INTO fences AS c (name, fence) VALUES ($1, 1) ON CONFLICT (name) DO UPDATE SET fence = c.fence + 1 RETURNING fence;\n";
    let code = r#"
async fn run(conn: &mut sqlx::PgConnection) -> sqlx::Result<()> {
    let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(1)").fetch_one(&mut *conn).await?;
    if !got {
        return Ok(());
    }
    sqlx::query("INSERT IGNORE INTO claims (k) VALUES (?)").execute(&mut *conn).await?;
    sqlx::query("SELECT pg_advisory_unlock(1)").execute(&mut *conn).await?;
    sqlx::query("UPDATE stats SET runs = runs + 1 WHERE id = 1").execute(&mut *conn).await?;
    Ok(())
}
"#;
    let found: Vec<_> = analyse(&[("fences.sql", sql), ("run.rs", code)])
        .iter()
        .map(at)
        .collect();
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn writes_in_a_cte_statement_are_analysed() {
    let sql = "CREATE TABLE job_locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);\n\
               WITH gone AS (SELECT 1) DELETE FROM job_locks WHERE name = $1;\n";
    let found: Vec<_> = analyse(&[("m.sql", sql)]).iter().map(at).collect();
    assert_eq!(found, vec![("lock-table-no-owner-check", 2, 47)]);
}

#[test]
fn a_write_after_a_lock_table_acquire_is_reported() {
    let code = r#"
async fn run(pool: &sqlx::PgPool, me: &str) -> sqlx::Result<()> {
    let got = sqlx::query("INSERT INTO job_locks AS l (name, owner, expires_at) VALUES ('x', $1, now() + interval '1 minute') ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at WHERE l.expires_at < now()")
        .bind(me).execute(pool).await?;
    if got.rows_affected() == 1 {
        sqlx::query("UPDATE reports SET body = $1 WHERE id = 1").bind(me).execute(pool).await?;
        sqlx::query("DELETE FROM job_locks WHERE name = 'x' AND owner = $1").bind(me).execute(pool).await?;
        sqlx::query("UPDATE reports SET body = '' WHERE id = 2").execute(pool).await?;
    }
    Ok(())
}
"#;
    let found = analyse(&[("run.rs", code)]);
    let at_: Vec<_> = found.iter().map(at).collect();
    assert_eq!(at_, vec![("unfenced-write", 6, 22)]);
    assert_eq!(found[0].severity, locklint::diagnostic::Severity::Warning);
    assert_eq!(found[0].related[0].location.start().line, 3);
}

#[test]
fn psql_dumps_and_templated_migrations_are_not_parse_errors() {
    let dump = "\\connect app\n\
                COPY public.jobs (id, note) FROM stdin;\n\
                1\tfirst; not sql\n\
                2\tsecond\n\
                \\.\n\
                DELETE FROM job_locks WHERE name = 'x';\n";
    let found: Vec<_> = analyse(&[("dump.sql", dump)]).iter().map(at).collect();
    assert_eq!(found, vec![("lock-table-no-owner-check", 6, 23)]);
    let flyway = "CREATE TABLE ${schema}.jobs (id BIGINT PRIMARY KEY);\n";
    assert!(analyse(&[("V1__jobs.sql", flyway)]).is_empty());
}

#[test]
fn a_fetched_try_lock_whose_result_is_never_read_is_reported() {
    let src = r#"use sqlx::PgConnection;
async fn job(conn: &mut PgConnection) -> sqlx::Result<()> {
    let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(42)").fetch_one(&mut *conn).await?;
    rebuild().await;
    sqlx::query("SELECT pg_advisory_unlock(42)").execute(&mut *conn).await?;
    Ok(())
}
async fn checked(conn: &mut PgConnection) -> sqlx::Result<()> {
    let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(43)").fetch_one(&mut *conn).await?;
    if !got {
        return Ok(());
    }
    rebuild().await;
    sqlx::query("SELECT pg_advisory_unlock(43)").execute(&mut *conn).await?;
    Ok(())
}
async fn rebuild() {}
"#;
    let found: Vec<_> = analyse(&[("job.rs", src)]).iter().map(at).collect();
    assert_eq!(found, vec![("advisory-lock-unbalanced", 3, 48)]);
}

#[test]
fn a_transaction_lock_outside_a_transaction_protects_nothing_after_it() {
    let src = r#"use sqlx::PgConnection;
async fn setup(conn: &mut PgConnection) -> sqlx::Result<()> {
    conn.execute("select pg_advisory_xact_lock(42); create table if not exists t (id bigint primary key);").await?;
    sqlx::query("insert into t (id) values ($1)").bind(1).execute(&mut *conn).await?;
    Ok(())
}
"#;
    assert!(analyse(&[("setup.rs", src)]).is_empty());
}

#[test]
fn t_sql_batches_are_not_reported_as_parse_errors() {
    let sql = "IF OBJECT_ID('dbo.t') IS NOT NULL BEGIN DROP TABLE dbo.t END\nGO\nCREATE TABLE t (id INT)\nGO\n";
    let found: Vec<_> = analyse(&[("setup.sql", sql)]).iter().map(at).collect();
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn sql_given_to_a_projects_database_wrapper_is_read() {
    let claim = r#"
pub async fn take(db: &Db, me: &str) -> Result<()> {
    utils::database::query("UPDATE tasks SET claimed_by = $1, hold_until = now() + interval '30 seconds' WHERE id = $2 AND (hold_until IS NULL OR hold_until < now())")
        .bind(me).build().execute(db).await?;
    Ok(())
}
"#;
    let done = r#"
pub async fn finish(db: &Db, id: i64) -> Result<()> {
    utils::database::query("DELETE FROM tasks WHERE id = $1").bind(id).build().execute(db).await?;
    // not SQL: a search through the same module
    utils::database::query("open tasks").run().await?;
    Ok(())
}
"#;
    let schema = "CREATE TABLE tasks (id BIGINT PRIMARY KEY, body TEXT NOT NULL, claimed_by TEXT, hold_until TIMESTAMPTZ);";
    let found: Vec<_> = analyse(&[("a.rs", claim), ("b.rs", done), ("m.sql", schema)])
        .iter()
        .map(|d| (d.rule, d.primary.start().line))
        .collect();
    assert_eq!(found, vec![("unfenced-write", 3)]);
}

#[test]
fn functions_handed_to_other_roles_are_exposed() {
    let sql = "CREATE FUNCTION app.take(k bigint) RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER AS $$\n\
               BEGIN RETURN pg_try_advisory_lock(k); END; $$;\n\
               CREATE FUNCTION app.give(k bigint) RETURNS boolean LANGUAGE plpgsql AS $$\n\
               BEGIN RETURN pg_advisory_unlock(k); END; $$;\n\
               CREATE FUNCTION inner_helper(k bigint) RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $$\n\
               BEGIN PERFORM pg_advisory_lock(k); END; $$;\n\
               GRANT EXECUTE ON FUNCTION app.give(bigint), \"Other\"(text, int) TO web_user;\n\
               GRANT SELECT ON jobs TO web_user;\n";
    let ir = frontend::analyze(0, SourceFile::new("api.sql".into(), sql.to_string()));
    assert_eq!(ir.sql.exposed, vec!["give", "other", "take"]);
}

#[test]
fn an_unlock_before_an_early_return_is_on_that_way_out_only() {
    let sql = "CREATE FUNCTION f(k bigint) RETURNS int AS $$\n\
               BEGIN\n\
               PERFORM pg_advisory_lock(k);\n\
               IF k = 0 THEN PERFORM pg_advisory_unlock(k); RETURN 0; END IF;\n\
               IF k = 1 THEN PERFORM pg_advisory_unlock(k); ELSE PERFORM pg_advisory_unlock(k); END IF;\n\
               LOOP PERFORM pg_advisory_unlock(k); RETURN 2; END LOOP;\n\
               END; $$ LANGUAGE plpgsql;\n";
    let ir = frontend::analyze(0, SourceFile::new("f.sql".into(), sql.to_string()));
    let unlocks: Vec<bool> = ir
        .sql
        .statements
        .iter()
        .filter(|st| st.advisory.iter().any(|a| a.unlock))
        .map(|st| st.exit_path)
        .collect();
    assert_eq!(unlocks, vec![true, false, false, true]);
    // and the rule follows: the early unlock does not cover the error past the branch
    let raise = sql.replace(
        "RETURN 2; END LOOP;",
        "RETURN 2; END LOOP;\nRAISE EXCEPTION 'x';",
    );
    let late = raise.replace(
        "IF k = 1 THEN PERFORM pg_advisory_unlock(k); ELSE PERFORM pg_advisory_unlock(k); END IF;\n",
        "",
    );
    let found: Vec<_> = analyse(&[("f.sql", &late)]).iter().map(at).collect();
    assert_eq!(found, vec![("advisory-lock-unbalanced", 3, 9)]);
    let found: Vec<_> = analyse(&[("f.sql", &raise)]).iter().map(at).collect();
    assert_eq!(found, vec![]);
}

#[test]
fn a_write_in_a_with_query_takes_the_conditions_of_the_query_that_picked_its_rows() {
    let sql = "WITH live AS (\n\
                 SELECT t.id FROM tasks t JOIN unnest($1::bigint[]) AS want(id) ON want.id = t.id\n\
                 WHERE t.lease_until > now()\n\
               ), done AS (\n\
                 UPDATE tasks t SET worker = NULL, lease_until = NULL FROM live WHERE t.id = live.id RETURNING t.id\n\
               ), other AS (\n\
                 UPDATE tasks t SET worker = NULL FROM live JOIN audits a ON a.id = live.id WHERE t.id = live.id RETURNING t.id\n\
               )\n\
               SELECT count(*) FROM done;\n";
    let ir = frontend::analyze(0, SourceFile::new("q.sql".into(), sql.to_string()));
    let writes: Vec<_> = ir
        .sql
        .statements
        .iter()
        .filter(|st| st.kind == locklint::ir::sql::StatementKind::Update)
        .collect();
    assert_eq!(writes.len(), 2);
    let compared = |st: &locklint::ir::sql::Statement| -> Vec<String> {
        st.filter
            .iter()
            .flat_map(|f| &f.comparisons)
            .flat_map(|c| c.left.columns.iter().chain(&c.right.columns))
            .filter(|c| st.is_target(c))
            .map(|c| c.name.clone())
            .collect()
    };
    // the picking query's `lease_until > now()` is the first write's, on its own table
    assert!(compared(writes[0]).contains(&"lease_until".to_string()));
    // a `FROM` that joins the picked rows to another table is not followed
    assert!(!compared(writes[1]).contains(&"lease_until".to_string()));
}
