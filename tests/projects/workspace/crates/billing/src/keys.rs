//! Keys and scripts of the billing locks.

pub const INVOICE_RUN: &str = "lock:invoice-run";

/// Releases a lock by deleting its key.
pub const RELEASE_SCRIPT: &str = "return redis.call('DEL', KEYS[1])";

pub fn shipment_key(id: i64) -> String {
    format!("lock:shipment:{id}")
}
