//! Redis leases.
