//! The memory allocator: mimalloc, for the command line and the benchmarks (which measure
//! what a user's run costs), each of which declares [`ALLOCATOR`] its global allocator (a
//! library cannot: the fuzz harness links this crate with a counting allocator of its own) and
//! calls [`tune`] before any thread starts.
//!
//! The analysis allocates and frees many small objects (syntax trees, token streams, the
//! intermediate form, findings) on two threads at once. With glibc's allocator that traffic
//! took a third of the CPU time, and its arenas either serialised the threads or kept what
//! one thread freed away from the other: on the 245 MB of published crates in a cargo
//! registry, `check --no-cache` took 16 s where it takes 6.5 s with mimalloc, at a lower peak.
//! mimalloc is built without transparent huge pages (the `no_thp` feature): with them, every
//! region it touches is backed by 2 MiB pages and a megabyte of Rust peaked at 130 MB.

use libmimalloc_sys as sys;

/// The allocator's type, for `#[global_allocator] static A: Allocator = ALLOCATOR;`.
pub type Allocator = mimalloc::MiMalloc;

/// The allocator.
pub const ALLOCATOR: Allocator = mimalloc::MiMalloc;

/// `mi_option_arena_eager_commit` in mimalloc's `mi_option_e`.
const ARENA_EAGER_COMMIT: sys::mi_option_t = 4;
/// `mi_option_purge_delay` in mimalloc's `mi_option_e`.
const PURGE_DELAY: sys::mi_option_t = 15;

/// mimalloc's options for a run:
///
/// - **Purge at once** (`purge_delay` 0; by default 1 s): memory freed in bulk (a large file's
///   syntax tree once it is walked, a rule's findings once their fixes are kept) is given back
///   before the next stage allocates, instead of both being resident at the peak (a megabyte
///   of Rust with 31,000 findings: 119 MB without, 81 MB with).
/// - **Commit arenas as they are used** (`arena_eager_commit` 0; by default eager on Linux):
///   a megabyte and a half less at the same peak.
pub fn tune() {
    // SAFETY: `mi_option_set` only sets an option's value; the indices are those of the
    // `mimalloc.h` of the exact `libmimalloc-sys` version the manifest pins.
    unsafe {
        sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        sys::mi_option_set(PURGE_DELAY, 0);
    }
}
