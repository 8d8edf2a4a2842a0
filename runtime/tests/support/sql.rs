//! SQL servers for tests.
