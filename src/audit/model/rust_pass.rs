//! The audit's own passes over Rust files with `syn` (questions the engine's intermediate
//! form does not keep the answer to): run on the analysis threads' large stack, one file at a
//! time, only over the files a pass asks for.

use crate::ir::FileIr;
use crate::source::SourceFile;

/// `pass` over every file `wanted` selects (the others get `T::default()`), by index in
/// `files`. Files the engine could not parse are skipped (among them those its depth guard
/// refused: nothing of them was analysed), and files that do not parse.
pub(super) fn per_file<T: Default + Clone + Send>(
    files: &[FileIr],
    wanted: impl Fn(&FileIr) -> bool + Sync,
    pass: impl Fn(&SourceFile, &syn::File) -> T + Sync,
) -> Vec<T> {
    let work = || {
        files
            .iter()
            .map(|f| {
                if (f.functions.is_empty() && !f.problems.is_empty()) || !wanted(f) {
                    return T::default();
                }
                let Ok(parsed) = syn::parse_file(&f.file.text) else {
                    return T::default();
                };
                let out = pass(&f.file, &parsed);
                // the spans of this parse are no longer needed
                proc_macro2::extra::invalidate_current_thread_spans();
                out
            })
            .collect()
    };
    crate::engine::on_large_stack(work).unwrap_or_else(|| vec![T::default(); files.len()])
}

/// The byte offset of a `syn` span's start in `file`.
pub(super) fn offset(file: &SourceFile, span: proc_macro2::Span) -> usize {
    let s = span.start();
    file.lines.offset(&file.text, s.line, s.column)
}

/// The byte offset of a `syn` span's end in `file`.
pub(super) fn end_offset(file: &SourceFile, span: proc_macro2::Span) -> usize {
    let e = span.end();
    file.lines.offset(&file.text, e.line, e.column)
}
