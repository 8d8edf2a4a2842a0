//! Answers to requests about a document, computed from one finished analysis of it: code
//! actions, hover, the `locklint.fixAll` and `locklint.explain` commands.

use super::analysis::{Analysis, Others};
use super::convert::{self, Uris};
use crate::diagnostic::Applicability;
use serde_json::{json, Value};
use std::path::Path;

/// The code action kind that applies every safe fix of a file.
pub const FIX_ALL_KIND: &str = "source.fixAll.locklint";

/// A request's params were not what the method takes (answered with InvalidParams).
pub type Invalid = String;

/// The byte offset in the analysed text of an LSP position.
fn offset(analysis: &Analysis, pos: &Value) -> Result<usize, Invalid> {
    let line = pos.get("line").and_then(Value::as_u64);
    let character = pos.get("character").and_then(Value::as_u64);
    let (Some(line), Some(character)) = (line, character) else {
        return Err(format!("not a position: {pos}"));
    };
    let file = &analysis.file;
    let line = usize::try_from(line).unwrap_or(usize::MAX);
    let character = usize::try_from(character).unwrap_or(usize::MAX);
    Ok(file.lines.utf16_offset(&file.text, line, character).0)
}

/// `textDocument/codeAction`: each fix of a finding in the range and its documentation; with
/// `only: ["source.fixAll.locklint"]`, every safe fix at once.
pub fn code_actions(
    params: &Value,
    analysis: &Analysis,
    root: Option<&Path>,
    others: &Others,
    uris: &Uris,
) -> Result<Value, Invalid> {
    let start = offset(analysis, &params["range"]["start"])?;
    let end = offset(analysis, &params["range"]["end"])?;
    let only: Vec<&str> = params["context"]["only"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let wants = |kind: &str| only.is_empty() || only.iter().any(|o| kind.starts_with(o));
    let findings = &analysis.findings;
    let mut actions = Vec::new();
    if wants("quickfix") {
        for d in findings
            .iter()
            .filter(|d| d.primary.span.start <= end && start <= d.primary.span.end)
        {
            let diagnostic = convert::diagnostic(d, uris);
            if let Some(fix) = d
                .fix
                .as_ref()
                .filter(|f| f.applicability != Applicability::DisplayOnly)
            {
                let unsafe_note = if fix.applicability == Applicability::Unsafe {
                    " (review: unsafe fix)"
                } else {
                    ""
                };
                actions.push(json!({
                    "title": format!("{}{unsafe_note}", fix.message),
                    "kind": "quickfix",
                    "isPreferred": fix.applicability == Applicability::Safe,
                    "diagnostics": [diagnostic],
                    "edit": convert::workspace_edit(&[fix], uris),
                }));
            }
            actions.push(json!({
                "title": format!("Show documentation for {}", d.rule),
                "kind": "quickfix",
                "diagnostics": [diagnostic],
                "command": { "title": "Show documentation", "command": "locklint.explain", "arguments": [d.rule] },
            }));
        }
    }
    if wants(FIX_ALL_KIND) && !only.is_empty() {
        if let (_, Some(edit)) = fix_all_edit(analysis, root, others, uris) {
            actions.push(json!({
                "title": "Fix all safe locklint findings",
                "kind": FIX_ALL_KIND,
                "edit": edit,
            }));
        }
    }
    Ok(Value::Array(actions))
}

/// `textDocument/hover`: the rule's page for the finding under the cursor.
pub fn hover(params: &Value, analysis: &Analysis) -> Result<Value, Invalid> {
    let at = offset(analysis, &params["position"])?;
    let Some(d) = analysis
        .findings
        .iter()
        .find(|d| d.primary.span.start <= at && at <= d.primary.span.end)
    else {
        return Ok(Value::Null);
    };
    let doc = crate::rules::find(d.rule).map(|i| i.doc).unwrap_or("");
    Ok(json!({
        "contents": { "kind": "markdown", "value": format!("**locklint: {}** — {}\n\n{doc}", d.rule, d.message) },
        "range": convert::range(&analysis.file, d.primary.span),
    }))
}

/// Every safe fix of the document, applied as `--fix` applies them (see
/// [`super::analysis::fix_all`]): how many, and the workspace edit that makes the change (one
/// text edit over the part of the document that changes).
pub fn fix_all_edit(
    analysis: &Analysis,
    root: Option<&Path>,
    others: &Others,
    uris: &Uris,
) -> (usize, Option<Value>) {
    let file = &analysis.file;
    let (count, new) = super::analysis::fix_all(&file.path, &file.text, root, others);
    let Some(new) = new else {
        return (0, None);
    };
    let (span, replacement) = changed_part(&file.text, &new);
    let edit = json!({ "changes": { uris.of(&file.path): [{
        "range": convert::range(file, span),
        "newText": replacement,
    }] } });
    (count, Some(edit))
}

/// The part of `old` that differs from `new` (common start and end left out, on character
/// boundaries) and what replaces it.
fn changed_part<'n>(old: &str, new: &'n str) -> (crate::source::Span, &'n str) {
    let prefix: usize = old
        .chars()
        .zip(new.chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum();
    let suffix: usize = old[prefix..]
        .chars()
        .rev()
        .zip(new[prefix..].chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum();
    (
        crate::source::Span::new(prefix, old.len() - suffix),
        &new[prefix..new.len() - suffix],
    )
}

/// `locklint.fixAll`: the number of safe fixes, and the edit to ask the client to apply.
pub fn fix_all(
    analysis: &Analysis,
    root: Option<&Path>,
    others: &Others,
    uris: &Uris,
) -> (Value, Option<Value>) {
    let (count, edit) = fix_all_edit(analysis, root, others, uris);
    let edit = edit.map(|e| json!({ "label": "locklint: fix all", "edit": e }));
    (json!(count), edit)
}

/// `locklint.explain`: a rule's page.
pub fn explain(args: &[Value]) -> Value {
    let rule = args.first().and_then(Value::as_str).unwrap_or("");
    crate::rules::find(rule)
        .map(|i| Value::String(i.doc.to_string()))
        .unwrap_or(Value::Null)
}
