//! SQL a local holds from `format!` and run by sqlx, and the constants its parameters are
//! bound to.

use locklint_ir::source::SourceFile;
use locklint_ir::Origin;

fn analyze(text: &str) -> locklint_ir::FileIr {
    locklint_frontend::analyze(0, SourceFile::new("m.rs".into(), text.to_string()))
}

const RUNNER: &str = r#"
enum State { Waiting, Running }
async fn sweep(pool: &sqlx::PgPool, minutes: i64) {
    let sql = format!("UPDATE q SET state = $1 WHERE state = $2 AND at <= NOW() - INTERVAL '{minutes} minutes'");
    sqlx::query(&sql).bind(State::Waiting.to_string()).bind(&State::Running).execute(pool).await;
}
"#;

#[test]
fn a_formatted_local_run_by_sqlx_is_read_with_its_holes() {
    let ir = analyze(RUNNER);
    let e = ir
        .embedded
        .iter()
        .find(|e| e.origin == Origin::Formatted)
        .expect("the format! literal is embedded");
    assert!(e.text.contains("'{minutes} minutes'"), "{}", e.text);
    let exec = e.exec.as_ref().expect("run by the sqlx chain");
    assert_eq!(exec.bind_keys.len(), 2, "its binds are read");
    assert_eq!(
        exec.bind_literals,
        vec![Some("waiting".to_string()), Some("running".to_string())]
    );
    let st = ir.sql.statements.first().expect("the statement parses");
    let set = &st.assignments[0];
    assert_eq!(set.value.named_literal.as_deref(), Some("waiting"));
    let required = st
        .filter
        .as_ref()
        .unwrap()
        .comparisons
        .iter()
        .find_map(|c| c.right.named_literal.clone());
    assert_eq!(
        required.as_deref(),
        Some("running"),
        "`$2` names the bound state"
    );
}

#[test]
fn a_local_grown_after_it_is_built_is_not_read() {
    let ir = analyze(
        r#"
async fn f(pool: &sqlx::PgPool) {
    let mut sql = format!("SELECT id FROM q WHERE state = 'waiting'");
    sql.push_str(" FOR UPDATE SKIP LOCKED");
    sqlx::query(&sql).execute(pool).await;
}
"#,
    );
    assert!(
        ir.embedded.iter().all(|e| e.origin != Origin::Formatted),
        "the literal is only the start of the text the code runs"
    );
}

#[test]
fn a_formatted_text_that_does_not_parse_is_not_reported() {
    let ir = analyze(
        r#"
async fn f(pool: &sqlx::PgPool, table: &str) {
    let sql = format!("DELETE FROM {table} WHERE id = $1");
    sqlx::query(&sql).bind(1).execute(pool).await;
}
"#,
    );
    assert!(ir.embedded.iter().any(|e| e.origin == Origin::Formatted));
    assert!(ir.problems.is_empty(), "{:?}", ir.problems);
}

#[test]
fn parameters_bound_to_other_values_name_nothing() {
    let ir = analyze(
        r#"
async fn f(pool: &sqlx::PgPool, s: &str) {
    sqlx::query("UPDATE q SET state = $1, note = $2 WHERE id = $3")
        .bind(s)
        .bind("")
        .bind(7)
        .execute(pool)
        .await;
}
"#,
    );
    let exec = ir.embedded[0].exec.as_ref().unwrap();
    assert_eq!(exec.bind_literals, vec![None, None, None]);
}
