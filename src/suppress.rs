//! Suppression comments: `// locklint: allow(rule, ...) -- reason` on a finding's line or on
//! its own line above the statement, `// locklint: allow-file(rule) -- reason` for a whole
//! file (`--` comments in `.sql` and `.lua` files). Only real comment tokens count, never text
//! inside string literals. Suppressions without a reason, suppressions that suppress nothing
//! and unknown rule names are reported.

use crate::diagnostic::{Applicability, Diagnostic, Edit, Fix, Location};
use crate::frontend::lua::lex as lua_lex;
use crate::frontend::sql::lex as sql_lex;
use crate::ir::FileIr;
use crate::rules::{self, RuleInfo, UNKNOWN_RULE, UNUSED, WITHOUT_REASON};
use crate::source::{FileRef, Span};
use std::collections::{HashMap, HashSet};

/// A comment token: its span and text (without the comment markers).
#[derive(Debug, Clone)]
struct Comment {
    span: Span,
    body: String,
    /// Code precedes the comment on its line.
    trailing: bool,
}

/// The scope a suppression covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Lines `first..=last` (1-based).
    Lines(usize, usize),
    File,
}

#[derive(Debug, Clone)]
struct Suppression {
    comment: Comment,
    /// Rule names with their spans in the file.
    rules: Vec<(String, Span)>,
    reason: bool,
    scope: Scope,
    used: Vec<bool>,
}

/// Statement extents and comments of one file.
struct Lexed {
    comments: Vec<Comment>,
    /// Line ranges of statements, by their first line.
    statements: Vec<(usize, usize)>,
}

fn line_of(file: &FileRef, offset: usize) -> usize {
    file.line_col(offset).line
}

/// Rust comments and statement extents, from the rustc lexer.
fn lex_rust(file: &FileRef) -> Lexed {
    use ra_ap_rustc_lexer::{tokenize, FrontmatterAllowed, TokenKind as K};
    let text = &file.text;
    let mut comments = Vec::new();
    let mut code: Vec<(usize, K)> = Vec::new();
    let mut pos = 0usize;
    let mut last_code_line = 0usize;
    for t in tokenize(text, FrontmatterAllowed::No) {
        let start = pos;
        pos += t.len as usize;
        match t.kind {
            K::LineComment { doc_style: None }
            | K::BlockComment {
                doc_style: None, ..
            } => {
                let raw = &text[start..pos];
                let body = raw
                    .strip_prefix("//")
                    .or_else(|| raw.strip_prefix("/*").map(|b| b.trim_end_matches("*/")))
                    .unwrap_or(raw)
                    .to_string();
                let line = line_of(file, start);
                comments.push(Comment {
                    span: Span::new(start, pos),
                    body,
                    trailing: last_code_line == line,
                });
            }
            K::Whitespace | K::LineComment { .. } | K::BlockComment { .. } => {}
            kind => {
                last_code_line = line_of(file, pos.saturating_sub(1).max(start));
                code.push((start, kind));
            }
        }
    }
    let statements = statements(
        file,
        &code,
        &comments,
        |k| match k {
            K::OpenParen | K::OpenBrace | K::OpenBracket => 1,
            K::CloseParen | K::CloseBrace | K::CloseBracket => -1,
            _ => 0,
        },
        |k| *k == K::Semi,
        |k| *k == K::CloseBrace,
    );
    Lexed {
        comments,
        statements,
    }
}

