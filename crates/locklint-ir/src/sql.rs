//! SQL in the intermediate form: the statements of every SQL text of a file, as plain facts
//! (what a statement does, the table it writes, its `WHERE` comparisons, conflicts, advisory-lock
//! calls, table definitions), filled by the SQL front-end and read by the project facts, the
//! rules and the audit.

use crate::source::Span;

/// What the SQL front-end extracted from one file.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SqlIr {
    /// Every statement of every SQL text of the file, in text order.
    pub statements: Vec<Statement>,
    /// Per embedded text (by index in [`crate::FileIr::embedded`]): the range of its statements in
    /// [`SqlIr::statements`], and its top-level PostgreSQL parameters.
    pub texts: Vec<SqlText>,
    /// The functions and procedures the file hands to other roles to call (lower case, without
    /// their schema): defined `SECURITY DEFINER`, or named by a `GRANT EXECUTE ON FUNCTION`.
    /// Such a function is an entry point of a client (a PostgREST or Supabase `rpc`, a role of
    /// the application), each of whose calls may run on another pooled session.
    #[serde(default)]
    pub exposed: Vec<String>,
}

#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct SqlText {
    pub statements: std::ops::Range<usize>,
    pub params: Vec<Param>,
    /// The text holds `$$` (a dollar-quoted body, or one in a string).
    pub dollar_quoted: bool,
}

/// A PostgreSQL parameter `$n` outside quotes, comments and dollar-quoted bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StatementKind {
    Select,
    Insert,
    Update,
    Delete,
    /// PL/pgSQL `PERFORM`.
    Perform,
    /// `CREATE TABLE`, `ALTER TABLE`, `CREATE INDEX` ...
    Ddl,
    /// A PL/pgSQL `RAISE` that ends the routine with an error (`RAISE EXCEPTION`, `RAISE
    /// 'message'`, a bare `RAISE`), in a body without an `EXCEPTION` handler.
    Raise,
    /// `LOCK [TABLE] t [IN <mode> MODE]` in a mode that conflicts with itself (`SHARE ROW
    /// EXCLUSIVE`, `EXCLUSIVE`, `ACCESS EXCLUSIVE`, the default), or MySQL's `LOCK TABLES t
    /// WRITE`: callers that take it run one at a time until the transaction ends. The tables are
    /// its `row_lock` tables.
    LockTable,
    Other,
}

/// What an `INSERT` does when the row exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Col {
    /// Table or alias it is qualified with (lower case).
    pub qualifier: Option<String>,
    pub name: String,
    /// The proposed row's value: `EXCLUDED.x`, `VALUES(x)`.
    pub incoming: bool,
}

/// Facts about an expression.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Operand {
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
    /// The expression is just a constant that names something, unlike `NULL` or `''`: a
    /// non-empty string literal (`'running'`), or in an ORM an enum variant (`JobState::Running`);
    /// its text in lower case (`running` for both).
    #[serde(default)]
    pub named_literal: Option<String>,
    /// Of a value built in Rust: it reads the machine's clock (`Utc::now() - lease`), in the
    /// expression or in the initialiser of the local it is.
    #[serde(default)]
    pub client_clock: bool,
    /// Where the expression is, when known.
    pub span: Option<Span>,
    /// Of a value built in Rust: where the machine's clock it holds was read, when that is
    /// elsewhere (the initialiser of the local it reads: `let now = Utc::now().naive_utc()`).
    #[serde(default)]
    pub clock_read: Option<Span>,
    /// Of a value built in Rust: the field of a parameter of a struct type it reads
    /// (`lock.expires_at` with `lock: &MutexLock`), as the struct and the field.
    #[serde(default)]
    pub from_field: Option<(String, String)>,
}

impl Operand {
    /// A constant: no columns, parameters or calls.
    pub fn is_constant(&self) -> bool {
        self.columns.is_empty() && !self.param && !self.call && !self.clock
    }
}

/// A comparison in a `WHERE` clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Cmp {
    pub op: CmpOp,
    pub left: Operand,
    pub right: Operand,
}

impl Cmp {
    /// Of a comparison that requires a column to lie before a value (`c < v`, `c <= v`, `v >
    /// c`, `v >= c`): the column, when that side is one, and the value.
    pub fn column_before(&self) -> Option<(&Col, &Operand)> {
        let (col, value) = match self.op {
            CmpOp::Lt | CmpOp::LtEq => (&self.left, &self.right),
            CmpOp::Gt | CmpOp::GtEq => (&self.right, &self.left),
            _ => return None,
        };
        Some((col.bare.as_ref()?, value))
    }
}

/// A `WHERE` clause (of an `UPDATE`/`DELETE`, or of `ON CONFLICT ... DO UPDATE`), or the
/// assignments of `ON DUPLICATE KEY UPDATE`, which act as its condition.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Filter {
    /// From the `WHERE` keyword to the end of the condition.
    pub span: Span,
    /// Every column referenced.
    pub columns: Vec<Col>,
    pub comparisons: Vec<Cmp>,
}

/// `column = value` in `SET`, `DO UPDATE SET` or `ON DUPLICATE KEY UPDATE`, or a column and
/// its value in `INSERT ... VALUES`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Assign {
    pub column: String,
    pub value: Operand,
}

