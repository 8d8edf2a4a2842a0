//! Diagnostics and fixes shared by the SQL rules: where a statement's finding points, and the
//! edits inside a statement's SQL (inserting a condition, taking out a bound parameter). What
//! the statements mean is a project fact ([`locklint_project::sql`]).

use super::RuleInfo;
use locklint_ir::diagnostic::{Diagnostic, Location, Related, Severity};
use locklint_ir::source::Span;
use locklint_ir::sql::Statement;
use locklint_ir::{FileIr, Origin};

/// The narrowest span that shows a statement's missing condition: its `WHERE`, else its
/// `DO UPDATE` / `ON DUPLICATE KEY UPDATE` part, else the whole statement.
pub fn condition_span(st: &Statement) -> Span {
    st.filter
        .as_ref()
        .map(|f| f.span)
        .or(st.upsert_span)
        .unwrap_or(st.span)
}

/// The first line of a statement that starts with its own verb (`UPDATE jobs`, `DELETE FROM
/// locks ..`, an ORM chain): where a finding about the statement as a whole points, so a long
/// statement is reported where it starts and the clause the finding is about is shown as a
/// related location. `None` for a statement that starts with a `WITH` query, whose first line
/// is not the write.
pub fn statement_head(file: &FileIr, st: &Statement) -> Option<Span> {
    let text = file.file.text.get(st.span.start..st.span.end)?;
    let line = text.find('\n').map_or(text, |n| &text[..n]).trim_end();
    let verb = line.split(|c: char| !c.is_ascii_alphabetic()).next()?;
    if line.is_empty() || verb.eq_ignore_ascii_case("with") {
        return None;
    }
    Some(Span::new(st.span.start, st.span.start + line.len()))
}

/// The first line of a statement when the condition a finding is about starts on a later
/// line: the statement is then shown where it starts, and the condition as a related location.
/// `None` for a statement whose condition is on its first line (shown at the condition).
pub fn head_above(file: &FileIr, st: &Statement, condition: Span) -> Option<Span> {
    statement_head(file, st).filter(|h| condition.start > h.end)
}

/// A diagnostic at a span of a file.
pub fn sql_diagnostic(
    info: &'static RuleInfo,
    file: &FileIr,
    span: Span,
    label: impl Into<String>,
    message: String,
    help: String,
) -> Diagnostic {
    Diagnostic {
        rule: info.name,
        severity: info.severity,
        primary: Location::new(file.file.clone(), span),
        label: label.into(),
        message,
        help,
        related: Vec::new(),
        fix: None,
    }
}

pub fn related(file: &FileIr, span: Span, label: impl Into<String>) -> Related {
    Related {
        location: Location::new(file.file.clone(), span),
        label: label.into(),
    }
}

/// Downgrade a finding to a warning.
pub fn warning(mut d: Diagnostic) -> Diagnostic {
    d.severity = Severity::Warning;
    d
}

/// A fix that inserts `text` at file offset `at` inside a statement's SQL. Inside a Rust
/// string literal the text must not need escaping; when it would, the fix is only shown.
pub fn sql_insert_fix(
    file: &FileIr,
    st: &Statement,
    at: usize,
    text: &str,
    message: String,
    applicability: locklint_ir::diagnostic::Applicability,
) -> Option<locklint_ir::diagnostic::Fix> {
    sql_edit_fix(file, st, Span::new(at, at), text, message, applicability)
}

/// The display-only fix that adds `AND <owner> = $n` (the next free placeholder) at the end
/// of a statement's `WHERE` (`filter`); `why` says what the condition does, the condition
/// is shown after it.
pub fn owner_check_fix(
    file: &FileIr,
    st: &Statement,
    filter: Span,
    owner: &str,
    why: &str,
    bind: &str,
) -> Option<locklint_ir::diagnostic::Fix> {
    let text = format!(" AND {owner} = {}", st.placeholders.next());
    sql_insert_fix(
        file,
        st,
        end_before_semicolon(file, filter),
        &text,
        format!("{why} (`{}`), and bind {bind}", text.trim()),
        locklint_ir::diagnostic::Applicability::DisplayOnly,
    )
}

/// A fix that replaces `span` (inside a statement's SQL) with `text`; see [`sql_insert_fix`].
pub fn sql_edit_fix(
    file: &FileIr,
    st: &Statement,
    span: Span,
    text: &str,
    message: String,
    applicability: locklint_ir::diagnostic::Applicability,
) -> Option<locklint_ir::diagnostic::Fix> {
    use locklint_ir::diagnostic::{Applicability, Edit, Fix};
    let emb = file.embedded.get(st.embedded)?;
    // a statement read from an ORM call chain has no SQL text to edit
    if emb.is_orm() || span.start < emb.span.start || span.end > emb.span.end {
        return None;
    }
    let mut applicability = applicability;
    // no fix on a `MERGE` is proven against a server: shown only
    if st.merge {
        applicability = Applicability::DisplayOnly;
    }
    if emb.origin != Origin::File {
        let literal = file
            .file
            .text
            .get(emb.span.start..emb.span.end)
            .unwrap_or("");
        let raw = literal.starts_with('r') || literal.starts_with("br");
        let needs_escape = text.contains('"') || (!raw && text.contains('\\'));
        // a literal assembled from pieces (`concat!`) or with the insertion point outside
        // its quotes cannot take the text as is
        if needs_escape || !(literal.ends_with('"') || literal.ends_with('#')) {
            applicability = Applicability::DisplayOnly;
        }
    }
    Some(Fix {
        message,
        applicability,
        edits: vec![Edit {
            location: Location::new(file.file.clone(), span),
            replacement: text.to_string(),
        }],
    })
}

/// The end of a statement part in the file, before a trailing `;`.
pub fn end_before_semicolon(file: &FileIr, span: Span) -> usize {
    let text = file.file.text.get(span.start..span.end).unwrap_or("");
    let trimmed = text.trim_end();
    let trimmed = trimmed.strip_suffix(';').unwrap_or(trimmed).trim_end();
    span.start + trimmed.len()
}

/// Edits that take PostgreSQL parameter `$n` out of a statement run from Rust: remove its
/// bound argument and renumber the later parameters. `None` unless the statement is written
/// at its call, uses `$n` exactly once, and every parameter it uses has a visible bind.
pub fn drop_parameter(
    file: &FileIr,
    st: &Statement,
    n: usize,
) -> Option<Vec<locklint_ir::diagnostic::Edit>> {
    use locklint_ir::diagnostic::Edit;
    let emb = file.embedded.get(st.embedded)?;
    let binds = emb.exec.as_ref()?.binds.as_ref()?;
    let remove = *binds.get(n.checked_sub(1)?)?;
    if file.sql.dollar_quoted(st.embedded) {
        return None;
    }
    let params = file.sql.params(st.embedded);
    let highest = params.iter().map(|p| p.n).max()?;
    if highest != binds.len() || params.iter().filter(|p| p.n == n).count() != 1 {
        return None;
    }
    let mut edits = vec![Edit {
        location: Location::new(file.file.clone(), remove),
        replacement: String::new(),
    }];
    for p in params.iter().filter(|p| p.n > n) {
        edits.push(Edit {
            location: Location::new(file.file.clone(), emb.map.span(p.start, p.end)),
            replacement: format!("${}", p.n - 1),
        });
    }
    Some(edits)
}
