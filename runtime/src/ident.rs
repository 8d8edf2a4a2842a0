//! SQL identifier validation for configurable table names.
//!
//! Table names cannot be bound as query parameters, so every configurable name is checked
//! before it is spliced into SQL text. An accepted identifier is one or two dot-separated
//! parts (`table` or `schema.table`), each matching `[A-Za-z_][A-Za-z0-9_]*` and at most
//! 63 bytes long (the PostgreSQL limit, which is also within the MySQL and SQLite limits).
//! Nothing is quoted, so identifiers keep each database's ordinary case rules.

/// A table or column name was rejected by [`validate_identifier`].
///
/// ```
/// use locklint_runtime::ident::{validate_identifier, InvalidIdentifier};
/// assert_eq!(validate_identifier("a-b"), Err(InvalidIdentifier("a-b".into())));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid SQL identifier {0:?}: expected `name` or `schema.name`, each [A-Za-z_][A-Za-z0-9_]* and at most 63 bytes")]
pub struct InvalidIdentifier(pub String);

/// Checks that `name` is a plain or schema-qualified SQL identifier (see the module docs).
///
/// ```
/// use locklint_runtime::ident::validate_identifier;
/// assert!(validate_identifier("app.locks").is_ok());
/// assert!(validate_identifier("locks; DROP TABLE users").is_err());
/// assert!(validate_identifier("a.b.c").is_err());
/// ```
pub fn validate_identifier(name: &str) -> Result<(), InvalidIdentifier> {
    let parts: Vec<&str> = name.split('.').collect();
    let ok = (1..=2).contains(&parts.len()) && parts.iter().all(|p| is_simple(p));
    if ok {
        Ok(())
    } else {
        Err(InvalidIdentifier(name.to_owned()))
    }
}

/// Checks that `name` is a single unqualified identifier (no schema part).
///
/// ```
/// use locklint_runtime::ident::validate_simple_identifier;
/// assert!(validate_simple_identifier("fence").is_ok());
/// assert!(validate_simple_identifier("app.fence").is_err());
/// ```
pub fn validate_simple_identifier(name: &str) -> Result<(), InvalidIdentifier> {
    if is_simple(name) {
        Ok(())
    } else {
        Err(InvalidIdentifier(name.to_owned()))
    }
}

/// The last dot-separated part of a validated identifier: `locks` for `app.locks`.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub(crate) fn unqualified(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

fn is_simple(part: &str) -> bool {
    let bytes = part.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_and_qualified_names() {
        for ok in ["locks", "_x1", "app.locks", "A_b.C_d"] {
            assert!(validate_identifier(ok).is_ok(), "{ok}");
        }
        assert_eq!(unqualified("app.locks"), "locks");
        assert_eq!(unqualified("locks"), "locks");
    }

    #[test]
    fn rejects_injection_and_oddities() {
        let long = "a".repeat(64);
        for bad in [
            "",
            "1abc",
            "a-b",
            "a b",
            "a.b.c",
            ".a",
            "a.",
            "locks; DROP TABLE x",
            "\"quoted\"",
            "lo`cks",
            long.as_str(),
        ] {
            assert!(validate_identifier(bad).is_err(), "{bad}");
        }
        assert!(validate_simple_identifier("app.locks").is_err());
    }
}
