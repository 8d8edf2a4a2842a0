//! The SQL front-end: statements from `.sql` files and from SQL embedded in Rust.
//!
//! Each SQL text is split into statements by [`lex::split`] (quotes, dollar quotes and
//! comments respected); each statement is parsed on its own with `sqlparser` (PostgreSQL
//! first, then MySQL and SQLite), so one malformed statement is reported and skipped while the
//! rest is still analysed. The bodies of PL/pgSQL functions and `DO` blocks are split and
//! analysed too. What rules need is kept as plain facts in [`Statement`](locklint_ir::sql::Statement); the project-wide
//! `locks::schema::Schema` collects tables from `CREATE TABLE`, `ALTER TABLE ... ADD COLUMN` and unique
//! indexes.

pub mod lex;
mod rewrite;
mod same_row;
pub mod statements;

use locklint_ir::source::Span;
use locklint_ir::sql::SqlText;
use locklint_ir::Origin;
use locklint_ir::{FileIr, Language, Limit, ParseProblem};

/// Parse the SQL texts of a file (`ir.embedded` with [`locklint_ir::Language::Sql`]).
pub fn analyze(ir: &mut FileIr) {
    let mut statements = Vec::new();
    let mut problems = Vec::new();
    let mut crash = Vec::new();
    let mut exposed = Vec::new();
    let mut texts = vec![SqlText::default(); ir.embedded.len()];
    for (idx, e) in ir.embedded.iter_mut().enumerate() {
        if e.language != Language::Sql {
            continue;
        }
        let first = statements.len();
        if e.is_orm() {
            // an ORM call chain: its statement was read from the Rust code, there is no text
            if let Some(mut st) = e.statement.take() {
                st.embedded = idx;
                statements.push(*st);
            }
            texts[idx].statements = first..statements.len();
            continue;
        }
        let e = &*e;
        let whole_file = e.origin == Origin::File;
        // psql scripts: meta-commands and `COPY ... FROM stdin` data are not SQL
        let text = if whole_file {
            mask_schema_variables(&mask_psql(&e.text))
        } else {
            e.text.clone()
        };
        // tool placeholders (`${schema}`, `{{table}}`), MySQL `DELIMITER` blocks and T-SQL
        // batches (`GO`) are not parseable as plain SQL: analyse what parses, report nothing else
        let templated = text.contains("${")
            || text.contains("{{")
            || text.lines().any(|l| {
                let t = l.trim();
                t.get(..10)
                    .is_some_and(|w| w.eq_ignore_ascii_case("delimiter "))
                    || t.eq_ignore_ascii_case("go")
            });
        let report = e.origin.is_certainly_sql() && !templated;
        let mut params = Vec::new();
        let mut cx = statements::Context {
            text: &text,
            map: &e.map,
            embedded: idx,
            statements: &mut statements,
            problems: &mut problems,
            params: &mut params,
            report,
            body_depth: 0,
            body: None,
            handler: false,
            routine: None,
            branches: Vec::new(),
            exposed: &mut exposed,
            bind_literals: e.exec.as_ref().map_or(&[], |x| x.bind_literals.as_slice()),
        };
        if let Err(message) =
            locklint_ir::isolate::catch(|| cx.text_statements(0, text.len(), false))
        {
            let what = if whole_file {
                "this SQL text"
            } else {
                "this embedded SQL text"
            };
            let at = e.span.start;
            let end = ir.file.text[at..]
                .chars()
                .next()
                .map_or(at, |c| at + c.len_utf8());
            crash.push(locklint_ir::isolate::problem(
                what,
                &message,
                Span::new(at, end),
            ));
        }
        texts[idx] = SqlText {
            statements: first..statements.len(),
            params,
            dollar_quoted: e.text.contains("$$"),
        };
    }
    ir.sql.statements = statements;
    ir.sql.texts = texts;
    exposed.sort();
    exposed.dedup();
    ir.sql.exposed = exposed;
    ir.problems.extend(crash);
    ir.problems.extend(reported(problems));
}

/// The most statements of one file reported as not parsed; past them, one more problem says
/// how many others there are.
pub const MAX_REPORTED_STATEMENTS: usize = 100;

