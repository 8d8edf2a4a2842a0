//! Findings for what could not be analysed: a parse problem a front-end reported, or a step
//! whose panic `isolate::catch` caught (`parse-error`).

use super::PARSE_ERROR;
use locklint_ir::diagnostic::{Diagnostic, Location};
use locklint_ir::isolate;
use locklint_ir::source::FileRef;
use locklint_ir::ParseProblem;

/// The `parse-error` finding for a problem reading `file`.
pub fn finding(file: &FileRef, p: &ParseProblem) -> Diagnostic {
    Diagnostic {
        rule: PARSE_ERROR.name,
        severity: PARSE_ERROR.severity,
        primary: Location::new(file.clone(), p.span),
        label: "not analysed".to_string(),
        message: p.message.clone(),
        help: p.help.clone(),
        related: Vec::new(),
        fix: None,
    }
}

/// The finding for a whole file whose analysis panicked.
pub fn file_finding(file: &FileRef, message: &str) -> Diagnostic {
    finding(file, &isolate::file_problem(file, message))
}

/// Whether a finding stands for a caught panic (made by [`isolate::problem`] or
/// [`file_finding`]).
pub fn is_caught(d: &Diagnostic) -> bool {
    d.rule == PARSE_ERROR.name && d.help == isolate::HELP
}
