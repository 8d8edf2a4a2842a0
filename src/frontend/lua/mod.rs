//! The Lua front-end: Redis scripts from `.lua` files and from script text embedded in Rust.

use crate::ir::FileIr;

/// What the Lua front-end extracted from one file.
#[derive(Debug, Default)]
pub struct LuaIr {}

/// Parse the Lua texts of a file (`ir.embedded` with [`crate::ir::Language::Lua`]).
pub fn analyze(_ir: &mut FileIr) {}
