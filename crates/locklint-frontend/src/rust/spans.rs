//! proc-macro2 spans to byte spans of the file.

use locklint_ir::source::{SourceFile, Span};

pub fn to_span(file: &SourceFile, span: proc_macro2::Span) -> Span {
    let s = span.start();
    let e = span.end();
    let start = file.lines.offset(&file.text, s.line, s.column);
    let end = file.lines.offset(&file.text, e.line, e.column);
    Span::new(start, end)
}

/// Span of anything syn can locate.
pub fn of<T: syn::spanned::Spanned>(file: &SourceFile, node: &T) -> Span {
    to_span(file, node.span())
}