/// The statements of a file that were not parsed, as its parse problems: the first
/// [`MAX_REPORTED_STATEMENTS`], then one at the next saying how many more there are (a text
/// that is not SQL at all would otherwise be a finding per `;`).
fn reported(mut problems: Vec<(Span, String)>) -> Vec<ParseProblem> {
    const HELP: &str = "fix the statement; the rest of the SQL text was still analysed";
    let more = problems.len().saturating_sub(MAX_REPORTED_STATEMENTS + 1);
    let rest = (more > 0).then(|| problems[MAX_REPORTED_STATEMENTS].0);
    if more > 0 {
        problems.truncate(MAX_REPORTED_STATEMENTS);
    }
    let mut out: Vec<ParseProblem> = problems
        .into_iter()
        .map(|(span, message)| ParseProblem {
            limit: Limit::None,
            message,
            span,
            help: HELP.to_string(),
        })
        .collect();
    if let Some(span) = rest {
        out.push(ParseProblem {
            limit: Limit::None,
            message: format!(
                "this and {} more SQL statements of the file could not be parsed (the first {MAX_REPORTED_STATEMENTS} are reported one by one)",
                more
            ),
            span,
            help: "fix the statements, or exclude the file if it is not SQL; the rest of the SQL text was still analysed".to_string(),
        });
    }
    out
}

