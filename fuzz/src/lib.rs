//! A fuzz harness for locklint's front-ends that runs on the stable toolchain.
//!
//! Each [`targets::Target`] is a function `fn(&[u8])` that runs one input through the same
//! public API as the CLI. Inputs come from the fixture corpus, mutated ([`mutate`]), and from
//! structure-aware generators ([`gen`]). [`exec`] runs one input with panics caught and time
//! and memory measured; [`runner`] is the loop; the binary runs the loop in a child process so
//! that a stack overflow or an abort is caught and its input saved.

pub mod alloc;
pub mod corpus;
pub mod exec;
pub mod gen;
pub mod mutate;
pub mod rng;
pub mod runner;
pub mod targets;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;
