//! Where a trace rule's findings go: kept in order for the engine, or handed over one at a
//! time as they are found. The engine's second look at a trace (to build the fixes of the
//! findings it kept, see [`crate::Fixes`]) keeps the fix of each finding and nothing else: a
//! trace of tens of thousands of findings would otherwise hold all of them a second time.

use locklint_ir::diagnostic::Diagnostic;

/// The findings of one rule step.
#[derive(Default)]
pub struct Findings<'a> {
    kept: Vec<Diagnostic>,
    each: Option<&'a mut dyn FnMut(Diagnostic)>,
}

impl<'a> Findings<'a> {
    /// Findings handed to `each` as they are found, none kept.
    pub fn each(each: &'a mut dyn FnMut(Diagnostic)) -> Self {
        Findings {
            kept: Vec::new(),
            each: Some(each),
        }
    }

    pub fn push(&mut self, d: Diagnostic) {
        match &mut self.each {
            Some(each) => each(d),
            None => self.kept.push(d),
        }
    }

    pub fn extend(&mut self, ds: impl IntoIterator<Item = Diagnostic>) {
        for d in ds {
            self.push(d);
        }
    }

    /// The findings kept, in the order they were found.
    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locklint_ir::diagnostic::{Location, Severity};
    use locklint_ir::source::{SourceFile, Span};

    fn finding(message: &str) -> Diagnostic {
        let file = SourceFile::new("a.rs".into(), "fn main() {}\n".to_string());
        Diagnostic {
            rule: "setnx-without-expiry",
            severity: Severity::Error,
            primary: Location::new(file, Span::new(0, 2)),
            label: String::new(),
            message: message.to_string(),
            help: String::new(),
            related: Vec::new(),
            fix: None,
        }
    }

    #[test]
    fn kept_findings_come_back_in_order() {
        let mut f = Findings::default();
        f.push(finding("a"));
        f.extend([finding("b"), finding("c")]);
        let messages: Vec<String> = f.into_vec().into_iter().map(|d| d.message).collect();
        assert_eq!(messages, ["a", "b", "c"]);
    }

    #[test]
    fn handed_findings_are_not_kept() {
        let mut seen = Vec::new();
        let mut each = |d: Diagnostic| seen.push(d.message);
        let mut f = Findings::each(&mut each);
        f.push(finding("a"));
        f.extend([finding("b")]);
        assert!(f.into_vec().is_empty());
        assert_eq!(seen, ["a", "b"]);
    }
}