/// Statement extents from code tokens: from a token to the `;` (or block end) that closes it,
/// for the statements that start below a comment on its own line (the ones a suppression
/// comment there may cover).
fn statements<T>(
    file: &FileRef,
    code: &[(usize, T)],
    comments: &[Comment],
    depth_of: impl Fn(&T) -> i32,
    is_semi: impl Fn(&T) -> bool,
    is_close_brace: impl Fn(&T) -> bool,
) -> Vec<(usize, usize)> {
    let lines: Vec<usize> = code.iter().map(|(at, _)| line_of(file, *at)).collect();
    let mut starts: Vec<usize> = comments
        .iter()
        .filter(|c| !c.trailing && c.body.contains("locklint:"))
        .map(|c| lines.partition_point(|&l| l <= line_of(file, c.span.start)))
        .filter(|&i| i < code.len())
        .collect();
    starts.sort_unstable();
    starts.dedup();
    let mut out = Vec::new();
    for i in starts {
        let first = lines[i];
        let mut depth = 0i32;
        let mut last = first;
        for (j, (_, kind)) in code.iter().enumerate().skip(i) {
            depth += depth_of(kind);
            last = lines[j];
            if depth < 0 {
                break;
            }
            if depth == 0 && is_semi(kind) {
                break;
            }
            if depth == 0 && is_close_brace(kind) {
                // `} else {`, `}.await`, `})?` continue the statement
                let next_continues = code.get(j + 1).is_some_and(|(n, k)| {
                    let t = &file.text[*n..];
                    depth_of(k) < 0
                        || t.starts_with("else")
                        || t.starts_with('.')
                        || t.starts_with('?')
                });
                if !next_continues {
                    break;
                }
            }
            if last > first + 400 {
                break;
            }
        }
        out.push((first, last));
    }
    out
}

/// SQL comments and statement extents, from the SQL lexer (`--` and `/* */` comments;
/// quotes, quoted identifiers and dollar quotes skipped).
fn lex_sql(file: &FileRef) -> Lexed {
    let text = &file.text;
    // code tokens as (start, end, the character that matters for statement extents)
    let code: Vec<(usize, usize, u8)> = sql_lex::tokens(text)
        .iter()
        .map(|t| {
            let first = text.as_bytes()[t.start];
            let kind = if t.kind == sql_lex::TokenKind::Punct {
                first
            } else {
                b'x'
            };
            (t.start, t.end, kind)
        })
        .collect();
    let comments = sql_lex::comments(text);
    lexed_dash(file, &comments, &code)
}

