//! Front-ends: turn a source file into the intermediate form of [`locklint_ir`].
//!
//! Rust files go through [`rust`], which also collects SQL and Lua text embedded in string
//! literals; `.sql` and `.lua` files become one embedded text each. [`sql`] and [`lua`] then
//! parse every embedded text of the file.

pub mod lua;
pub mod prefilter;
pub mod rust;
pub mod sql;

use locklint_ir::source::{FileRef, Span};
use locklint_ir::Origin;
use locklint_ir::{Embedded, FileIr, Language, TextMap};

fn language(path: &std::path::Path) -> Option<Option<Language>> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("rs") => Some(None),
        Some("sql") => Some(Some(Language::Sql)),
        Some("lua") => Some(Some(Language::Lua)),
        _ => None,
    }
}

/// The file kinds locklint reads, by extension.
pub fn is_supported(path: &std::path::Path) -> bool {
    language(path).is_some()
}

/// Run the front-ends that fit the file.
pub fn analyze(index: usize, file: FileRef) -> FileIr {
    let mut ir = match language(&file.path) {
        Some(Some(lang)) => whole_file(file, lang),
        _ => rust::analyze(index, file),
    };
    sql::analyze(&mut ir);
    lua::analyze(&mut ir);
    ir
}

fn whole_file(file: FileRef, language: Language) -> FileIr {
    let embedded = Embedded {
        language,
        text: file.text.clone(),
        map: TextMap::identity(0),
        span: Span::new(0, file.text.len()),
        origin: Origin::File,
        func: None,
        exec: None,
        statement: None,
    };
    FileIr {
        embedded: vec![embedded],
        ..FileIr::new(file)
    }
}