/// Turn a schema given by a variable into a plain identifier of the same length, so the
/// statement parses and keeps every offset: psql's `:SCHEMA.jobs` becomes `_SCHEMA.jobs`, a
/// format placeholder `{schema}.job` becomes `_schema_.job`. Only a variable directly followed
/// by `.` is touched (a bind parameter `:id` or a cast `x::int` is not).
pub fn mask_schema_variables(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let open = b[i];
        let before_ok = i == 0 || !(ident(b[i - 1]) || matches!(b[i - 1], b':' | b'$' | b'{'));
        if before_ok && (open == b':' || open == b'{') {
            let start = i + 1;
            let mut end = start;
            while end < b.len() && ident(b[end]) {
                end += 1;
            }
            let named = end > start && !b[start].is_ascii_digit();
            let close = if open == b'{' {
                (b.get(end) == Some(&b'}')).then_some(end + 1)
            } else {
                Some(end)
            };
            if let (true, Some(after)) = (named, close) {
                if b.get(after) == Some(&b'.') {
                    out[i] = b'_';
                    if open == b'{' {
                        out[end] = b'_';
                    }
                    i = after;
                    continue;
                }
            }
        }
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// Blank out (keeping every offset) what a psql script holds besides SQL: meta-command lines
/// (`\connect db`) and the data of `COPY ... FROM stdin;` up to its `\.` line.
pub fn mask_psql(text: &str) -> String {
    let mut out = text.as_bytes().to_vec();
    let mut in_copy = false;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        let blank = if in_copy {
            if t == "\\." {
                in_copy = false;
            }
            true
        } else if t.starts_with('\\') {
            true
        } else {
            let upper = t.to_ascii_uppercase();
            if upper.starts_with("COPY ") && upper.ends_with("FROM STDIN;") {
                in_copy = true;
            }
            false
        };
        if blank {
            for b in &mut out[at..at + line.len()] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
        }
        at += line.len();
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use locklint_ir::source::SourceFile;

    #[test]
    fn schema_variables_become_names_of_the_same_length() {
        let src = "select * from :APP.jobs where id = :id and x::int = 1 and y = {schema}.f(1)";
        let masked = mask_schema_variables(src);
        assert_eq!(masked.len(), src.len());
        assert_eq!(
            masked,
            "select * from _APP.jobs where id = :id and x::int = 1 and y = _schema_.f(1)"
        );
        // not a variable: `${x}` templates, casts, numbers, a bare `:name`
        for s in ["${schema}.t", "a::b.c", ":1.5", "where a = :b", "{x} .t"] {
            assert_eq!(mask_schema_variables(s), s);
        }
    }

    #[test]
    fn past_a_hundred_unparsed_statements_one_problem_counts_the_rest() {
        let problems = |n: usize| {
            let text: String = (0..n).map(|i| format!("SELEC {i};\n")).collect();
            let ir = crate::analyze(0, SourceFile::new("q.sql".into(), text.clone()));
            (text, ir.problems)
        };
        // up to one more than the limit: every statement on its own
        for n in [1, MAX_REPORTED_STATEMENTS, MAX_REPORTED_STATEMENTS + 1] {
            let (_, p) = problems(n);
            assert_eq!(p.len(), n);
            assert!(p.iter().all(|p| !p.message.contains("more SQL statements")));
        }
        let (text, p) = problems(250);
        assert_eq!(p.len(), MAX_REPORTED_STATEMENTS + 1);
        let last = &p[MAX_REPORTED_STATEMENTS];
        assert!(
            last.message.starts_with("this and 149 more SQL statements"),
            "{}",
            last.message
        );
        // at the first statement not reported on its own
        assert_eq!(&text[last.span.start..last.span.end], "SELEC");
        let line = text[..last.span.start].matches('\n').count();
        assert_eq!(line, MAX_REPORTED_STATEMENTS);
    }

    /// The parameter a condition added to the first statement of `sql` would take.
    fn next(sql: &str) -> String {
        let file = SourceFile::new("q.sql".into(), sql.to_string());
        let ir = crate::analyze(0, file);
        ir.sql.statements[0].placeholders.next()
    }

    #[test]
    fn the_next_placeholder_ignores_quotes_and_comments() {
        assert_eq!(next("UPDATE t SET a = $1 WHERE id = $2"), "$3");
        assert_eq!(next("UPDATE t SET a = 1"), "$1");
        assert_eq!(next("UPDATE t SET a = ? WHERE id = ?"), "?");
        assert_eq!(next("UPDATE t SET a = 'why?' WHERE id = 7"), "$1");
        assert_eq!(next("UPDATE t SET a = '$9' WHERE id = $1 -- $5"), "$2");
        assert_eq!(next("UPDATE t SET a = $$ $4 $$ WHERE id = $1"), "$2");
    }

    #[test]
    fn each_statement_counts_its_own_parameters() {
        let file = SourceFile::new(
            "q.sql".into(),
            "UPDATE t SET a = $1 WHERE id = $2;\nDELETE FROM t WHERE id = $1;".to_string(),
        );
        let ir = crate::analyze(0, file);
        let next: Vec<String> = ir
            .sql
            .statements
            .iter()
            .map(|s| s.placeholders.next())
            .collect();
        assert_eq!(next, ["$3", "$2"]);
    }

    fn statements(sql: &str) -> Vec<locklint_ir::sql::Statement> {
        let ir = crate::analyze(0, SourceFile::new("q.sql".into(), sql.to_string()));
        assert!(ir.problems.is_empty(), "{:?}", ir.problems);
        ir.sql.statements
    }

    #[test]
    fn the_writes_of_with_queries_are_statements_of_their_own() {
        use locklint_ir::sql::StatementKind;
        let sql = "WITH gone AS (DELETE FROM jobs WHERE id = $1 RETURNING id, payload)\n\
                   INSERT INTO failed_jobs (id, payload) SELECT id, payload FROM gone";
        let st = statements(sql);
        let kinds: Vec<_> = st.iter().map(|s| (s.kind, s.table.clone())).collect();
        assert_eq!(
            kinds,
            [
                (StatementKind::Insert, Some("failed_jobs".to_string())),
                (StatementKind::Delete, Some("jobs".to_string())),
            ]
        );
        // at its own place: the `DELETE` of the `WITH` query
        assert_eq!(
            &sql[st[1].start..st[1].end],
            "DELETE FROM jobs WHERE id = $1 RETURNING id, payload"
        );
        // a write that reads another `WITH` query is analysed with it in scope: the rows it
        // picked bring its conditions and its row lock
        let st = statements(
            "WITH picked AS (SELECT id FROM jobs WHERE state = 'ready' FOR UPDATE SKIP LOCKED), \
             taken AS (UPDATE jobs SET state = 'running' FROM picked WHERE jobs.id = picked.id RETURNING jobs.id) \
             SELECT id FROM taken",
        );
        let kinds: Vec<_> = st.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [StatementKind::Select, StatementKind::Update]);
        let taken = &st[1];
        let compared: Vec<&str> = taken
            .filter
            .iter()
            .flat_map(|f| &f.comparisons)
            .flat_map(|c| c.left.columns.iter().chain(&c.right.columns))
            .map(|c| c.name.as_str())
            .collect();
        assert!(compared.contains(&"state"), "{compared:?}");
        assert_eq!(
            taken.row_lock.as_ref().map(|r| r.tables.clone()),
            Some(vec!["jobs".to_string()])
        );
    }

    #[test]
    fn weaker_row_locks_are_read_as_row_locks() {
        let st = statements(
            "UPDATE jobs SET state = 'running', locked_by = $1 WHERE id IN (\n\
               SELECT id FROM jobs WHERE state = 'ready' ORDER BY run_at FOR NO KEY UPDATE SKIP LOCKED LIMIT $2)",
        );
        assert_eq!(st.len(), 1);
        let st = statements("SELECT id FROM jobs WHERE id = $1 FOR KEY SHARE");
        assert_eq!(
            st[0].row_lock.as_ref().map(|r| r.tables.clone()),
            Some(vec!["jobs".to_string()])
        );
    }

    #[test]
    fn returning_into_a_variable_is_read_as_the_write() {
        use locklint_ir::sql::StatementKind;
        let st = statements(
            "CREATE FUNCTION done(p_id BIGINT) RETURNS VOID AS $$\n\
             DECLARE v_lane TEXT;\n\
             BEGIN\n\
               DELETE FROM batches WHERE id = p_id RETURNING lane INTO v_lane;\n\
               UPDATE batches SET tries = tries + 1 WHERE id = p_id RETURNING * INTO STRICT v_row;\n\
             END;\n\
             $$ LANGUAGE plpgsql;",
        );
        let writes: Vec<_> = st
            .iter()
            .filter(|s| s.is_write())
            .map(|s| (s.kind, s.table.clone()))
            .collect();
        assert_eq!(
            writes,
            vec![
                (StatementKind::Delete, Some("batches".to_string())),
                (StatementKind::Update, Some("batches".to_string()))
            ]
        );
    }

    #[test]
    fn a_locking_query_records_its_joined_tables_and_passed_times() {
        let st = statements(
            "SELECT lanes.lane, batches.id FROM batches JOIN lanes USING (lane)\n\
             WHERE (leased_at IS NULL OR leased_at < now() - interval '1 hour') AND tries < 5\n\
             LIMIT 1 FOR UPDATE OF lanes SKIP LOCKED",
        );
        let rl = st[0].row_lock.as_ref().unwrap();
        assert_eq!(rl.tables, vec!["lanes".to_string()]);
        assert_eq!(rl.joined, vec!["batches".to_string(), "lanes".to_string()]);
        assert_eq!(rl.passed, vec!["leased_at".to_string()]);
        // one table: nothing joined; a time in the future is not passed
        let st = statements("SELECT id FROM jobs WHERE lease_until > now() FOR UPDATE SKIP LOCKED");
        let rl = st[0].row_lock.as_ref().unwrap();
        assert!(rl.joined.is_empty() && rl.passed.is_empty(), "{rl:?}");
    }

    #[test]
    fn named_arguments_are_no_columns() {
        let st = statements(
            "UPDATE jobs SET locked_by = NULL WHERE locked_at < now() - make_interval(secs => $1)",
        );
        let f = st[0].filter.as_ref().unwrap();
        let right = &f.comparisons[0].right;
        assert!(right.columns.is_empty(), "{:?}", right.columns);
        assert!(right.clock && right.param);
    }

    #[test]
    fn a_subquery_in_from_that_picks_the_row_guards_it() {
        let st = statements(
            "UPDATE image_jobs SET claimed_by = $1, hold_until = now() + interval '30 seconds' \
             FROM (SELECT id FROM image_jobs WHERE hold_until IS NULL OR hold_until < now() LIMIT $2) AS job \
             WHERE image_jobs.id = job.id",
        );
        let f = st[0].filter.as_ref().unwrap();
        assert!(f.comparisons.iter().any(|c| c
            .left
            .bare
            .as_ref()
            .is_some_and(|b| b.name == "hold_until")
            && c.right.clock));
        // joined on another column: not the row it picked
        let st = statements(
            "UPDATE image_jobs SET claimed_by = $1 \
             FROM (SELECT id FROM image_jobs WHERE hold_until < now()) AS job \
             WHERE image_jobs.parent = job.id",
        );
        let f = st[0].filter.as_ref().unwrap();
        assert_eq!(f.comparisons.len(), 1);
    }

    #[test]
    fn a_merge_is_read_as_an_upsert() {
        use locklint_ir::sql::{Conflict, StatementKind};
        let st = statements(
            "MERGE INTO job_locks AS l USING (VALUES ($1, $2)) AS s (name, owner) ON l.name = s.name \
             WHEN MATCHED AND l.expires_at < now() THEN UPDATE SET owner = s.owner, expires_at = now() + interval '1 minute' \
             WHEN NOT MATCHED THEN INSERT (name, owner, expires_at) VALUES (s.name, s.owner, now())",
        );
        let m = &st[0];
        assert!(m.merge);
        assert_eq!(
            (m.kind, m.conflict),
            (StatementKind::Insert, Conflict::DoUpdate)
        );
        assert_eq!(m.table.as_deref(), Some("job_locks"));
        let owner = m.assignments.iter().find(|a| a.column == "owner").unwrap();
        // the source's column is the proposed row, like `EXCLUDED.owner`
        assert!(owner.value.bare.as_ref().is_some_and(|c| c.incoming));
        assert_eq!(m.values.len(), 3);
        let f = m.filter.as_ref().unwrap();
        assert!(f.comparisons.iter().any(|c| c.right.clock));
        // insert-only: does nothing to an existing row
        let st = statements(
            "MERGE INTO job_locks l USING (VALUES ($1)) s (name) ON l.name = s.name \
             WHEN NOT MATCHED THEN INSERT (name, owner, expires_at) VALUES (s.name, '', now())",
        );
        assert_eq!(st[0].conflict, Conflict::Ignore);
    }

    #[test]
    fn conditions_of_plpgsql_branches_are_reads_of_the_body() {
        use locklint_ir::sql::StatementKind;
        let st = statements(
            "CREATE FUNCTION f(p TEXT) RETURNS BOOLEAN AS $$\n\
             BEGIN\n\
               IF EXISTS (SELECT 1 FROM gate_locks WHERE gate_id = p AND open_until > now()) THEN\n\
                 RETURN FALSE;\n\
               END IF;\n\
               SELECT open_until, holder INTO v FROM gate_locks WHERE gate_id = p FOR UPDATE;\n\
               UPDATE gate_locks SET open_until = now() WHERE gate_id = p;\n\
               RETURN TRUE;\n\
             END $$ LANGUAGE plpgsql",
        );
        let kinds: Vec<_> = st.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [
                StatementKind::Select,
                StatementKind::Select,
                StatementKind::Update
            ]
        );
        assert_eq!(st[0].reads.as_deref(), Some("gate_locks"));
        assert!(st[0]
            .read_filter
            .as_ref()
            .is_some_and(|f| f.columns.iter().any(|c| c.name == "open_until")));
        assert!(st[0].row_lock.is_none());
        assert_eq!(st[1].selected, ["open_until", "holder"]);
        assert!(st[1].row_lock.is_some());
        assert!(st.iter().all(|s| s.body.is_some()));
    }

    #[test]
    fn table_locks_that_serialise_their_callers() {
        use locklint_ir::sql::StatementKind;
        let tables = |sql: &str| -> Option<Vec<String>> {
            let st = statements(sql);
            st.iter()
                .find(|s| s.kind == StatementKind::LockTable)
                .and_then(|s| s.row_lock.as_ref().map(|r| r.tables.clone()))
        };
        assert_eq!(tables("LOCK TABLE locks"), Some(vec!["locks".to_string()]));
        assert_eq!(
            tables("LOCK TABLE ONLY app.locks, leases IN EXCLUSIVE MODE NOWAIT"),
            Some(vec!["locks".to_string(), "leases".to_string()])
        );
        assert_eq!(
            tables("LOCK locks IN ACCESS EXCLUSIVE MODE"),
            Some(vec!["locks".to_string()])
        );
        assert_eq!(
            tables("LOCK TABLES locks WRITE"),
            Some(vec!["locks".to_string()])
        );
        // modes that let two callers in at once
        assert_eq!(tables("LOCK TABLE locks IN ROW EXCLUSIVE MODE"), None);
        assert_eq!(tables("LOCK TABLE locks IN SHARE MODE"), None);
        assert_eq!(tables("LOCK TABLES locks READ"), None);
    }
}