/// A call of a PostgreSQL advisory lock function, or of a MySQL named lock function
/// (`GET_LOCK`, `RELEASE_LOCK`, `RELEASE_ALL_LOCKS`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Advisory {
    /// Function name, lower case (`pg_try_advisory_lock`, `get_lock`).
    pub name: String,
    /// A MySQL named lock: session-level, released by `RELEASE_LOCK` of the same name, never
    /// by a PostgreSQL unlock.
    #[serde(default)]
    pub named: bool,
    pub unlock: bool,
    /// `pg_try_*`.
    pub try_lock: bool,
    /// Session level (not `_xact_`).
    pub session: bool,
    pub shared: bool,
    /// `pg_advisory_unlock_all`.
    pub all: bool,
    /// The arguments' text, whitespace removed (of a MySQL named lock, its name only: the
    /// first argument).
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
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct TableDef {
    pub table: String,
    pub columns: Vec<String>,
    /// Primary keys and unique constraints or indexes.
    pub unique: Vec<Vec<String>>,
}

/// One SQL statement and what rules need to know about it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Statement {
    /// Index into [`crate::FileIr::embedded`].
    pub embedded: usize,
    /// Byte range in the embedded text.
    pub start: usize,
    pub end: usize,
    /// The whole statement in the file.
    pub span: Span,
    /// Inside a PL/pgSQL function body or `DO` block.
    pub in_body: bool,
    pub kind: StatementKind,
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
    /// The positional parameters it uses.
    pub placeholders: Placeholders,
    /// A `SELECT ... FOR UPDATE` (or `FOR NO KEY UPDATE`, `FOR SHARE`): the rows it reads stay
    /// locked until the transaction ends. Of a write, the rows its `WITH` queries lock.
    #[serde(default)]
    pub row_lock: Option<RowLock>,
    /// Of a plain `SELECT .. FROM t` (one table): the columns it selects by name (`SELECT
    /// expires_at, owner INTO v_exp, v_owner ..`), and its `WHERE`. In a PL/pgSQL body, a
    /// subquery of an `IF` / `ELSIF` / `WHILE` condition (`IF EXISTS (SELECT .. WHERE expires >
    /// now()) THEN`) is such a statement too, before the statement the condition leads to.
    #[serde(default)]
    pub selected: Vec<String>,
    /// A `MERGE`, read as an upsert: its `WHEN NOT MATCHED` insert gives the values, its `WHEN
    /// MATCHED` update the assignments (and `Conflict::DoUpdate`), that clause's `AND`
    /// condition the filter; the source's columns (`s.owner`) are the proposed row.
    #[serde(default)]
    pub merge: bool,
    #[serde(default)]
    pub read_filter: Option<Filter>,
    /// Inside a PL/pgSQL function body or `DO` block: which one (where its routine starts in
    /// the embedded text). The statements of one body run in one transaction.
    #[serde(default)]
    pub body: Option<usize>,
    /// Inside the body of a named function or procedure: its name (lower case, without its
    /// schema).
    #[serde(default)]
    pub routine: Option<String>,
    /// A statement that is nothing but one call of a function (`PERFORM f(..)`, `SELECT
    /// f(..)`): the function's name (lower case).
    #[serde(default)]
    pub call: Option<String>,
    /// In a PL/pgSQL body: the statement is in an `IF` branch or a loop that leaves the routine
    /// with a `RETURN` after it (`IF done THEN PERFORM unlock(..); RETURN 0; END IF;`), so it
    /// runs only on that way out, never on the way past the branch.
    #[serde(default)]
    pub exit_path: bool,
    /// An ORM insert of a whole struct value (`.values(mutex)` with `mutex: &MutexLock`): the
    /// struct's type and where the value is; its fields are the inserted columns, filled
    /// where the struct is built (`crate::LiteralTime`).
    #[serde(default)]
    pub values_of: Option<StructValue>,
}

/// A struct value an ORM inserts whole.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StructValue {
    pub type_name: String,
    pub span: Span,
}

/// The rows a `SELECT ... FOR UPDATE` locks.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct RowLock {
    /// The tables whose rows it locks (its `OF` tables, else every table it reads), lower case.
    pub tables: Vec<String>,
    /// The columns its `WHERE` mentions.
    pub columns: Vec<String>,
    /// Of a locking query that reads several tables (`FROM jobs JOIN job_queues USING
    /// (queue_name) .. FOR UPDATE OF job_queues`): every table it reads, locked or only joined,
    /// lower case. Empty for a query of one table.
    #[serde(default)]
    pub joined: Vec<String>,
    /// The columns its `WHERE` requires to lie in the past of the database clock (`locked_at <
    /// now() - job_expiry`, `now() > lease_until`): the rows it picks are those whose time has
    /// passed.
    #[serde(default)]
    pub passed: Vec<String>,
}

/// The positional parameters a statement uses, outside quotes, comments and dollar-quoted
/// bodies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Placeholders {
    /// The highest PostgreSQL `$n` (0 when there is none).
    pub highest: usize,
    /// It uses question marks (`?`, `?1`).
    pub question: bool,
}

impl Placeholders {
    /// The parameter a condition added to the statement takes: `$n` after the highest one,
    /// or `?` when the statement uses question marks.
    pub fn next(&self) -> String {
        if self.highest == 0 && self.question {
            "?".to_string()
        } else {
            format!("${}", self.highest + 1)
        }
    }
}

impl Statement {
    /// Without the room its lists grew into: statements are kept for the whole run.
    pub fn compact(&mut self) {
        self.names.shrink_to_fit();
        self.assignments.shrink_to_fit();
        self.values.shrink_to_fit();
        self.advisory.shrink_to_fit();
        self.selected.shrink_to_fit();
    }

    pub fn is_write(&self) -> bool {
        matches!(
            self.kind,
            StatementKind::Insert | StatementKind::Update | StatementKind::Delete
        )
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
