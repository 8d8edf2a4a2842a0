//! Panic isolation: runs one step of an analysis (a file, an embedded SQL or Lua text, a rule
//! over one trace or file) so that a panic inside it becomes a `parse-error` finding for that
//! step instead of ending the whole run (`rules::problems` makes the finding). Panics caught here are not printed by the panic hook.

use crate::source::{FileRef, Span};
use crate::{Limit, ParseProblem};
use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// How many [`catch`] calls are active on this thread.
    static CATCHING: Cell<usize> = const { Cell::new(0) };
}

static HOOK: Once = Once::new();

/// Wrap the panic hook installed so far: silent for panics that [`catch`] handles, unchanged
/// for every other panic.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !catching() {
                previous(info);
            }
        }));
    });
}

/// Run `work`; a panic inside it is returned as its message.
pub fn catch<R>(work: impl FnOnce() -> R) -> Result<R, String> {
    install_hook();
    CATCHING.with(|c| c.set(c.get() + 1));
    let result = panic::catch_unwind(AssertUnwindSafe(work));
    CATCHING.with(|c| c.set(c.get() - 1));
    result.map_err(|payload| message(payload.as_ref()))
}

/// The text of a panic payload.
pub fn message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// What every finding made from a caught panic says to do.
pub const HELP: &str = "this is a defect in locklint; please report it with the file. The rest of the tree is analysed either way";

/// The finding for a step that panicked: `what` names what was not analysed ("this file",
/// "this embedded SQL text").
pub fn problem(what: &str, message: &str, span: Span) -> ParseProblem {
    ParseProblem {
        limit: Limit::None,
        message: format!("locklint could not analyse {what}: {message}"),
        span,
        help: HELP.to_string(),
    }
}

/// The problem for a whole file whose analysis panicked, at its first character.
pub fn file_problem(file: &FileRef, message: &str) -> ParseProblem {
    let first = file.text.chars().next().map_or(0, char::len_utf8);
    problem("this file", message, Span::new(0, first))
}

/// Whether a panic on this thread now would be caught by [`catch`] (and not printed).
pub fn catching() -> bool {
    CATCHING.with(Cell::get) > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message() {
        assert_eq!(catch(|| 7), Ok(7));
        assert_eq!(
            catch(|| -> u8 { panic!("boom {}", 1) }),
            Err("boom 1".to_string())
        );
        let nested = catch(|| catch(|| -> u8 { panic!("inner") }));
        assert_eq!(nested, Ok(Err("inner".to_string())));
    }
}
