//! The Lua scripts locklint writes into fixed code and quotes in its help: compare-and-delete
//! (release) and compare-and-expire / compare-and-pexpire (renew). One text each: the fixes
//! define these constants in the fixed file, and the rules' help texts quote the same text
//! through the macros (which expand to the literal, so a help text stays a `&'static str`).

/// The compare-and-delete script as a string literal: deletes `KEYS[1]` only while it holds
/// the caller's token (`ARGV[1]`).
macro_rules! compare_and_delete {
    () => {
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
    };
}

/// The compare-and-renew script for `expire` or `pexpire` as a string literal: sets
/// `KEYS[1]`'s TTL to `ARGV[2]` only while it holds the caller's token (`ARGV[1]`).
macro_rules! compare_and_renew {
    ($command:literal) => {
        concat!(
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('",
            $command,
            "', KEYS[1], ARGV[2]) else return 0 end"
        )
    };
}

pub(crate) use {compare_and_delete, compare_and_renew};

/// Deletes `KEYS[1]` only while it holds the caller's token (`ARGV[1]`).
pub const COMPARE_AND_DELETE: &str = compare_and_delete!();

/// Sets `KEYS[1]`'s TTL to `ARGV[2]` seconds only while it holds the caller's token.
pub const COMPARE_AND_EXPIRE: &str = compare_and_renew!("expire");

/// Sets `KEYS[1]`'s TTL to `ARGV[2]` milliseconds only while it holds the caller's token.
pub const COMPARE_AND_PEXPIRE: &str = compare_and_renew!("pexpire");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_differ_from_each_other_only_in_their_command() {
        assert_eq!(
            COMPARE_AND_EXPIRE.replace("'expire'", "'pexpire'"),
            COMPARE_AND_PEXPIRE
        );
        assert_eq!(
            COMPARE_AND_PEXPIRE.replace("'pexpire', KEYS[1], ARGV[2]", "'del', KEYS[1]"),
            COMPARE_AND_DELETE
        );
    }
}
