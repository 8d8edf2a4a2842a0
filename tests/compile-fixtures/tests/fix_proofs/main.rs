//! Every fix locklint applies (safe or unsafe, not display-only) proven against the real
//! servers: for each fixable `fixtures/<rule>/bad_*` fixture, the original and the fixed code
//! path run against Redis or PostgreSQL in the failing interleaving of the rule's page. Each
//! proof asserts that the defect's failure happens with the original, does not happen with the
//! fix, and that the lock still works after the fix (acquires, releases and renews its own lock,
//! refuses a foreign one). Rust fixtures are called as the modules this crate compiles;
//! `.sql` and `.lua` fixtures (and a heartbeat that only runs after ten seconds) are run
//! from their text, extracted exactly as written. `registry.rs` fails when a fixable fixture
//! has no proof.

#[allow(dead_code)]
#[path = "../../../../runtime/tests/support/redis.rs"]
mod redis_support;
#[allow(dead_code)]
#[path = "../../../../runtime/tests/support/sql.rs"]
mod sql_support;

mod pg;
mod proxy;
mod redis_state;
mod registry;
mod source;

mod lock_table_client_clock;
mod lock_table_steals_live_lock;
mod lua_release_no_compare;
mod lua_renew_no_compare;
mod separate_expire;
mod setnx_without_expiry;
mod unconditional_release;
mod unconditional_renew;
mod unfenced_write;
