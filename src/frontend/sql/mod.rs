//! The SQL front-end: statements from `.sql` files and from SQL embedded in Rust.

use crate::ir::FileIr;

/// What the SQL front-end extracted from one file.
#[derive(Debug, Default)]
pub struct SqlIr {}

/// Parse the SQL texts of a file (`ir.embedded` with [`crate::ir::Language::Sql`]).
pub fn analyze(_ir: &mut FileIr) {}

/// Project-wide schema facts from every file's SQL.
#[derive(Debug, Default)]
pub struct Schema {}

/// Build the schema model from all files.
pub fn schema(_files: &[FileIr]) -> Schema {
    Schema::default()
}
