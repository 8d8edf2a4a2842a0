//! Front-ends: turn a source file into the intermediate form of [`crate::ir`].

pub mod rust;

use crate::ir::FileIr;
use crate::source::FileRef;

/// The file kinds locklint reads, by extension.
pub fn is_supported(path: &std::path::Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("rs"))
}

/// Run the front-end that fits the file.
pub fn analyze(index: usize, file: FileRef) -> FileIr {
    rust::analyze(index, file)
}
