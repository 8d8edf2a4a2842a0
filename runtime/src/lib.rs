//! Correct distributed-lock primitives.

pub mod advisory;
pub mod fence;
pub mod idempotency;
pub mod redis_lock;
pub mod table;

pub use fence::FencingToken;