/// Lua comments and statement extents, from the Lua scanner (`--` and `--[[ ]]` comments;
/// strings and long strings skipped).
fn lex_lua(file: &FileRef) -> Lexed {
    let text = &file.text;
    let mut comments = Vec::new();
    let mut code: Vec<(usize, usize, u8)> = Vec::new();
    lua_lex::scan(text, |t| {
        match t {
            lua_lex::Tok::Comment(s, e) => comments.push((s, e)),
            lua_lex::Tok::Open(i) => code.push((i, i + 1, b'(')),
            lua_lex::Tok::Close(i) => code.push((i, i + 1, b')')),
            lua_lex::Tok::Punct(i) | lua_lex::Tok::Stray(i) => {
                code.push((i, i + 1, text.as_bytes()[i]))
            }
            lua_lex::Tok::Word(s, e) => code.push((s, e, b'x')),
            // a value is known by its end
            lua_lex::Tok::Value(e) => code.push((e.saturating_sub(1), e, b'x')),
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    lexed_dash(file, &comments, &code)
}

/// Comments (a `--` or `/*` opener of two bytes) and statement extents of a SQL or Lua text,
/// from its code tokens and comment ranges, both in text order.
fn lexed_dash(file: &FileRef, ranges: &[(usize, usize)], code: &[(usize, usize, u8)]) -> Lexed {
    let text = &file.text;
    let comments: Vec<Comment> = ranges
        .iter()
        .map(|&(start, end)| {
            let line = line_of(file, start);
            // code before the comment on its line (a token ending on that line)
            let before = code.partition_point(|&(s, _, _)| s < start);
            let trailing =
                before > 0 && line_of(file, code[before - 1].1.saturating_sub(1)) == line;
            Comment {
                span: Span::new(start, end),
                body: text.get(start + 2..end).unwrap_or("").to_string(),
                trailing,
            }
        })
        .collect();
    let code: Vec<(usize, u8)> = code.iter().map(|&(s, _, k)| (s, k)).collect();
    let statements = statements(
        file,
        &code,
        &comments,
        |k| match k {
            b'(' => 1,
            b')' => -1,
            _ => 0,
        },
        |k| *k == b';',
        |_| false,
    );
    Lexed {
        comments,
        statements,
    }
}

/// Parse `locklint: allow(a, b) -- reason` / `locklint: allow-file(a) -- reason`.
fn parse(file: &FileRef, c: &Comment, statements: &[(usize, usize)]) -> Option<Suppression> {
    let body = c.body.trim_start_matches(['/', '*', '!', ' ', '\t']);
    let rest = body.strip_prefix("locklint:")?.trim_start();
    let (file_level, rest) = if let Some(r) = rest.strip_prefix("allow-file(") {
        (true, r)
    } else if let Some(r) = rest.strip_prefix("allow(") {
        (false, r)
    } else {
        return None;
    };
    let close = rest.find(')')?;
    let list = &rest[..close];
    let after = rest[close + 1..].trim();
    let reason = after
        .strip_prefix("--")
        .is_some_and(|r| !r.trim().trim_end_matches("*/").trim().is_empty());
    // offsets of the rule names inside the file
    let opener = if file_level { "allow-file(" } else { "allow(" };
    let list_at = file.text[c.span.start..c.span.end]
        .find(opener)
        .map(|i| c.span.start + i + opener.len())
        .unwrap_or(c.span.start);
    let mut rules = Vec::new();
    let mut offset = 0;
    for part in list.split(',') {
        let name = part.trim();
        let at = list_at + offset + part.find(name).unwrap_or(0);
        offset += part.len() + 1;
        if !name.is_empty() {
            rules.push((name.to_string(), Span::new(at, at + name.len())));
        }
    }
    let line = line_of(file, c.span.start);
    let scope = if file_level {
        Scope::File
    } else if c.trailing {
        Scope::Lines(line, line)
    } else {
        // the statement starting on the next code line below (other comments may sit between)
        statements
            .get(statements.partition_point(|(first, _)| *first <= line))
            .map(|&(first, last)| Scope::Lines(first, last))
            .unwrap_or(Scope::Lines(line + 1, line + 1))
    };
    let n = rules.len();
    Some(Suppression {
        comment: c.clone(),
        rules,
        reason,
        scope,
        used: vec![false; n],
    })
}

/// Whether `file` holds a suppression comment.
pub(crate) fn suppresses(file: &FileRef) -> bool {
    !suppressions(file).is_empty()
}

fn suppressions(file: &FileRef) -> Vec<Suppression> {
    if !file.text.contains("locklint:") {
        return Vec::new();
    }
    let lexed = match file.path.extension().and_then(|e| e.to_str()) {
        Some("sql") => lex_sql(file),
        Some("lua") => lex_lua(file),
        _ => lex_rust(file),
    };
    lexed
        .comments
        .iter()
        .filter_map(|c| parse(file, c, &lexed.statements))
        .collect()
}

/// The span an `unused-suppression` fix deletes: the whole line for a comment on its own line.
fn removal(file: &FileRef, c: &Comment) -> Span {
    let text = &file.text;
    if c.trailing {
        let start = text[..c.span.start].trim_end_matches([' ', '\t']).len();
        return Span::new(start, c.span.end);
    }
    let line_start = file.line_span(c.span.start).start;
    let line_end = (file.line_span(c.span.end).end + 1).min(text.len());
    Span::new(line_start, line_end)
}

fn meta(
    info: &'static RuleInfo,
    file: &FileRef,
    span: Span,
    label: &str,
    message: String,
    help: &str,
) -> Diagnostic {
    Diagnostic {
        rule: info.name,
        severity: info.severity,
        primary: Location::new(file.clone(), span),
        label: label.to_string(),
        message,
        help: help.to_string(),
        related: Vec::new(),
        fix: None,
    }
}

/// Remove suppressed findings and report problems with the suppressions themselves.
/// `ran` tells whether a rule ran in this analysis (a suppression of a rule that did not run
/// is not called unused).
pub fn apply(
    files: &[FileIr],
    findings: Vec<Diagnostic>,
    ran: &dyn Fn(&str) -> bool,
) -> Vec<Diagnostic> {
    let known: HashSet<&str> = rules::infos().iter().map(|i| i.name).collect();
    // a file that did not parse (in part) has findings nobody looked for: its suppressions
    // are never called unused, or a fix would delete them
    let mut by_file: Vec<(FileRef, Vec<Suppression>, bool)> = files
        .iter()
        .map(|f| (f.file.clone(), suppressions(&f.file), f.problems.is_empty()))
        .filter(|(_, s, _)| !s.is_empty())
        .collect();
    // per file: which suppressions cover each line (file-wide ones under line 0), in order
    let mut covering: HashMap<std::path::PathBuf, (usize, HashMap<usize, Vec<usize>>)> =
        HashMap::new();
    for (fi, (file, sups, _)) in by_file.iter().enumerate() {
        let mut lines: HashMap<usize, Vec<usize>> = HashMap::new();
        for (si, s) in sups.iter().enumerate() {
            match s.scope {
                Scope::File => lines.entry(0).or_default().push(si),
                Scope::Lines(a, b) => {
                    for l in a..=b {
                        lines.entry(l).or_default().push(si);
                    }
                }
            }
        }
        covering.insert(file.path.clone(), (fi, lines));
    }
    let mut kept = Vec::with_capacity(findings.len());
    for d in findings {
        if let Some((fi, lines)) = covering.get(&d.primary.file.path) {
            let line = d.primary.start().line;
            let mut candidates: Vec<usize> = lines
                .get(&0)
                .into_iter()
                .chain(lines.get(&line))
                .flatten()
                .copied()
                .collect();
            candidates.sort_unstable();
            let sups = &mut by_file[*fi].1;
            let hit = candidates.into_iter().find_map(|si| {
                let i = sups[si].rules.iter().position(|(r, _)| r == d.rule)?;
                Some((si, i))
            });
            if let Some((si, i)) = hit {
                sups[si].used[i] = true;
                continue;
            }
        }
        kept.push(d);
    }
    for (file, sups, parsed) in &by_file {
        for s in sups {
            if !s.reason && ran(WITHOUT_REASON.name) {
                kept.push(meta(
                    &WITHOUT_REASON,
                    file,
                    s.comment.span,
                    "no reason given",
                    "this suppression does not say why the finding is acceptable".to_string(),
                    "add the reason after `--`: `// locklint: allow(rule) -- why this is safe here`",
                ));
            }
            for (i, (name, span)) in s.rules.iter().enumerate() {
                if !known.contains(name.as_str()) {
                    if ran(UNKNOWN_RULE.name) {
                        let hint =
                            crate::rules::validate(std::slice::from_ref(name), "this suppression")
                                .err()
                                .unwrap_or_default();
                        kept.push(meta(
                            &UNKNOWN_RULE,
                            file,
                            *span,
                            "unknown rule",
                            format!("`{name}` is not a locklint rule, so this suppression has no effect"),
                            &hint,
                        ));
                    }
                    continue;
                }
                if !s.used[i] && *parsed && ran(name) && ran(UNUSED.name) {
                    let mut d = meta(
                        &UNUSED,
                        file,
                        *span,
                        "suppresses nothing",
                        format!("this suppression of `{name}` matches no finding"),
                        "remove the suppression (the defect it covered is gone or it is in the wrong place)",
                    );
                    if s.rules.len() == 1 {
                        d.fix = Some(Fix {
                            message: "remove the unused suppression".to_string(),
                            applicability: Applicability::Safe,
                            edits: vec![Edit {
                                location: Location::new(file.clone(), removal(file, &s.comment)),
                                replacement: String::new(),
                            }],
                        });
                    }
                    kept.push(d);
                }
            }
        }
    }
    kept.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    kept
}

/// The multi-line string literals and block comments of a Rust file, in text order: a
/// finding inside one (embedded SQL or Lua) gets its comment above the token. Lexed once per
/// file, however many findings it has.
fn multi_line_tokens(file: &FileRef) -> Vec<Span> {
    use ra_ap_rustc_lexer::{tokenize, FrontmatterAllowed, TokenKind as K};
    if file.path.extension().and_then(|e| e.to_str()) != Some("rs") {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut pos = 0usize;
    for t in tokenize(&file.text, FrontmatterAllowed::No) {
        let start = pos;
        pos += t.len as usize;
        if matches!(t.kind, K::Literal { .. } | K::BlockComment { .. })
            && file.text[start..pos].contains('\n')
        {
            out.push(Span::new(start, pos));
        }
    }
    out
}

/// Start of the token of `tokens` (from [`multi_line_tokens`]) that contains `offset` past
/// its first byte, if any.
fn literal_around(tokens: &[Span], offset: usize) -> Option<usize> {
    let i = tokens
        .partition_point(|t| t.start < offset)
        .checked_sub(1)?;
    (offset < tokens[i].end).then_some(tokens[i].start)
}

/// Edits that insert a suppression (with `reason`) above every finding, one comment per line
/// naming all rules found there, indented like the line. Grouped by file.
pub fn insertions(findings: &[Diagnostic], reason: &str) -> Vec<(FileRef, Vec<(Span, String)>)> {
    /// One file's insertions: offsets with the rules found on that line, in the order first
    /// seen, the index of each offset, and the file's multi-line tokens once lexed.
    struct PerFile {
        file: FileRef,
        lines: Vec<(usize, Vec<&'static str>)>,
        by_start: HashMap<usize, usize>,
        tokens: Option<Vec<Span>>,
    }
    let mut out: Vec<PerFile> = Vec::new();
    let mut by_path: HashMap<&std::path::Path, usize> = HashMap::new();
    for d in findings {
        if matches!(
            d.rule,
            "suppression-without-reason" | "unused-suppression" | "suppression-unknown-rule"
        ) {
            continue;
        }
        let file = &d.primary.file;
        let fi = *by_path.entry(file.path.as_path()).or_insert_with(|| {
            out.push(PerFile {
                file: file.clone(),
                lines: Vec::new(),
                by_start: HashMap::new(),
                tokens: None,
            });
            out.len() - 1
        });
        let entry = &mut out[fi];
        let text = &entry.file.text;
        let mut at = d.primary.span.start.min(text.len());
        // a finding inside a multi-line string (embedded SQL or Lua): comment above the literal
        let tokens = entry
            .tokens
            .get_or_insert_with(|| multi_line_tokens(&entry.file));
        if let Some(lit) = literal_around(tokens, at) {
            at = lit;
        }
        let line_start = entry.file.line_span(at).start;
        match entry.by_start.get(&line_start) {
            Some(&li) => {
                let rules = &mut entry.lines[li].1;
                if !rules.contains(&d.rule) {
                    rules.push(d.rule);
                }
            }
            None => {
                entry.by_start.insert(line_start, entry.lines.len());
                entry.lines.push((line_start, vec![d.rule]));
            }
        }
    }
    out.into_iter()
        .map(|PerFile { file, lines, .. }| {
            let dash = matches!(
                file.path.extension().and_then(|e| e.to_str()),
                Some("sql") | Some("lua")
            );
            let edits = lines
                .into_iter()
                .map(|(at, rules)| {
                    let indent: String = file.text[at..]
                        .chars()
                        .take_while(|c| *c == ' ' || *c == '\t')
                        .collect();
                    let marker = if dash { "--" } else { "//" };
                    (
                        Span::new(at, at),
                        format!(
                            "{indent}{marker} locklint: allow({}) -- {reason}\n",
                            rules.join(", ")
                        ),
                    )
                })
                .collect();
            (file, edits)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;
    use std::path::PathBuf;

    fn finding(file: &FileRef, rule: &'static str, at: usize) -> Diagnostic {
        let mut d = meta(
            &WITHOUT_REASON,
            file,
            Span::new(at, at + 1),
            "",
            String::new(),
            "",
        );
        d.rule = rule;
        d
    }

    /// Where a finding's comment goes, worked out alone: the start of the line holding the
    /// finding, or holding the start of the multi-line literal or block comment around it.
    fn line_alone(text: &str, offset: usize) -> usize {
        use ra_ap_rustc_lexer::{tokenize, FrontmatterAllowed, TokenKind as K};
        let mut at = offset;
        let mut pos = 0;
        for t in tokenize(text, FrontmatterAllowed::No) {
            let start = pos;
            pos += t.len as usize;
            if start < offset && offset < pos {
                if matches!(t.kind, K::Literal { .. } | K::BlockComment { .. })
                    && text[start..pos].contains('\n')
                {
                    at = start;
                }
                break;
            }
        }
        text[..at].rfind('\n').map_or(0, |i| i + 1)
    }

    const TEXT: &str = "fn f(con: &mut C) {
    let a = con.set_nx(\"lock:a\", \"1\"); let b = con.set_nx(\"lock:b\", \"1\");
    sqlx::query(\"UPDATE jobs
        SET owner = 1
        WHERE id = 2\").execute(&pool);
    /* a comment
       over lines */
    let one_line = \"UPDATE t SET a = 1\";
        tabbed();
}
";

    #[test]
    fn each_line_gets_one_comment_naming_every_rule_found_there() {
        let file = SourceFile::new(PathBuf::from("a.rs"), TEXT.to_string());
        let at = |s: &str| TEXT.find(s).unwrap();
        let findings = vec![
            finding(&file, "setnx-without-expiry", at("con.set_nx(\"lock:a")),
            finding(&file, "setnx-without-expiry", at("con.set_nx(\"lock:b")),
            finding(&file, "constant-lock-value", at("\"1\"); let b")),
            finding(&file, "unfenced-write", at("SET owner")),
            finding(&file, "lock-table-no-owner-check", at("WHERE id")),
            finding(&file, "unfenced-write", at("over lines")),
            finding(&file, "unfenced-write", at("SET a = 1")),
            finding(&file, "get-then-set", at("tabbed")),
            finding(&file, "unused-suppression", at("tabbed")),
        ];
        let out = insertions(&findings, "known");
        assert_eq!(out.len(), 1);
        let edits: Vec<(usize, &str)> = out[0]
            .1
            .iter()
            .map(|(s, r)| (s.start, r.as_str()))
            .collect();
        let line = |s: &str| TEXT[..at(s)].rfind('\n').unwrap() + 1;
        assert_eq!(
            edits,
            vec![
                (
                    line("let a"),
                    "    // locklint: allow(setnx-without-expiry, constant-lock-value) -- known\n"
                ),
                (
                    line("sqlx::query"),
                    "    // locklint: allow(unfenced-write, lock-table-no-owner-check) -- known\n"
                ),
                (
                    line("/* a comment"),
                    "    // locklint: allow(unfenced-write) -- known\n"
                ),
                (
                    line("let one_line"),
                    "    // locklint: allow(unfenced-write) -- known\n"
                ),
                (
                    line("tabbed"),
                    "        // locklint: allow(get-then-set) -- known\n"
                ),
            ]
        );
    }

    #[test]
    fn many_findings_land_where_each_would_alone() {
        let mut text = String::from("fn f(con: &mut C) {\n");
        for i in 0..300 {
            if i % 3 == 0 {
                text.push_str(&format!(
                    "    sqlx::query(\"UPDATE t{i}\n        SET a = 1\").execute(&p);\n"
                ));
            } else {
                text.push_str(&format!("    let _ = con.set_nx(\"lock:{i}\", \"1\");\n"));
            }
        }
        text.push_str("}\n");
        let file = SourceFile::new(PathBuf::from("big.rs"), text.clone());
        let offsets: Vec<usize> = text
            .match_indices("SET a")
            .chain(text.match_indices("set_nx"))
            .map(|(i, _)| i)
            .collect();
        let findings: Vec<Diagnostic> = offsets
            .iter()
            .map(|&o| finding(&file, "unfenced-write", o))
            .collect();
        let out = insertions(&findings, "r");
        let mut got: Vec<usize> = out[0].1.iter().map(|(s, _)| s.start).collect();
        let mut want: Vec<usize> = offsets.iter().map(|&o| line_alone(&text, o)).collect();
        want.dedup();
        assert_eq!(got.len(), 300);
        got.sort_unstable();
        want.sort_unstable();
        want.dedup();
        assert_eq!(got, want);
    }
}
