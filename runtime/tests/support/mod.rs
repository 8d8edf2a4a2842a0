//! Shared test harness: real servers, started on demand.
#![allow(dead_code)]

pub mod redis;
pub mod sql;
