//! The SQL front-end: statements from `.sql` files and from SQL embedded in Rust.
//!
//! Each SQL text is split into statements by [`lex::split`] (quotes, dollar quotes and
//! comments respected); each statement is parsed on its own with `sqlparser` (PostgreSQL
//! first, then MySQL and SQLite), so one malformed statement is reported and skipped while the
//! rest is still analysed. The bodies of PL/pgSQL functions and `DO` blocks are split and
//! analysed too. What rules need is kept as plain facts in [`Statement`]; the project-wide
//! [`Schema`] collects tables from `CREATE TABLE`, `ALTER TABLE ... ADD COLUMN` and unique
//! indexes.

pub mod facts;
pub mod lex;
pub mod schema;

pub use schema::{schema, Schema, Table};

use crate::ir::{FileIr, Language, ParseProblem};
use crate::source::Span;

/// What the SQL front-end extracted from one file.
#[derive(Debug, Default)]
pub struct SqlIr {
    /// Every statement of every SQL text of the file, in text order.
    pub statements: Vec<Statement>,
    /// Per embedded text (by index in [`FileIr::embedded`]): the range of its statements in
    /// [`SqlIr::statements`], and its top-level PostgreSQL parameters.
    texts: Vec<SqlText>,
}

#[derive(Debug, Default, Clone)]
struct SqlText {
    statements: std::ops::Range<usize>,
    params: Vec<Param>,
    /// The text holds `$$` (a dollar-quoted body, or one in a string).
    dollar_quoted: bool,
}

/// A PostgreSQL parameter `$n` outside quotes, comments and dollar-quoted bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// Byte range in the embedded text.
    pub start: usize,
    pub end: usize,
    pub n: usize,
}

impl SqlIr {
    /// The statements of one embedded text.
    pub fn of(&self, embedded: usize) -> &[Statement] {
        self.texts
            .get(embedded)
            .and_then(|t| self.statements.get(t.statements.clone()))
            .unwrap_or(&[])
    }

    /// The `$n` parameters of one embedded text, in text order.
    pub fn params(&self, embedded: usize) -> &[Param] {
        self.texts
            .get(embedded)
            .map(|t| t.params.as_slice())
            .unwrap_or(&[])
    }

    /// Whether an embedded text holds `$$`.
    pub fn dollar_quoted(&self, embedded: usize) -> bool {
        self.texts.get(embedded).is_some_and(|t| t.dollar_quoted)
    }
}

/// What a statement does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Select,
    Insert,
    Update,
    Delete,
    /// PL/pgSQL `PERFORM`.
    Perform,
    /// `CREATE TABLE`, `ALTER TABLE`, `CREATE INDEX` ...
    Ddl,
    Other,
}

/// What an `INSERT` does when the row exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    None,
    /// `ON CONFLICT DO NOTHING`, `INSERT IGNORE`, `INSERT OR IGNORE`.
    Ignore,
    /// `ON CONFLICT ... DO UPDATE`.
    DoUpdate,
    /// `ON DUPLICATE KEY UPDATE`.
    DuplicateKey,
    /// `REPLACE INTO`, `INSERT OR REPLACE`.
    Replace,
}

/// A column reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Col {
    /// Table or alias it is qualified with (lower case).
    pub qualifier: Option<String>,
    pub name: String,
    /// The proposed row's value: `EXCLUDED.x`, `VALUES(x)`.
    pub incoming: bool,
}

/// Facts about an expression.
#[derive(Debug, Clone, Default)]
pub struct Value {
    pub columns: Vec<Col>,
    /// Contains a bind parameter (`$1`, `?`, `:name`).
    pub param: bool,
    /// Contains the database clock (`now()`, `CURRENT_TIMESTAMP`, `UTC_TIMESTAMP()` ...).
    pub clock: bool,
    /// Contains a function call or subquery.
    pub call: bool,
    /// The expression is just this column (possibly cast or parenthesised).
    pub bare: Option<Col>,
    /// The expression is just a bind parameter (possibly cast).
    pub bare_param: bool,
    /// Where the expression is, when known.
    pub span: Option<Span>,
}

impl Value {
    /// A constant: no columns, parameters or calls.
    pub fn is_constant(&self) -> bool {
        self.columns.is_empty() && !self.param && !self.call && !self.clock
    }
}

/// A comparison in a `WHERE` clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

