//! From one SQL text to [`Statement`] facts: split, parse each statement with `sqlparser`,
//! and record what the rules need, with exact spans.

use super::lex::{self, Token, TokenKind as Tk};
use super::rewrite;
use locklint_ir::source::Span;
use locklint_ir::sql::{
    Advisory, Assign, Cmp, CmpOp, Col, Conflict, Filter, Operand, Param, Placeholders, RowLock,
    Statement, StatementKind, TableDef,
};
use locklint_ir::TextMap;
use sqlparser::ast::{self as ast, Expr, Spanned};
use sqlparser::dialect::{Dialect, MySqlDialect, PostgreSqlDialect, SQLiteDialect};
use sqlparser::parser::Parser;
use std::ops::ControlFlow;

/// Database clock functions: a value built from one of these comes from the server.
const CLOCK: &[&str] = &[
    "now",
    "current_timestamp",
    "localtimestamp",
    "clock_timestamp",
    "statement_timestamp",
    "transaction_timestamp",
    "utc_timestamp",
    "sysdate",
    "current_date",
    "current_time",
    "curtime",
    "curdate",
    "unixepoch",
    "julianday",
    "datetime",
    "strftime",
    "getdate",
    "getutcdate",
    "sysutcdatetime",
    "unix_timestamp",
];

/// Statements whose parse failure says more about the parser than about the SQL.
const UNCHECKED: &[&str] = &[
    "do",
    "comment",
    "grant",
    "revoke",
    "copy",
    "vacuum",
    "analyze",
    "cluster",
    "reindex",
    "security",
    "listen",
    "notify",
    "discard",
    "reset",
    "set",
    "show",
    "pragma",
    "use",
    "call",
    "begin",
    "start",
    "commit",
    "rollback",
    "savepoint",
    "release",
    "end",
    "lock",
];

/// A statement of more tokens than this is not parsed: it becomes a parse problem, and the
/// statements around it are analysed as usual. The parser's tree takes up to about 1 KB per
/// token (a column of thousands of `NULL` options: 744 bytes each, in a vector that doubles),
/// so this keeps one statement's tree near 50 MB.
pub const MAX_STATEMENT_TOKENS: usize = 50_000;

/// Function bodies nested deeper than this (a body defining a function whose body defines
/// one ..) are not split again: each level would lex its whole text once more.
const MAX_BODY_DEPTH: usize = 8;

/// Work allowed per token of a statement for the facts of its expressions (nodes visited,
/// tokens lexed again for spans). Ordinary statements need a few units per token; comparisons
/// nested in comparisons (`a = b = c = ..`) need work quadratic in their length, and such a
/// statement is reported as too complex instead.
const WORK_PER_TOKEN: usize = 32;

/// The longest advisory-lock arguments kept as text, to compare keys.
const MAX_ADVISORY_ARGS: usize = 1024;
/// The arguments of an advisory-lock call past [`MAX_ADVISORY_ARGS`]: a key expression.
const LONG_ADVISORY_ARGS: &str = "(..)";

pub struct Context<'a> {
    pub text: &'a str,
    pub map: &'a TextMap,
    pub embedded: usize,
    pub statements: &'a mut Vec<Statement>,
    pub problems: &'a mut Vec<(Span, String)>,
    /// The top-level `$n` parameters of the text, collected as it is split.
    pub params: &'a mut Vec<Param>,
    /// Whether parse failures are reported.
    pub report: bool,
    /// How many function bodies enclose the text being split.
    pub body_depth: usize,
    /// The function body being split: where its routine starts in the text.
    pub body: Option<usize>,
    /// The body being split has an `EXCEPTION` handler.
    pub handler: bool,
    /// The name of the function or procedure whose body is being split.
    pub routine: Option<String>,
    /// The open `IF` branches and loops of the body being split: where the statements of each
    /// (of its current branch, after an `ELSE`) start in `statements`.
    pub branches: Vec<usize>,
    /// The functions the file exposes to other roles ([`locklint_ir::sql::SqlIr::exposed`]).
    pub exposed: &'a mut Vec<String>,
    /// What each bound parameter names, when the code that runs the text binds constants
    /// (`SqlExec::bind_literals`): `$n` is the `n`th.
    pub bind_literals: &'a [Option<String>],
}

fn shifted(t: &Token, by: usize) -> Token {
    let kind = match t.kind {
        Tk::Dollar { body } => Tk::Dollar {
            body: (body.0 + by, body.1 + by),
        },
        k => k,
    };
    Token {
        kind,
        start: t.start + by,
        end: t.end + by,
    }
}

