//! Redis servers for tests.