impl CmpOp {
    /// The same comparison with its operands swapped.
    pub fn flip(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::LtEq => CmpOp::GtEq,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::GtEq => CmpOp::LtEq,
            o => o,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Cmp {
    pub op: CmpOp,
    pub left: Value,
    pub right: Value,
}

/// A `WHERE` clause (of an `UPDATE`/`DELETE`, or of `ON CONFLICT ... DO UPDATE`), or the
/// assignments of `ON DUPLICATE KEY UPDATE`, which act as its condition.
#[derive(Debug, Clone)]
pub struct Filter {
    /// From the `WHERE` keyword to the end of the condition.
    pub span: Span,
    /// Every column referenced.
    pub columns: Vec<Col>,
    pub comparisons: Vec<Cmp>,
}

/// `column = value` in `SET`, `DO UPDATE SET` or `ON DUPLICATE KEY UPDATE`, or a column and
/// its value in `INSERT ... VALUES`.
#[derive(Debug, Clone)]
pub struct Assign {
    pub column: String,
    pub value: Value,
}

/// A call of a PostgreSQL advisory lock function.
#[derive(Debug, Clone)]
pub struct Advisory {
    /// Function name, lower case (`pg_try_advisory_lock`).
    pub name: String,
    pub unlock: bool,
    /// `pg_try_*`.
    pub try_lock: bool,
    /// Session level (not `_xact_`).
    pub session: bool,
    pub shared: bool,
    /// `pg_advisory_unlock_all`.
    pub all: bool,
    /// The arguments' text, whitespace removed.
    pub args: String,
    /// The call, name to closing parenthesis.
    pub span: Span,
    /// The statement is nothing but this call (`SELECT pg_try_advisory_lock(1)`,
    /// `PERFORM pg_try_advisory_lock(1)`): its result reaches no condition in SQL.
    pub bare: bool,
}

impl Advisory {
    pub fn is_session_lock(&self) -> bool {
        self.session && !self.unlock
    }
}

/// A table definition or extension found in a statement.
#[derive(Debug, Clone, Default)]
pub struct TableDef {
    pub table: String,
    pub columns: Vec<String>,
    /// Primary keys and unique constraints or indexes.
    pub unique: Vec<Vec<String>>,
}

/// One SQL statement and what rules need to know about it.
#[derive(Debug, Clone)]
pub struct Statement {
    /// Index into [`FileIr::embedded`].
    pub embedded: usize,
    /// Byte range in the embedded text.
    pub start: usize,
    pub end: usize,
    /// The whole statement in the file.
    pub span: Span,
    /// Inside a PL/pgSQL function body or `DO` block.
    pub in_body: bool,
    pub kind: Kind,
    /// The table written, lower case, unqualified.
    pub table: Option<String>,
    /// The table read by a plain `SELECT ... FROM t` (one table, no join), lower case,
    /// unqualified.
    pub reads: Option<String>,
    /// Names that refer to the target table in expressions (its name and alias).
    pub names: Vec<String>,
    /// `SET` assignments (`UPDATE`) and `DO UPDATE SET` / `ON DUPLICATE KEY UPDATE` ones.
    pub assignments: Vec<Assign>,
    /// `INSERT` columns with the value of the first row.
    pub values: Vec<Assign>,
    pub conflict: Conflict,
    /// The `DO UPDATE SET ...` or `ON DUPLICATE KEY UPDATE ...` part.
    pub upsert_span: Option<Span>,
    /// The `WHERE` of an `UPDATE`/`DELETE`, or of the `DO UPDATE`.
    pub filter: Option<Filter>,
    pub advisory: Vec<Advisory>,
    pub table_def: Option<TableDef>,
}

impl Statement {
    pub fn is_write(&self) -> bool {
        matches!(self.kind, Kind::Insert | Kind::Update | Kind::Delete)
    }

    /// Whether `c` refers to a column of the target table (not the proposed row).
    pub fn is_target(&self, c: &Col) -> bool {
        !c.incoming
            && match &c.qualifier {
                None => true,
                Some(q) => self.names.iter().any(|n| n == q),
            }
    }

    /// Columns this statement writes or inserts.
    pub fn written(&self) -> impl Iterator<Item = &str> {
        self.assignments
            .iter()
            .chain(&self.values)
            .map(|a| a.column.as_str())
    }

    /// Every column name the statement mentions for its target (written or filtered on).
    pub fn mentioned(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.written().collect();
        if let Some(f) = &self.filter {
            v.extend(
                f.columns
                    .iter()
                    .filter(|c| self.is_target(c))
                    .map(|c| c.name.as_str()),
            );
        }
        v
    }
}

/// Origins whose text is certainly SQL: parse errors in them are worth reporting.
fn certainly_sql(origin: &str) -> bool {
    origin == "file"
        || origin.starts_with("sqlx")
        || origin.starts_with("diesel")
        || origin.starts_with("sea-orm")
}

/// Parse the SQL texts of a file (`ir.embedded` with [`crate::ir::Language::Sql`]).
pub fn analyze(ir: &mut FileIr) {
    let mut statements = Vec::new();
    let mut problems = Vec::new();
    let mut crash = Vec::new();
    let mut texts = vec![SqlText::default(); ir.embedded.len()];
    for (idx, e) in ir.embedded.iter().enumerate() {
        if e.language != Language::Sql {
            continue;
        }
        let first = statements.len();
        let whole_file = e.origin == "file";
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
        let report = certainly_sql(&e.origin) && !templated;
        let mut params = Vec::new();
        let mut cx = facts::Context {
            text: &text,
            map: &e.map,
            embedded: idx,
            statements: &mut statements,
            problems: &mut problems,
            params: &mut params,
            report,
            body_depth: 0,
        };
        if let Err(message) = crate::isolate::catch(|| cx.text_statements(0, text.len(), false)) {
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
            crash.push(crate::isolate::problem(what, &message, Span::new(at, end)));
        }
        texts[idx] = SqlText {
            statements: first..statements.len(),
            params,
            dollar_quoted: e.text.contains("$$"),
        };
    }
    ir.sql.statements = statements;
    ir.sql.texts = texts;
    ir.problems.extend(crash);
    ir.problems
        .extend(problems.into_iter().map(|(span, message)| ParseProblem {
            message,
            span,
            help: "fix the statement; the rest of the SQL text was still analysed".to_string(),
        }));
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
}