impl Context<'_> {
    fn span(&self, start: usize, end: usize) -> Span {
        self.map.span(start, end)
    }

    fn word(&self, t: Option<&Token>) -> String {
        match t {
            Some(t) if t.kind == Tk::Word => t.text(self.text).to_ascii_lowercase(),
            _ => String::new(),
        }
    }

    /// Split `text[from..to]` into statements and analyse each.
    pub fn text_statements(&mut self, from: usize, to: usize, in_body: bool) {
        let text = self.text;
        lex::each_statement(&text[from..to], |p| {
            let mut toks = p.tokens;
            if from > 0 {
                for t in &mut toks {
                    *t = shifted(t, from);
                }
            }
            if !in_body {
                self.params.extend(toks.iter().filter_map(|t| {
                    let n = t.text(text).strip_prefix('$')?.parse().ok()?;
                    (t.kind == Tk::Param).then_some(Param {
                        start: t.start,
                        end: t.end,
                        n,
                    })
                }));
            }
            if toks.len() > MAX_STATEMENT_TOKENS {
                let first = toks[0];
                self.refuse(
                    &first,
                    in_body,
                    format!(
                        "this SQL statement has {} tokens, more than the {MAX_STATEMENT_TOKENS} analysed; it was not parsed",
                        toks.len()
                    ),
                );
                return;
            }
            self.statement(&toks, in_body);
        });
    }

    /// Keep a statement's facts (compacted: they are kept for the whole run).
    fn keep(&mut self, mut st: Statement) {
        st.compact();
        self.statements.push(st);
    }

    /// Report a statement that is not analysed, at its first token.
    fn refuse(&mut self, first: &Token, in_body: bool, message: String) {
        if self.report && !in_body {
            let span = self.span(first.start, first.end);
            self.problems.push((span, message));
        }
    }

    fn statement(&mut self, toks: &[Token], in_body: bool) {
        let w0 = self.word(toks.first());
        let w1 = self.word(toks.get(1));
        let w3 = self.word(toks.get(3));
        let routine = (w0 == "create"
            && (matches!(w1.as_str(), "function" | "procedure")
                || (w1 == "or" && matches!(w3.as_str(), "function" | "procedure"))))
            || (w0 == "do" && !rewrite::is_mysql_do(self.text, toks));
        if routine {
            if self.body_depth >= MAX_BODY_DEPTH {
                return;
            }
            self.body_depth += 1;
            let outer = self.body.replace(toks.first().map_or(0, |t| t.start));
            let name = self.routine_name(toks);
            if let Some(n) = name.as_ref().filter(|_| self.security_definer(toks)) {
                self.exposed.push(n.clone());
            }
            let outer_routine = std::mem::replace(&mut self.routine, name);
            let outer_handler = std::mem::replace(&mut self.handler, false);
            let outer_branches = std::mem::take(&mut self.branches);
            let first = self.statements.len();
            for t in toks {
                if let Tk::Dollar { body } = t.kind {
                    self.text_statements(body.0, body.1, true);
                }
            }
            if self.handler {
                // an error raised in a body with a handler may be caught there
                let body = self.body;
                let mut i = 0;
                self.statements.retain(|st| {
                    i += 1;
                    i <= first || !(st.kind == StatementKind::Raise && st.body == body)
                });
            }
            self.handler = outer_handler;
            self.branches = outer_branches;
            self.routine = outer_routine;
            self.body = outer;
            self.body_depth -= 1;
            return;
        }
        if !in_body && w0 == "grant" {
            let granted = self.granted_functions(toks);
            self.exposed.extend(granted);
        }
        if in_body && self.word(toks.first()) == "exception" {
            self.handler = true;
        }
        let advisory_all = self.advisory(toks);
        let toks = if in_body {
            let rest = self.strip_control(toks);
            self.condition_queries(&toks[..toks.len() - rest.len()]);
            self.mark_exit_path(rest);
            rest
        } else {
            toks
        };
        let Some(first) = toks.first() else {
            self.push_other(toks, advisory_all, in_body);
            return;
        };
        let w0 = self.word(Some(first));
        let bare_call = self.bare_call(toks, &w0);
        let call = bare_call.map(|_| lex::ident(toks[1].text(self.text)));
        let advisory: Vec<Advisory> = advisory_all
            .into_iter()
            .map(|mut a| {
                a.bare = bare_call.is_some_and(|s| s == a.span);
                a
            })
            .collect();
        if in_body && w0 == "raise" {
            if self.raises_error(toks) {
                let mut st = self.blank(toks, in_body);
                st.kind = StatementKind::Raise;
                st.advisory = advisory;
                self.keep(st);
            } else {
                self.push_other(toks, advisory, in_body);
            }
            return;
        }
        if w0 == "lock" {
            if let Some(tables) = self.table_lock(toks) {
                let mut st = self.blank(toks, in_body);
                st.kind = StatementKind::LockTable;
                st.table = tables.first().cloned();
                st.row_lock = Some(RowLock {
                    tables,
                    ..RowLock::default()
                });
                self.keep(st);
                return;
            }
        }
        if w0 == "perform" {
            let mut st = self.blank(toks, in_body);
            st.kind = StatementKind::Perform;
            st.advisory = advisory;
            st.call = call;
            self.keep(st);
            return;
        }
        let dml = matches!(
            w0.as_str(),
            "select" | "insert" | "update" | "delete" | "with" | "replace" | "values" | "merge"
        );
        if in_body && !dml {
            self.push_other(toks, advisory, in_body);
            return;
        }
        let start = first.start;
        let end = toks.last().map(|t| t.end).unwrap_or(start);
        let sql = &self.text[start..end];
        match parse(sql) {
            Ok(ast) => {
                let mut st = self.blank(toks, in_body);
                st.advisory = advisory;
                st.call = call;
                if self.facts(&mut st, &ast, toks, start) {
                    self.keep(st);
                    if w0 == "with" {
                        self.cte_writes(toks, in_body, &ast);
                    }
                } else {
                    self.refuse(
                        first,
                        in_body,
                        "this SQL statement nests comparisons in comparisons too long to analyse; it was not analysed"
                            .to_string(),
                    );
                    self.push_other(toks, st.advisory, in_body);
                }
            }
            Err(e) => {
                if self.report && !in_body && !UNCHECKED.contains(&w0.as_str()) {
                    let (span, msg) = self.error_site(&e, sql, toks);
                    self.problems
                        .push((span, format!("this SQL statement does not parse: {msg}")));
                }
                if in_body || !advisory.is_empty() {
                    // keep the advisory calls of a statement sqlparser does not know
                    self.push_other(toks, advisory, in_body);
                }
            }
        }
    }

    /// The writes of a statement's `WITH` queries (`WITH dead AS (DELETE FROM jobs WHERE id =
    /// $1 RETURNING *) INSERT INTO jobs_dead SELECT * FROM dead`), each analysed as a statement
    /// of its own, at its own place. A write that names another `WITH` query (`.. FROM picked`)
    /// is analysed with the statement's `WITH` queries in scope (`whole`), so the rows a query
    /// of its own table picked (`UPDATE jobs j .. FROM picked WHERE j.id = picked.id`) bring
    /// that query's conditions.
    fn cte_writes(&mut self, toks: &[Token], in_body: bool, whole: &ast::Statement) {
        let depths = lex::depths(self.text, toks);
        let mut names: Vec<String> = Vec::new();
        let mut bodies: Vec<(usize, usize)> = Vec::new();
        let mut i = 1;
        if self.word(toks.get(i)) == "recursive" {
            i += 1;
        }
        // `name [(columns)] AS [[NOT] MATERIALIZED] ( body )`, separated by commas
        while i < toks.len() {
            if toks[i].kind != Tk::Word {
                return;
            }
            names.push(lex::ident(toks[i].text(self.text)));
            i += 1;
            if toks.get(i).is_some_and(|t| t.is_punct(self.text, "(")) {
                while i < toks.len() && !(depths[i] == 0 && toks[i].is_punct(self.text, ")")) {
                    i += 1;
                }
                i += 1;
            }
            if self.word(toks.get(i)) != "as" {
                return;
            }
            i += 1;
            while matches!(self.word(toks.get(i)).as_str(), "not" | "materialized") {
                i += 1;
            }
            if !toks.get(i).is_some_and(|t| t.is_punct(self.text, "(")) {
                return;
            }
            let open = i;
            i += 1;
            while i < toks.len() && !(depths[i] == 0 && toks[i].is_punct(self.text, ")")) {
                i += 1;
            }
            if i >= toks.len() {
                return;
            }
            bodies.push((open + 1, i));
            i += 1;
            if !toks.get(i).is_some_and(|t| t.is_punct(self.text, ",")) {
                break;
            }
            i += 1;
        }
        for (from, to) in bodies {
            let body = &toks[from..to];
            let writes = matches!(self.word(body.first()).as_str(), "delete" | "update");
            let names_other = body
                .iter()
                .any(|t| t.kind == Tk::Word && names.contains(&lex::ident(t.text(self.text))));
            if writes && !names_other {
                self.statement(body, in_body);
            } else if writes {
                self.cte_write_in_scope(body, in_body, whole);
            }
        }
    }

    /// A write of a `WITH` query that names another one, analysed as `WITH <the statement's
    /// queries> <write>`: the queries it reads are in scope, and the rows they lock (`FOR
    /// UPDATE SKIP LOCKED`) are its row locks, as for a write that ends a `WITH` statement.
    /// Nothing when it does not parse alone.
    fn cte_write_in_scope(&mut self, body: &[Token], in_body: bool, whole: &ast::Statement) {
        let ast::Statement::Query(q) = whole else {
            return;
        };
        let (Some(first), Some(last)) = (body.first(), body.last()) else {
            return;
        };
        let Ok(write) = parse(&self.text[first.start..last.end]) else {
            return;
        };
        let body_of = match &write {
            ast::Statement::Update(_) => ast::SetExpr::Update(write),
            ast::Statement::Delete(_) => ast::SetExpr::Delete(write),
            _ => return,
        };
        let mut scoped = (**q).clone();
        scoped.body = Box::new(body_of);
        let scoped = ast::Statement::Query(Box::new(scoped));
        let mut st = self.blank(body, in_body);
        if self.facts(&mut st, &scoped, body, first.start) {
            self.keep(st);
        }
    }

    /// The queries in the PL/pgSQL conditions before a statement (`IF EXISTS (SELECT .. FROM
    /// locks WHERE name = $1 AND expires_at > now()) THEN`), each analysed as a `SELECT` of the
    /// body. Their advisory-lock calls stay the condition's: they were counted with it.
    fn condition_queries(&mut self, toks: &[Token]) {
        let depths = lex::depths(self.text, toks);
        let mut i = 0;
        while i + 1 < toks.len() {
            if toks[i].is_punct(self.text, "(") && self.word(toks.get(i + 1)) == "select" {
                let depth = depths[i];
                let end = (i + 1..toks.len())
                    .find(|&j| depths[j] == depth && toks[j].is_punct(self.text, ")"));
                if let Some(end) = end {
                    let first = self.statements.len();
                    self.statement(&toks[i + 1..end], true);
                    for st in &mut self.statements[first..] {
                        st.advisory.clear();
                        st.call = None;
                    }
                    i = end;
                }
            }
            i += 1;
        }
    }

    /// The tables of `LOCK [TABLE] [ONLY] a, b [IN <mode> MODE] [NOWAIT]` taken in a mode that
    /// conflicts with itself, or of MySQL's `LOCK TABLES a WRITE`.
    fn table_lock(&self, toks: &[Token]) -> Option<Vec<String>> {
        let words: Vec<String> = toks
            .iter()
            .filter(|t| t.kind == Tk::Word)
            .map(|t| t.text(self.text).to_ascii_lowercase())
            .collect();
        let mut tables = Vec::new();
        let mut i = 1;
        if matches!(words.get(i).map(String::as_str), Some("table" | "tables")) {
            i += 1;
        }
        if words.get(i).map(String::as_str) == Some("only") {
            i += 1;
        }
        // names up to `IN`, `WRITE`, `READ`, `NOWAIT` (a schema-qualified name is one table)
        let mut at = toks.iter().position(|t| t.kind == Tk::Word)?;
        let mut seen = 0;
        for (n, t) in toks.iter().enumerate() {
            if t.kind == Tk::Word {
                if seen == i {
                    at = n;
                    break;
                }
                seen += 1;
            }
        }
        let mut last: Option<String> = None;
        for t in &toks[at..] {
            let w = t.text(self.text).to_ascii_lowercase();
            if t.kind == Tk::Word {
                if matches!(
                    w.as_str(),
                    "in" | "write" | "read" | "nowait" | "as" | "low_priority"
                ) {
                    break;
                }
                last = Some(lex::ident(t.text(self.text)));
            } else if t.is_punct(self.text, ",") {
                tables.extend(last.take());
            } else if !t.is_punct(self.text, ".") {
                break;
            }
        }
        tables.extend(last);
        let rest = words.join(" ");
        let serialises = if words.first().map(String::as_str) == Some("lock")
            && words.get(1).map(String::as_str) == Some("tables")
        {
            rest.contains(" write")
        } else {
            match rest.split_once(" in ") {
                None => true,
                Some((_, mode)) => {
                    let mode = mode.trim_end_matches(" nowait").trim_end_matches(" mode");
                    matches!(
                        mode,
                        "share row exclusive" | "exclusive" | "access exclusive"
                    )
                }
            }
        };
        (serialises && !tables.is_empty()).then_some(tables)
    }

    fn push_other(&mut self, toks: &[Token], advisory: Vec<Advisory>, in_body: bool) {
        if advisory.is_empty() || toks.is_empty() {
            return;
        }
        let mut st = self.blank(toks, in_body);
        st.advisory = advisory;
        self.keep(st);
    }

    fn blank(&self, toks: &[Token], in_body: bool) -> Statement {
        let start = toks.first().map(|t| t.start).unwrap_or(0);
        let end = toks.last().map(|t| t.end).unwrap_or(start);
        Statement {
            embedded: self.embedded,
            start,
            end,
            span: self.span(start, end),
            in_body,
            kind: StatementKind::Other,
            table: None,
            reads: None,
            names: Vec::new(),
            assignments: Vec::new(),
            values: Vec::new(),
            conflict: Conflict::None,
            upsert_span: None,
            filter: None,
            advisory: Vec::new(),
            table_def: None,
            placeholders: self.placeholders(toks),
            row_lock: None,
            selected: Vec::new(),
            merge: false,
            read_filter: None,
            body: if in_body { self.body } else { None },
            routine: if in_body { self.routine.clone() } else { None },
            call: None,
            exit_path: false,
            values_of: None,
        }
    }

    /// The positional parameters among a statement's tokens.
    fn placeholders(&self, toks: &[Token]) -> Placeholders {
        let mut p = Placeholders::default();
        for t in toks.iter().filter(|t| t.kind == Tk::Param) {
            let text = t.text(self.text);
            if let Some(n) = text.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                p.highest = p.highest.max(n);
            } else if text.starts_with('?') {
                p.question = true;
            }
        }
        p
    }

    /// The span of a parse error: the token it names, or the whole statement. `sql` is the
    /// statement's text and `toks` its tokens (offsets in the whole text).
    fn error_site(
        &self,
        e: &sqlparser::parser::ParserError,
        sql: &str,
        toks: &[Token],
    ) -> (Span, String) {
        let start = toks.first().map_or(0, |t| t.start);
        let end = toks.last().map_or(start, |t| t.end);
        let msg = e.to_string();
        let msg = msg.strip_prefix("sql parser error: ").unwrap_or(&msg);
        let mut chars = msg.chars();
        let msg = match chars.next() {
            Some(c) => c.to_lowercase().chain(chars).collect::<String>(),
            None => String::new(),
        };
        let msg = msg.as_str();
        let (msg, at) = match msg.rsplit_once(" at Line: ") {
            Some((m, loc)) => {
                let mut it = loc.split(", Column: ");
                let line = it.next().and_then(|l| l.trim().parse::<u64>().ok());
                let col = it.next().and_then(|c| c.trim().parse::<u64>().ok());
                (m.to_string(), line.zip(col))
            }
            None => (msg.to_string(), None),
        };
        let lines = LineStarts::new(sql);
        let eof = msg.ends_with("found: EOF");
        let msg = match msg.strip_suffix("found: EOF") {
            Some(m) => format!("{m}found: the end of the statement"),
            None => msg,
        };
        let off = at
            .and_then(|(l, c)| lines.offset(sql, l, c))
            .or_else(|| eof.then_some(sql.len()));
        if let Some(off) = off {
            // the statement's own tokens: the one starting there, else the one before
            let at = start + off;
            let next = toks.partition_point(|t| t.start < at);
            if let Some(t) = toks.get(next).filter(|t| t.start == at) {
                return (self.span(t.start, t.end), msg);
            }
            if let Some(t) = next.checked_sub(1).and_then(|i| toks.get(i)) {
                return (self.span(t.start, t.end), msg);
            }
        }
        (self.span(start, end), msg)
    }

    /// The name of the function or procedure a `CREATE [OR REPLACE] FUNCTION|PROCEDURE`
    /// statement defines (lower case, without its schema).
    fn routine_name(&self, toks: &[Token]) -> Option<String> {
        let at = toks
            .iter()
            .position(|t| t.is_word(self.text, "function") || t.is_word(self.text, "procedure"))?;
        let mut name = None;
        for t in &toks[at + 1..] {
            if t.kind == Tk::Word {
                name = Some(lex::ident(t.text(self.text)));
            } else if !t.is_punct(self.text, ".") {
                break;
            }
        }
        name
    }

    /// Whether a `CREATE FUNCTION` header (the tokens outside its body) says `SECURITY
    /// DEFINER`.
    fn security_definer(&self, toks: &[Token]) -> bool {
        toks.windows(2)
            .any(|w| w[0].is_word(self.text, "security") && w[1].is_word(self.text, "definer"))
    }

    /// The functions and procedures a `GRANT EXECUTE ON FUNCTION f(..), g(..) TO ..` names
    /// (lower case, without their schema); none for another grant.
    fn granted_functions(&self, toks: &[Token]) -> Vec<String> {
        let mut names = Vec::new();
        if !toks.get(1).is_some_and(|t| t.is_word(self.text, "execute")) {
            return names;
        }
        let Some(on) = toks.iter().position(|t| t.is_word(self.text, "on")) else {
            return names;
        };
        if !toks.get(on + 1).is_some_and(|t| {
            t.is_word(self.text, "function")
                || t.is_word(self.text, "procedure")
                || t.is_word(self.text, "routine")
        }) {
            return names;
        }
        let mut i = on + 2;
        let mut last = None;
        while let Some(t) = toks.get(i) {
            if t.kind == Tk::Word {
                if t.is_word(self.text, "to") {
                    break;
                }
                last = Some(lex::ident(t.text(self.text)));
            } else if t.is_punct(self.text, "(") {
                names.extend(last.take());
                match lex::matching_paren(self.text, toks, i) {
                    Some(close) => i = close,
                    None => break,
                }
            } else if t.is_punct(self.text, ",") {
                names.extend(last.take());
            }
            i += 1;
        }
        names.extend(last);
        names
    }

    /// Whether a PL/pgSQL `RAISE` ends the routine with an error: a bare `RAISE` (re-raise),
    /// `RAISE EXCEPTION`, or a `RAISE` without a level (`RAISE 'message'`, `RAISE SQLSTATE ..`,
    /// `RAISE USING ..`, a condition name); not `RAISE NOTICE`, `WARNING`, `INFO`, `LOG`,
    /// `DEBUG`.
    fn raises_error(&self, toks: &[Token]) -> bool {
        !matches!(
            self.word(toks.get(1)).as_str(),
            "debug" | "log" | "info" | "notice" | "warning"
        )
    }

    /// Drop PL/pgSQL control words before a statement (`BEGIN`, `IF .. THEN`, `ELSE`, `LOOP`,
    /// `END IF`, `RETURN QUERY`, `DECLARE`).
    fn strip_control<'t>(&mut self, mut toks: &'t [Token]) -> &'t [Token] {
        loop {
            let w = self.word(toks.first());
            let before = toks.len();
            match w.as_str() {
                "loop" => self.branches.push(self.statements.len()),
                "if" | "while" | "for" | "foreach" => self.branches.push(self.statements.len()),
                "else" | "elsif" | "elseif" => {
                    if let Some(start) = self.branches.last_mut() {
                        *start = self.statements.len();
                    }
                }
                _ => {}
            }
            match w.as_str() {
                "begin" | "else" | "loop" | "declare" | "then" => toks = &toks[1..],
                "end" => {
                    toks = &toks[1..];
                    let what = self.word(toks.first());
                    if matches!(what.as_str(), "if" | "loop" | "case" | "while" | "for") {
                        toks = &toks[1..];
                        if what != "case" {
                            self.branches.pop();
                        }
                    }
                }
                "return" if self.word(toks.get(1)) == "query" => toks = &toks[2..],
                "if" | "elsif" | "elseif" | "while" | "when" | "exception" | "for" | "foreach" => {
                    // the first top-level `THEN` or `LOOP`, scanning only up to it
                    let mut depth = 0usize;
                    let stop = toks.iter().enumerate().skip(1).find(|(_, t)| {
                        if t.is_punct(self.text, "(") {
                            depth += 1;
                        } else if t.is_punct(self.text, ")") {
                            depth = depth.saturating_sub(1);
                        }
                        depth == 0 && (t.is_word(self.text, "then") || t.is_word(self.text, "loop"))
                    });
                    match stop {
                        Some((i, _)) => toks = &toks[i + 1..],
                        None if w == "exception" => toks = &toks[1..],
                        None => return &toks[toks.len()..],
                    }
                }
                _ => {}
            }
            if toks.len() == before || toks.is_empty() {
                return toks;
            }
        }
    }

    /// A `RETURN` (not `RETURN NEXT`) inside an `IF` branch or a loop: the statements of the
    /// branch before it run only on that way out of the routine.
    fn mark_exit_path(&mut self, toks: &[Token]) {
        if self.word(toks.first()) != "return" || self.word(toks.get(1)) == "next" {
            return;
        }
        let Some(&start) = self.branches.last() else {
            return;
        };
        let body = self.body;
        for st in self.statements.iter_mut().skip(start) {
            if st.body == body {
                st.exit_path = true;
            }
        }
    }

    /// If the statement is nothing but one call (`SELECT f(..) [AS x]`, `PERFORM f(..)`), the
    /// call's span.
    fn bare_call(&self, toks: &[Token], w0: &str) -> Option<Span> {
        if !matches!(w0, "select" | "perform") || toks.len() < 4 {
            return None;
        }
        if toks[1].kind != Tk::Word || !toks[2].is_punct(self.text, "(") {
            return None;
        }
        let close = lex::matching_paren(self.text, toks, 2)?;
        let rest = &toks[close + 1..];
        let ok = match rest.len() {
            0 => true,
            1 => rest[0].kind == Tk::Word && !rest[0].is_word(self.text, "into"),
            2 => rest[0].is_word(self.text, "as"),
            _ => false,
        };
        ok.then(|| self.span(toks[1].start, toks[close].end))
    }

    /// Advisory lock calls among the tokens.
    fn advisory(&self, toks: &[Token]) -> Vec<Advisory> {
        let mut out = Vec::new();
        // computed for the first call found
        let mut closing: Option<Vec<Option<usize>>> = None;
        for (i, t) in toks.iter().enumerate() {
            if t.kind != Tk::Word {
                continue;
            }
            let name = lex::ident(t.text(self.text));
            let Some(call) = pg_advisory(&name).or_else(|| mysql_named_lock(&name)) else {
                continue;
            };
            if !toks.get(i + 1).is_some_and(|p| p.is_punct(self.text, "(")) {
                continue;
            }
            let closing = closing.get_or_insert_with(|| lex::closing_parens(self.text, toks));
            let Some(close) = closing[i + 1] else {
                continue;
            };
            let (from, to) = (toks[i + 1].end, toks[close].start);
            let mut call = call;
            let args = if call.named {
                // the lock's name; `GET_LOCK`'s timeout is not part of it
                let first = first_argument(self.text, &toks[i + 2..close], from, to);
                // a negative timeout waits until the lock is free: a blocking lock, whose
                // result (1) need not be read, like `pg_advisory_lock`'s
                let timeout = self.text[from + first.len()..to]
                    .trim_start_matches(',')
                    .trim();
                if !call.unlock && timeout.parse::<i64>().is_ok_and(|t| t < 0) {
                    call.try_lock = false;
                }
                first
            } else {
                &self.text[from..to]
            };
            // a key expression this long is not compared with others (nested calls would
            // copy the rest of the statement once per level)
            let args: String = if args.len() > MAX_ADVISORY_ARGS {
                LONG_ADVISORY_ARGS.to_string()
            } else {
                args.chars().filter(|c| !c.is_whitespace()).collect()
            };
            out.push(Advisory {
                name: name.clone(),
                named: call.named,
                unlock: call.unlock,
                try_lock: call.try_lock,
                session: call.session,
                shared: call.shared,
                all: call.all,
                args,
                span: self.span(t.start, toks[close].end),
                bare: false,
            });
        }
        out
    }

    /// Record what `st` does from its syntax tree; `false` when its expressions take more
    /// work than [`WORK_PER_TOKEN`] allows (the facts are then incomplete).
    fn facts(&self, st: &mut Statement, ast: &ast::Statement, toks: &[Token], base: usize) -> bool {
        self.facts_with(st, ast, toks, base, &[])
    }

    /// [`Self::facts`] of a statement whose `WITH` queries are `ctes`.
    fn facts_with(
        &self,
        st: &mut Statement,
        ast: &ast::Statement,
        toks: &[Token],
        base: usize,
        ctes: &[&ast::Cte],
    ) -> bool {
        let lines = LineStarts::new(&self.text[base..toks.last().map(|t| t.end).unwrap_or(base)]);
        let depths = Depths::of(self.text, toks);
        let ex = Exprs {
            cx: self,
            lines: &lines,
            base,
            toks,
            depths: &depths,
            work: std::cell::Cell::new(WORK_PER_TOKEN.saturating_mul(toks.len() + 32)),
        };
        match ast {
            ast::Statement::Insert(ins) => {
                st.kind = StatementKind::Insert;
                if let ast::TableObject::TableName(n) = &ins.table {
                    set_table(st, n);
                }
                if let Some(a) = &ins.table_alias {
                    st.names.push(a.alias.value.to_lowercase());
                }
                let cols: Vec<String> = ins.columns.iter().map(object_name).collect();
                if let Some(src) = &ins.source {
                    if let ast::SetExpr::Values(v) = src.body.as_ref() {
                        if let Some(row) = v.rows.first() {
                            for (c, e) in cols.iter().zip(row.content.iter()) {
                                st.values.push(Assign {
                                    column: c.clone(),
                                    value: ex.value(e),
                                });
                            }
                        }
                    }
                }
                for a in &ins.assignments {
                    st.values.extend(ex.assign(a));
                }
                st.conflict = if ins.ignore || matches!(ins.or, Some(ast::SqliteOnConflict::Ignore))
                {
                    Conflict::Ignore
                } else if ins.replace_into || matches!(ins.or, Some(ast::SqliteOnConflict::Replace))
                {
                    Conflict::Replace
                } else {
                    Conflict::None
                };
                match &ins.on {
                    Some(ast::OnInsert::OnConflict(oc)) => match &oc.action {
                        ast::OnConflictAction::DoNothing => st.conflict = Conflict::Ignore,
                        ast::OnConflictAction::DoUpdate(du) => {
                            st.conflict = Conflict::DoUpdate;
                            for a in &du.assignments {
                                st.assignments.extend(ex.assign(a));
                            }
                            let depths = lex::depths(self.text, toks);
                            let do_at = toks.iter().enumerate().position(|(i, t)| {
                                depths[i] == 0
                                    && t.is_word(self.text, "do")
                                    && toks
                                        .get(i + 1)
                                        .is_some_and(|u| u.is_word(self.text, "update"))
                            });
                            if let Some(d) = do_at {
                                let clause_end = self.clause_end(toks, d, &["where", "returning"]);
                                st.upsert_span =
                                    Some(self.span(toks[d].start, toks[clause_end].end));
                                if let Some(sel) = &du.selection {
                                    st.filter = Some(ex.filter(toks, d, sel));
                                } else if let Some(conds) = kept_unless(&du.assignments) {
                                    // every assignment keeps the stored value unless its
                                    // `CASE` says otherwise: those conditions are the update's
                                    let mut columns = Vec::new();
                                    let mut comparisons = Vec::new();
                                    for c in conds {
                                        let f = ex.filter_of(c);
                                        columns.extend(f.0);
                                        comparisons.extend(f.1);
                                    }
                                    st.filter = Some(Filter {
                                        span: self.span(toks[d].start, toks[clause_end].end),
                                        columns,
                                        comparisons,
                                    });
                                }
                            }
                        }
                    },
                    Some(ast::OnInsert::DuplicateKeyUpdate(assigns)) => {
                        st.conflict = Conflict::DuplicateKey;
                        for a in assigns {
                            st.assignments.extend(ex.assign(a));
                        }
                        let depths = lex::depths(self.text, toks);
                        let on_at = toks.iter().enumerate().position(|(i, t)| {
                            depths[i] == 0
                                && t.is_word(self.text, "on")
                                && toks
                                    .get(i + 1)
                                    .is_some_and(|u| u.is_word(self.text, "duplicate"))
                        });
                        if let Some(o) = on_at {
                            let clause_end = self.clause_end(toks, o, &["returning"]);
                            let span = self.span(toks[o].start, toks[clause_end].end);
                            st.upsert_span = Some(span);
                            // the assignments act as the condition of the update
                            let mut columns = Vec::new();
                            let mut comparisons = Vec::new();
                            for a in assigns {
                                let f = ex.filter_of(&a.value);
                                columns.extend(f.0);
                                comparisons.extend(f.1);
                            }
                            st.filter = Some(Filter {
                                span,
                                columns,
                                comparisons,
                            });
                        }
                    }
                    _ => {}
                }
            }
            ast::Statement::Update(up) => {
                st.kind = StatementKind::Update;
                if let ast::TableFactor::Table { name, alias, .. } = &up.table.relation {
                    set_table(st, name);
                    if let Some(a) = alias {
                        st.names.push(a.name.value.to_lowercase());
                    }
                }
                for a in &up.assignments {
                    st.assignments.extend(ex.assign(a));
                }
                if let Some(sel) = &up.selection {
                    st.filter = Some(ex.filter(toks, 0, sel));
                    ex.same_row_guards(st, sel, ctes);
                    ex.picked_in_from_guards(st, up.from.as_ref(), sel, ctes);
                }
            }
            ast::Statement::Delete(del) => {
                st.kind = StatementKind::Delete;
                let from = match &del.from {
                    ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v) => v,
                };
                if let Some(ast::TableFactor::Table { name, alias, .. }) =
                    from.first().map(|t| &t.relation)
                {
                    set_table(st, name);
                    if let Some(a) = alias {
                        st.names.push(a.name.value.to_lowercase());
                    }
                }
                if let Some(sel) = &del.selection {
                    st.filter = Some(ex.filter(toks, 0, sel));
                    ex.same_row_guards(st, sel, ctes);
                    ex.picked_in_using_guards(st, del.using.as_ref(), sel, ctes);
                }
            }
            ast::Statement::Query(q) => match q.body.as_ref() {
                // `WITH ... UPDATE/INSERT/DELETE`
                ast::SetExpr::Insert(inner)
                | ast::SetExpr::Update(inner)
                | ast::SetExpr::Delete(inner) => {
                    // rows its `WITH` queries lock (`WITH c AS (SELECT .. FOR UPDATE SKIP
                    // LOCKED) UPDATE .. FROM c`)
                    let ctes = q.with.iter().flat_map(|w| &w.cte_tables);
                    let locks: Vec<RowLock> = ctes
                        .filter_map(|c| match c.query.body.as_ref() {
                            ast::SetExpr::Select(sel) => row_lock(&ex, &c.query, sel),
                            _ => None,
                        })
                        .collect();
                    let ctes: Vec<&ast::Cte> = q.with.iter().flat_map(|w| &w.cte_tables).collect();
                    let ok = self.facts_with(st, inner, toks, base, &ctes);
                    for l in locks {
                        let into = st.row_lock.get_or_insert_with(RowLock::default);
                        into.tables.extend(l.tables);
                        into.columns.extend(l.columns);
                    }
                    return ok;
                }
                body => {
                    st.kind = StatementKind::Select;
                    // `SELECT .. FROM t` (one table, no join): the table read.
                    if let ast::SetExpr::Select(sel) = body {
                        st.row_lock = row_lock(&ex, q, sel);
                        if let [from] = sel.from.as_slice() {
                            if let (ast::TableFactor::Table { name, alias, .. }, true) =
                                (&from.relation, from.joins.is_empty())
                            {
                                st.reads = Some(object_name(name));
                                st.names.push(object_name(name));
                                if let Some(a) = alias {
                                    st.names.push(a.name.value.to_lowercase());
                                }
                                st.selected = sel
                                    .projection
                                    .iter()
                                    .filter_map(|p| match p {
                                        ast::SelectItem::UnnamedExpr(e)
                                        | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                                            ex.value(e).bare.map(|c| c.name)
                                        }
                                        // every column
                                        _ => Some("*".to_string()),
                                    })
                                    .collect();
                                if let Some(w) = &sel.selection {
                                    st.read_filter = Some(ex.filter(toks, 0, w));
                                }
                            }
                        }
                    }
                }
            },
            ast::Statement::Merge(m) => {
                st.kind = StatementKind::Insert;
                st.merge = true;
                if let ast::TableFactor::Table { name, alias, .. } = &m.table {
                    set_table(st, name);
                    if let Some(a) = alias {
                        st.names.push(a.name.value.to_lowercase());
                    }
                }
                let source = match &m.source {
                    ast::TableFactor::Table { name, alias, .. } => Some(
                        alias
                            .as_ref()
                            .map_or_else(|| object_name(name), |a| a.name.value.to_lowercase()),
                    ),
                    ast::TableFactor::Derived { alias, .. } => {
                        alias.as_ref().map(|a| a.name.value.to_lowercase())
                    }
                    _ => None,
                };
                let incoming = |cols: &mut Vec<Col>| {
                    for c in cols.iter_mut() {
                        if c.qualifier.is_some() && c.qualifier == source {
                            c.incoming = true;
                        }
                    }
                };
                let incoming_op = |v: &mut Operand| {
                    incoming(&mut v.columns);
                    if let Some(b) = &mut v.bare {
                        if b.qualifier.is_some() && b.qualifier == source {
                            b.incoming = true;
                        }
                    }
                };
                for clause in &m.clauses {
                    match (&clause.clause_kind, &clause.action) {
                        (
                            ast::MergeClauseKind::NotMatched
                            | ast::MergeClauseKind::NotMatchedByTarget,
                            ast::MergeAction::Insert(ins),
                        ) => {
                            if let ast::MergeInsertKind::Values(v) = &ins.kind {
                                if let Some(row) = v.rows.first() {
                                    for (c, e) in ins.columns.iter().zip(row.content.iter()) {
                                        let mut value = ex.value(e);
                                        incoming_op(&mut value);
                                        st.values.push(Assign {
                                            column: object_name(c),
                                            value,
                                        });
                                    }
                                }
                            }
                        }
                        (ast::MergeClauseKind::Matched, ast::MergeAction::Update(up))
                            if st.conflict == Conflict::None =>
                        {
                            st.conflict = Conflict::DoUpdate;
                            if let ast::MergeUpdateKind::Set(assigns) = &up.kind {
                                for a in assigns {
                                    for mut x in ex.assign(a) {
                                        incoming_op(&mut x.value);
                                        st.assignments.push(x);
                                    }
                                }
                            }
                            if let Some(p) = &clause.predicate {
                                let (mut columns, mut comparisons) = ex.filter_of(p);
                                incoming(&mut columns);
                                for k in &mut comparisons {
                                    incoming_op(&mut k.left);
                                    incoming_op(&mut k.right);
                                }
                                let span = ex.span_of(p.span()).unwrap_or(st.span);
                                st.filter = Some(Filter {
                                    span,
                                    columns,
                                    comparisons,
                                });
                            }
                        }
                        _ => {}
                    }
                }
                if st.conflict == Conflict::None && !st.values.is_empty() {
                    // inserts only when the row is missing
                    st.conflict = Conflict::Ignore;
                }
            }
            ast::Statement::CreateTable(ct) => {
                st.kind = StatementKind::Ddl;
                let mut def = TableDef {
                    table: object_name(&ct.name),
                    ..Default::default()
                };
                for c in &ct.columns {
                    let name = c.name.value.to_lowercase();
                    let text = c.to_string().to_ascii_uppercase();
                    if text.contains("PRIMARY KEY") || text.contains("UNIQUE") {
                        def.unique.push(vec![name.clone()]);
                    }
                    def.columns.push(name);
                }
                for k in &ct.constraints {
                    let text = k.to_string();
                    let upper = text.to_ascii_uppercase();
                    if upper.contains("PRIMARY KEY") || upper.contains("UNIQUE") {
                        if let Some(cols) = paren_list(&text) {
                            def.unique.push(cols);
                        }
                    }
                }
                st.table = Some(def.table.clone());
                st.table_def = Some(def);
            }
            ast::Statement::AlterTable(at) => {
                st.kind = StatementKind::Ddl;
                let mut def = TableDef {
                    table: object_name(&at.name),
                    ..Default::default()
                };
                for op in &at.operations {
                    match op {
                        ast::AlterTableOperation::AddColumn { column_def, .. } => {
                            def.columns.push(column_def.name.value.to_lowercase());
                        }
                        ast::AlterTableOperation::AddConstraint { constraint, .. } => {
                            let text = constraint.to_string();
                            let upper = text.to_ascii_uppercase();
                            if upper.contains("PRIMARY KEY") || upper.contains("UNIQUE") {
                                if let Some(cols) = paren_list(&text) {
                                    def.unique.push(cols);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                st.table = Some(def.table.clone());
                st.table_def = Some(def);
            }
            ast::Statement::CreateIndex(ci) => {
                st.kind = StatementKind::Ddl;
                if ci.unique {
                    let cols = ci
                        .columns
                        .iter()
                        .map(|c| lex::ident(&c.column.expr.to_string()))
                        .collect();
                    st.table_def = Some(TableDef {
                        table: object_name(&ci.table_name),
                        columns: Vec::new(),
                        unique: vec![cols],
                    });
                }
            }
            _ => {}
        }
        ex.work.get() > 0
    }

    /// Index of the last token of the clause starting at `from`: up to (not including) the
    /// first top-level word in `stops` after it.
    fn clause_end(&self, toks: &[Token], from: usize, stops: &[&str]) -> usize {
        let depths = lex::depths(self.text, toks);
        let mut last = toks.len() - 1;
        for (i, t) in toks.iter().enumerate().skip(from + 1) {
            if depths[i] == 0
                && t.kind == Tk::Word
                && stops.contains(&t.text(self.text).to_ascii_lowercase().as_str())
            {
                last = i.saturating_sub(1).max(from);
                break;
            }
        }
        last
    }
}

/// The rows a `SELECT ... FOR UPDATE` locks, in the query or in the subqueries of its `WHERE`
/// (`... AND EXISTS (SELECT 1 FROM job_queues WHERE .. FOR UPDATE SKIP LOCKED)`): per locking
/// query the tables of its `OF` clauses, else every table it reads, and the columns its
/// `WHERE` mentions.
fn row_lock(ex: &Exprs, q: &ast::Query, sel: &ast::Select) -> Option<RowLock> {
    let mut out = RowLock::default();
    let mut add = |q: &ast::Query, sel: &ast::Select, top: bool| {
        if q.locks.is_empty() {
            return;
        }
        if top {
            out.joined = read_tables(sel);
            if out.joined.len() < 2 {
                out.joined.clear();
            }
            if let Some(e) = &sel.selection {
                out.passed = passed_columns(&ex.filter_of(e).1);
            }
        }
        let of: Vec<String> = q
            .locks
            .iter()
            .filter_map(|l| l.of.as_ref().map(object_name))
            .collect();
        if of.is_empty() {
            for from in &sel.from {
                let joins = from.joins.iter().map(|j| &j.relation);
                for rel in std::iter::once(&from.relation).chain(joins) {
                    if let ast::TableFactor::Table { name, .. } = rel {
                        out.tables.push(object_name(name));
                    }
                }
            }
        } else {
            out.tables.extend(of);
        }
        if let Some(e) = &sel.selection {
            out.columns
                .extend(ex.value(e).columns.into_iter().map(|c| c.name));
        }
    };
    add(q, sel, true);
    if let Some(e) = &sel.selection {
        let _ = ast::visit_expressions(e, |x| {
            if let Expr::Exists { subquery, .. } | Expr::Subquery(subquery) = x {
                if let ast::SetExpr::Select(inner) = subquery.body.as_ref() {
                    add(subquery, inner, false);
                }
            }
            ControlFlow::<()>::Continue(())
        });
    }
    (!out.tables.is_empty()).then_some(out)
}

/// The tables a query reads in its `FROM` clauses and joins, lower case, each once.
fn read_tables(sel: &ast::Select) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for from in &sel.from {
        let joins = from.joins.iter().map(|j| &j.relation);
        for rel in std::iter::once(&from.relation).chain(joins) {
            if let ast::TableFactor::Table { name, .. } = rel {
                let name = object_name(name);
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// The columns that comparisons require to be earlier than a time taken from the database
/// clock (`locked_at < now() - interval '4 hours'`, `now() >= lease_until`, `locked_at < now() -
/// job_expiry`), each once.
fn passed_columns(comparisons: &[Cmp]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (col, clock) in comparisons.iter().filter_map(Cmp::column_before) {
        if clock.clock && !out.contains(&col.name) && !clock.columns.contains(col) {
            out.push(col.name.clone());
        }
    }
    out
}

/// What an advisory-lock function's name says about its calls.
struct AdvisoryCall {
    named: bool,
    unlock: bool,
    try_lock: bool,
    session: bool,
    shared: bool,
    all: bool,
}

/// A PostgreSQL advisory-lock function: `pg_[try_]advisory_[xact_](lock|unlock)[_shared]`,
/// `pg_advisory_unlock_all`.
fn pg_advisory(name: &str) -> Option<AdvisoryCall> {
    let rest = name.strip_prefix("pg_")?;
    let (try_lock, rest) = match rest.strip_prefix("try_") {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let rest = rest.strip_prefix("advisory_")?;
    let (xact, rest) = match rest.strip_prefix("xact_") {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let (unlock, rest) = if let Some(r) = rest.strip_prefix("unlock") {
        (true, r)
    } else {
        (false, rest.strip_prefix("lock")?)
    };
    if !matches!(rest, "" | "_shared" | "_all") || (rest == "_all" && !unlock) {
        return None;
    }
    Some(AdvisoryCall {
        named: false,
        unlock,
        try_lock,
        session: !xact,
        shared: rest == "_shared",
        all: rest == "_all",
    })
}

/// A MySQL named-lock function: `GET_LOCK(name, timeout)` (session-level, its result says
/// whether it got the lock; with a negative timeout it waits until it does, see the caller),
/// `RELEASE_LOCK(name)`, `RELEASE_ALL_LOCKS()`.
fn mysql_named_lock(name: &str) -> Option<AdvisoryCall> {
    let (unlock, all) = match name {
        "get_lock" => (false, false),
        "release_lock" => (true, false),
        "release_all_locks" => (true, true),
        _ => return None,
    };
    Some(AdvisoryCall {
        named: true,
        unlock,
        try_lock: !unlock,
        session: true,
        shared: false,
        all,
    })
}

/// The text from `from` to the first top-level comma among a call's argument tokens `toks`,
/// else to `to`: its first argument.
fn first_argument<'t>(text: &'t str, toks: &[Token], from: usize, to: usize) -> &'t str {
    let depths = lex::depths(text, toks);
    let end = toks
        .iter()
        .enumerate()
        .find(|(i, t)| depths[*i] == 0 && t.is_punct(text, ","))
        .map_or(to, |(_, comma)| comma.start);
    &text[from..end]
}

fn set_table(st: &mut Statement, n: &ast::ObjectName) {
    let name = object_name(n);
    st.names.push(name.clone());
    st.table = Some(name);
}

/// A named parameter the parser reads as an identifier: sqlc's `@name`.
fn is_named_param(i: &ast::Ident) -> bool {
    i.quote_style.is_none() && i.value.starts_with('@')
}

/// sqlc's `@name` where PostgreSQL's parser reads the prefix operator `@` (absolute value) on
/// an identifier: the identifier, which names a parameter.
fn at_param(e: &Expr) -> Option<&ast::Ident> {
    match e {
        Expr::UnaryOp {
            op: ast::UnaryOperator::PGAbs,
            expr,
        } => match strip(expr) {
            Expr::Identifier(i) => Some(i),
            _ => None,
        },
        _ => None,
    }
}

/// sqlc's parameter macros: `sqlc.arg(name)`, `sqlc.narg(name)`, `sqlc.slice(name)`.
fn is_sqlc_param(f: &ast::Function) -> bool {
    let parts: Vec<String> = f
        .name
        .0
        .iter()
        .filter_map(|p| p.as_ident())
        .map(|i| i.value.to_lowercase())
        .collect();
    matches!(parts.as_slice(), [q, n] if q == "sqlc" && matches!(n.as_str(), "arg" | "narg" | "slice"))
}

/// The last part of a (possibly qualified) name, unquoted and lower case.
pub(super) fn object_name(n: &ast::ObjectName) -> String {
    n.0.last()
        .and_then(|p| p.as_ident())
        .map(|i| i.value.to_lowercase())
        .unwrap_or_else(|| lex::ident(&n.to_string()))
}

/// `PRIMARY KEY (a, b)` → `[a, b]`.
fn paren_list(text: &str) -> Option<Vec<String>> {
    let open = text.find('(')?;
    let close = text[open..].find(')')? + open;
    Some(
        text[open + 1..close]
            .split(',')
            .map(|c| lex::ident(c.trim()))
            .filter(|c| !c.is_empty())
            .collect(),
    )
}

/// Parse one statement: PostgreSQL first, then MySQL and SQLite. The PostgreSQL error is
/// returned when none accepts it.
fn parse(sql: &str) -> Result<ast::Statement, sqlparser::parser::ParserError> {
    let first = parse_as_is(sql);
    if first.is_ok() {
        return first;
    }
    let weaker = rewrite::weaker_row_locks(sql);
    let into = rewrite::returning_into(weaker.as_deref().unwrap_or(sql));
    if let Some(masked) = into.or(weaker) {
        return parse_as_is(&masked).or(first);
    }
    match rewrite::mysql_do(sql) {
        Some(exprs) => do_as_select(&exprs).ok_or(()).or(first),
        None => first,
    }
}

/// A MySQL `DO` statement's expressions (its text with the `DO` blanked: `rewrite::mysql_do`)
/// read as the `SELECT` of them, which evaluates them the same way: their spans are the
/// statement's own.
fn do_as_select(exprs: &str) -> Option<ast::Statement> {
    let dialect = MySqlDialect {};
    let parsed = locklint_ir::isolate::catch(|| {
        let mut p = Parser::new(&dialect).try_with_sql(exprs).ok()?;
        let list = p.parse_comma_separated(Parser::parse_expr).ok()?;
        let _ = p.consume_token(&sqlparser::tokenizer::Token::SemiColon);
        (p.peek_token().token == sqlparser::tokenizer::Token::EOF).then_some(list)
    })
    .ok()
    .flatten()?;
    let mut select = Parser::parse_sql(&dialect, "SELECT 1").ok()?.pop()?;
    let ast::Statement::Query(query) = &mut select else {
        return None;
    };
    let ast::SetExpr::Select(body) = query.body.as_mut() else {
        return None;
    };
    body.projection = parsed
        .into_iter()
        .map(ast::SelectItem::UnnamedExpr)
        .collect();
    Some(select)
}

fn parse_as_is(sql: &str) -> Result<ast::Statement, sqlparser::parser::ParserError> {
    let dialects: [&dyn Dialect; 3] = [&PostgreSqlDialect {}, &MySqlDialect {}, &SQLiteDialect {}];
    let mut first_err = None;
    for d in dialects {
        // a panic inside the parser is a parse failure of this statement
        let parsed =
            locklint_ir::isolate::catch(|| Parser::parse_sql(d, sql)).unwrap_or_else(|_| {
                Err(sqlparser::parser::ParserError::ParserError(
                    "the SQL parser failed on this statement".to_string(),
                ))
            });
        match parsed {
            Ok(mut v) if v.len() == 1 => return Ok(v.remove(0)),
            Ok(_) => {
                first_err.get_or_insert(sqlparser::parser::ParserError::ParserError(
                    "expected exactly one statement".to_string(),
                ));
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    Err(first_err.expect("at least one dialect was tried"))
}

/// Line starts of a statement text, to turn sqlparser's line/column into offsets.
struct LineStarts {
    starts: Vec<usize>,
    /// Whether each line is ASCII (columns are then byte offsets).
    ascii: Vec<bool>,
}

impl LineStarts {
    fn new(s: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(s.match_indices('\n').map(|(i, _)| i + 1));
        let ascii = starts
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let b = starts.get(i + 1).copied().unwrap_or(s.len());
                s[a..b].is_ascii()
            })
            .collect();
        LineStarts { starts, ascii }
    }

    /// Byte offset of a 1-based line and character column.
    fn offset(&self, s: &str, line: u64, col: u64) -> Option<usize> {
        if line == 0 || col == 0 {
            return None;
        }
        let idx = line as usize - 1;
        let start = *self.starts.get(idx)?;
        let rest = &s[start..];
        if self.ascii.get(idx).copied().unwrap_or(false) {
            let off = col as usize - 1;
            return (off <= rest.len()).then_some(start + off);
        }
        let mut off = 0;
        for (n, c) in rest.chars().enumerate() {
            if n as u64 == col - 1 {
                return Some(start + off);
            }
            off += c.len_utf8();
        }
        (rest.chars().count() as u64 == col - 1).then_some(start + rest.len())
    }
}

/// The parenthesis depth before each token of a statement (and after its last), so that the
/// depth between two tokens is a subtraction.
struct Depths(Vec<i64>);

impl Depths {
    fn of(text: &str, toks: &[Token]) -> Depths {
        let mut depth = 0i64;
        let mut out = Vec::with_capacity(toks.len() + 1);
        for t in toks {
            out.push(depth);
            if t.is_punct(text, "(") {
                depth += 1;
            } else if t.is_punct(text, ")") {
                depth -= 1;
            }
        }
        out.push(depth);
        Depths(out)
    }
}

pub(super) struct Exprs<'c, 'a> {
    cx: &'c Context<'a>,
    lines: &'c LineStarts,
    base: usize,
    /// The statement's tokens (offsets in the whole text) and their depths.
    toks: &'c [Token],
    depths: &'c Depths,
    /// Work left for this statement's expressions (see [`WORK_PER_TOKEN`]); at 0 nothing more
    /// is looked at.
    work: std::cell::Cell<usize>,
}

impl Exprs<'_, '_> {
    /// Spend `n` units of work; `false` once none is left.
    pub(super) fn spend(&self, n: usize) -> bool {
        let left = self.work.get().saturating_sub(n);
        self.work.set(left);
        left > 0
    }

    fn stmt_text(&self) -> &str {
        &self.cx.text[self.base..]
    }

    fn span_of(&self, s: sqlparser::tokenizer::Span) -> Option<Span> {
        let text = self.stmt_text();
        let a = self.lines.offset(text, s.start.line, s.start.column)?;
        let b = self.lines.offset(text, s.end.line, s.end.column)?;
        if b <= a {
            return None;
        }
        // sqlparser's spans of calls stop before the closing parenthesis (or after the name):
        // extend to balance the parentheses, reading the statement's tokens from the span's
        // end with the depth there (the depths before each token are known)
        let (a, b) = (self.base + a, self.base + b);
        let toks = self.toks;
        let first = toks.partition_point(|t| t.start < a);
        let from = toks.partition_point(|t| t.start < b);
        // the work of reading the window after the span, as lexing it would be
        let window = toks.partition_point(|t| t.start < b.saturating_add(256));
        self.spend(window.saturating_sub(first));
        let depths = &self.depths.0;
        let mut depth = depths[from] - depths[first];
        let mut end = b;
        if from > first {
            end = end.max(toks[from - 1].end);
        }
        if depth >= 0 {
            for i in from..toks.len() {
                let t = &toks[i];
                let src = self.cx.text;
                if depth == 0 {
                    let call =
                        i > first && toks[i - 1].kind == Tk::Word && t.start == toks[i - 1].end;
                    if !(t.is_punct(src, "(") && call) {
                        break;
                    }
                }
                if t.is_punct(src, "(") {
                    depth += 1;
                } else if t.is_punct(src, ")") {
                    depth -= 1;
                    if depth < 0 {
                        break;
                    }
                }
                end = end.max(t.end);
            }
        }
        Some(self.cx.span(a, end))
    }

    fn assign(&self, a: &ast::Assignment) -> Vec<Assign> {
        // `col = CASE WHEN <cond> THEN <new> ELSE col END` writes `<new>` (when it writes):
        // the condition is read as the update's (`kept_unless`), not as the value written
        let value = match (&a.target, strip(&a.value)) {
            (
                ast::AssignmentTarget::ColumnName(n),
                Expr::Case {
                    operand: None,
                    conditions,
                    else_result: Some(e),
                    ..
                },
            ) if conditions.len() == 1 && names_column(e, &object_name(n)) => {
                self.value(&conditions[0].result)
            }
            _ => self.value(&a.value),
        };
        match &a.target {
            ast::AssignmentTarget::ColumnName(n) => vec![Assign {
                column: object_name(n),
                value,
            }],
            ast::AssignmentTarget::Tuple(ns) => ns
                .iter()
                .map(|n| Assign {
                    column: object_name(n),
                    value: value.clone(),
                })
                .collect(),
        }
    }

    pub(super) fn value(&self, e: &Expr) -> Operand {
        self.value_at(e, true)
    }

    /// [`Exprs::value`], with its span when `place` (finding where an expression ends lexes
    /// the text after it: too much work for each item of a long list).
    fn value_at(&self, e: &Expr, place: bool) -> Operand {
        if self.work.get() == 0 {
            return Operand::default();
        }
        let mut v = Operand::default();
        // identifiers inside `VALUES(x)` are the proposed row; inside `sqlc.arg(x)` they name a
        // parameter
        let mut incoming = Vec::new();
        let mut named = Vec::new();
        // the names of named arguments (`make_interval(secs => $1)`) are no columns
        let mut arg_names = Vec::new();
        let _ = ast::visit_expressions(e, |x| {
            if !self.spend(1) {
                return ControlFlow::Break(());
            }
            if let Some(i) = at_param(x) {
                named.push(i.span);
            }
            if let Expr::Function(ast::Function {
                args: ast::FunctionArguments::List(list),
                ..
            }) = x
            {
                for a in &list.args {
                    if let ast::FunctionArg::ExprNamed {
                        name: Expr::Identifier(i),
                        ..
                    } = a
                    {
                        arg_names.push(i.span);
                    }
                }
            }
            if let Expr::Function(f) = x {
                let into = if object_name(&f.name) == "values" {
                    Some(&mut incoming)
                } else if is_sqlc_param(f) {
                    Some(&mut named)
                } else {
                    None
                };
                if let Some(into) = into {
                    let _ = ast::visit_expressions(&f.args, |y| {
                        if let Expr::Identifier(i) = y {
                            into.push(i.span);
                        }
                        ControlFlow::<()>::Continue(())
                    });
                }
            }
            ControlFlow::<()>::Continue(())
        });
        let _ = ast::visit_expressions(e, |x| {
            // each node once for the span below, once here, and the lists searched
            if !self.spend(2 + named.len() + incoming.len() + arg_names.len()) {
                return ControlFlow::Break(());
            }
            match x {
                Expr::Identifier(i) if arg_names.contains(&i.span) => {}
                Expr::Identifier(i) => {
                    let name = i.value.to_lowercase();
                    if is_named_param(i) || named.contains(&i.span) {
                        v.param = true;
                    } else if i.quote_style.is_none() && CLOCK.contains(&name.as_str()) {
                        v.clock = true;
                    } else {
                        v.columns.push(Col {
                            qualifier: None,
                            name,
                            incoming: incoming.contains(&i.span),
                        });
                    }
                }
                Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                    let q = parts[parts.len() - 2].value.to_lowercase();
                    v.columns.push(Col {
                        incoming: q == "excluded" || q == "new",
                        qualifier: Some(q),
                        name: parts[parts.len() - 1].value.to_lowercase(),
                    });
                }
                Expr::Value(val) => match &val.value {
                    ast::Value::Placeholder(_) => v.param = true,
                    ast::Value::SingleQuotedString(s) if s.eq_ignore_ascii_case("now") => {
                        v.clock = true
                    }
                    _ => {}
                },
                Expr::Function(f) if is_sqlc_param(f) => v.param = true,
                x if at_param(x).is_some() => v.param = true,
                Expr::Function(f) => {
                    let n = object_name(&f.name);
                    if CLOCK.contains(&n.as_str()) {
                        v.clock = true;
                    } else if n != "values" {
                        v.call = true;
                    }
                }
                Expr::Subquery(_) | Expr::Exists { .. } => v.call = true,
                _ => {}
            }
            ControlFlow::<()>::Continue(())
        });
        let inner = strip(e);
        v.bare = match inner {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                v.columns.first().cloned().filter(|_| v.columns.len() == 1)
            }
            _ => None,
        };
        v.named_literal = match inner {
            Expr::Value(val) => match &val.value {
                ast::Value::SingleQuotedString(s) if !s.is_empty() => Some(s.to_lowercase()),
                // `$2` bound to `JobStatus::Running.to_string()`
                ast::Value::Placeholder(p) => p
                    .strip_prefix('$')
                    .and_then(|n| n.parse::<usize>().ok())
                    .and_then(|n| self.cx.bind_literals.get(n.checked_sub(1)?))
                    .cloned()
                    .flatten(),
                _ => None,
            },
            _ => None,
        };
        v.bare_param = match inner {
            Expr::Value(val) => matches!(val.value, ast::Value::Placeholder(_)),
            Expr::Identifier(i) => is_named_param(i),
            Expr::Function(f) => is_sqlc_param(f),
            x => at_param(x).is_some(),
        };
        if place && self.work.get() > 0 {
            v.span = self.span_of(e.span());
        }
        v
    }

    /// Columns and comparisons of a condition.
    pub(super) fn filter_of(&self, e: &Expr) -> (Vec<Col>, Vec<Cmp>) {
        let columns = self.value(e).columns;
        let mut comparisons = Vec::new();
        let _ = ast::visit_expressions(e, |x| {
            if !self.spend(1) {
                return ControlFlow::Break(());
            }
            if let Expr::BinaryOp { left, op, right } = x {
                let op = match op {
                    ast::BinaryOperator::Eq => Some(CmpOp::Eq),
                    ast::BinaryOperator::NotEq => Some(CmpOp::NotEq),
                    ast::BinaryOperator::Lt => Some(CmpOp::Lt),
                    ast::BinaryOperator::LtEq => Some(CmpOp::LtEq),
                    ast::BinaryOperator::Gt => Some(CmpOp::Gt),
                    ast::BinaryOperator::GtEq => Some(CmpOp::GtEq),
                    _ => None,
                };
                if let Some(op) = op {
                    comparisons.push(Cmp {
                        op,
                        left: self.value(left),
                        right: self.value(right),
                    });
                }
            }
            // membership is an equality with one of the values: `owner = ANY($1)`,
            // `owner IN ($1, $2)`
            match x {
                Expr::AnyOp {
                    left,
                    compare_op: ast::BinaryOperator::Eq,
                    right,
                    ..
                } => comparisons.push(Cmp {
                    op: CmpOp::Eq,
                    left: self.value(left),
                    right: self.value(right),
                }),
                Expr::In {
                    expr,
                    target: ast::InTarget::List(list),
                    negated: false,
                    ..
                } => {
                    // one equality with all the values together
                    let mut right = Operand::default();
                    for item in list {
                        let v = self.value_at(item, false);
                        right.columns.extend(v.columns);
                        right.param |= v.param;
                        right.clock |= v.clock;
                        right.call |= v.call;
                    }
                    comparisons.push(Cmp {
                        op: CmpOp::Eq,
                        left: self.value(expr),
                        right,
                    });
                }
                _ => {}
            }
            ControlFlow::<()>::Continue(())
        });
        // kept with the statement for the whole run: without the room the vector grew into
        comparisons.shrink_to_fit();
        (columns, comparisons)
    }

    /// The `WHERE` clause after token `from`.
    fn filter(&self, toks: &[Token], from: usize, sel: &Expr) -> Filter {
        let text = self.cx.text;
        let depths = lex::depths(text, toks);
        let at = toks
            .iter()
            .enumerate()
            .skip(from)
            .find(|(i, t)| depths[*i] == 0 && t.is_word(text, "where"))
            .map(|(i, _)| i);
        let span = match at {
            Some(w) => {
                let end = self
                    .cx
                    .clause_end(toks, w, &["returning", "order", "limit"]);
                self.cx.span(toks[w].start, toks[end].end)
            }
            None => self.span_of(sel.span()).unwrap_or_else(|| {
                self.cx
                    .span(self.base, toks.last().map(|t| t.end).unwrap_or(self.base))
            }),
        };
        let (columns, comparisons) = self.filter_of(sel);
        Filter {
            span,
            columns,
            comparisons,
        }
    }
}

/// An expression without casts and parentheses.
/// Whether `e` is the stored value of column `col`: `col` or `locks.col`, not the proposed
/// row's `EXCLUDED.col`.
fn names_column(e: &Expr, col: &str) -> bool {
    match strip(e) {
        Expr::Identifier(i) => i.value.eq_ignore_ascii_case(col),
        Expr::CompoundIdentifier(parts) => {
            parts
                .last()
                .is_some_and(|p| p.value.eq_ignore_ascii_case(col))
                && !parts
                    .iter()
                    .rev()
                    .nth(1)
                    .is_some_and(|q| q.value.eq_ignore_ascii_case("excluded"))
        }
        _ => false,
    }
}

/// The conditions of a `DO UPDATE SET` whose every assignment keeps the stored value unless a
/// condition holds: `col = CASE WHEN <cond> THEN <new> .. ELSE col END` (the `ELSE` names the
/// assigned column itself, bare or qualified), or `col = col`. `None` when some assignment
/// writes whatever the row holds, or none is conditional.
fn kept_unless(assignments: &[ast::Assignment]) -> Option<Vec<&Expr>> {
    let names_itself = names_column;
    let mut conds = Vec::new();
    for a in assignments {
        let ast::AssignmentTarget::ColumnName(n) = &a.target else {
            return None;
        };
        let col = object_name(n);
        match strip(&a.value) {
            Expr::Case {
                operand: None,
                conditions,
                else_result: Some(e),
                ..
            } if names_itself(e, &col) => conds.extend(conditions.iter().map(|w| &w.condition)),
            e if names_itself(e, &col) => {}
            _ => return None,
        }
    }
    (!conds.is_empty()).then_some(conds)
}

fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Nested(x) => strip(x),
        Expr::Cast { expr, .. } => strip(expr),
        _ => e,
    }
}
