//! The key of an advisory-lock call whose arguments are bind parameters
//! (`pg_advisory_lock($1)`): the value bound to each `$n` (a literal, a const of any file),
//! and for a parameter of a wrapper function, the value each caller passes, caller by caller.

use super::callers::values;
pub(super) use super::callers::KeyOrigin;
use super::*;
use crate::ir::{FnId, KeyRef};

/// A value as SQL writes it: numbers as they are, anything else as a string literal.
pub(super) fn sql_value(text: &str) -> String {
    let numeric = text.strip_prefix('-').unwrap_or(text);
    if !numeric.is_empty() && numeric.chars().all(|c| c.is_ascii_digit()) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "''"))
    }
}

/// The ways the arguments of an advisory call resolve, given what the statement's
/// parameters are bound to (`bind_keys`, `$1` first) in function `func`.
pub(super) fn resolve<'a>(
    project: &Project<'a>,
    func: FnId,
    args: &str,
    bind_keys: &[KeyRef],
) -> Vec<KeyOrigin<'a>> {
    let unresolved = || {
        vec![KeyOrigin {
            args: None,
            fixed: false,
            via: Vec::new(),
        }]
    };
    let tokens = sql_lex::tokens(args);
    let params: Vec<(Span, usize)> = tokens
        .iter()
        .filter(|t| t.kind == sql_lex::TokenKind::Param)
        .filter_map(|t| {
            let text = args.get(t.start..t.end)?;
            Some((
                Span::new(t.start, t.end),
                text.strip_prefix('$')?.parse().ok()?,
            ))
        })
        .collect();
    let all_params = tokens
        .iter()
        .filter(|t| t.kind == sql_lex::TokenKind::Param)
        .count();
    if params.is_empty() || params.len() != all_params {
        return unresolved();
    }
    // one parameter may come through callers; several only as fixed values
    let mut per_param = Vec::new();
    for (_, n) in &params {
        let Some(key) = n.checked_sub(1).and_then(|i| bind_keys.get(i)) else {
            return unresolved();
        };
        per_param.push(values(project, func, key, sql_value));
    }
    let through_callers = per_param
        .iter()
        .filter(|v| v.iter().any(|o| !o.via.is_empty()))
        .count();
    if per_param.len() > 1 && through_callers > 0 {
        return unresolved();
    }
    let substitute = |chosen: &[&Option<String>]| -> Option<String> {
        let mut out = String::new();
        let mut last = 0;
        for ((span, _), v) in params.iter().zip(chosen) {
            out.push_str(args.get(last..span.start)?);
            out.push_str(v.as_deref()?);
            last = span.end;
        }
        out.push_str(args.get(last..)?);
        Some(out)
    };
    if per_param.len() == 1 {
        return per_param
            .remove(0)
            .into_iter()
            .map(|o| KeyOrigin {
                args: substitute(&[&o.args]),
                fixed: o.fixed,
                via: o.via,
            })
            .collect();
    }
    let chosen: Vec<&Option<String>> = per_param.iter().map(|v| &v[0].args).collect();
    let fixed = per_param.iter().all(|v| v[0].fixed);
    vec![KeyOrigin {
        args: substitute(&chosen),
        fixed,
        via: Vec::new(),
    }]
}

#[cfg(test)]
mod tests {
    use super::sql_value;

    #[test]
    fn values_are_written_as_sql() {
        assert_eq!(sql_value("7001"), "7001");
        assert_eq!(sql_value("-3"), "-3");
        assert_eq!(sql_value("jobs:nightly"), "'jobs:nightly'");
        assert_eq!(sql_value("o'neil"), "'o''neil'");
    }
}
