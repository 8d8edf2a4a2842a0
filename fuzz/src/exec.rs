//! Running one input in this process: on a thread of its own with the stack of a program's
//! main thread, catching panics on any thread, and measuring time and peak memory against
//! limits that scale with the input's size.
//!
//! The time judged is that of one command as a user runs it: a target that does the work of
//! several commands on one analysis (every output format, then the fix plan) leaves out all
//! but the slowest of them with [`not_one_command`], so an input is judged by the analysis
//! and its slowest output, not by the sum of six renderings and a fix. Memory needs no such
//! care: the outputs run one after another, so the peak is already the largest one's.

use crate::alloc;
use crate::targets::Target;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const MB: f64 = 1024.0 * 1024.0;

/// What an input may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Seconds per MB of input, and at least this many seconds (1 and 1 by default).
    pub secs_per_mb: f64,
    pub min_secs: f64,
    /// Bytes of memory per byte of input, and at least this many bytes (20 and 100 MB).
    pub bytes_per_byte: usize,
    pub min_bytes: usize,
    /// An input still running after this many times its time limit is a hang.
    pub hang_factor: u32,
    /// Stack of the thread an input runs on (8 MiB: a program's main thread).
    pub stack_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            secs_per_mb: 1.0,
            min_secs: 1.0,
            bytes_per_byte: 20,
            min_bytes: 100 * 1024 * 1024,
            hang_factor: 30,
            stack_bytes: 8 * 1024 * 1024,
        }
    }
}

impl Limits {
    pub fn time(&self, len: usize) -> Duration {
        Duration::from_secs_f64((len as f64 / MB * self.secs_per_mb).max(self.min_secs))
    }

    pub fn memory(&self, len: usize) -> usize {
        len.saturating_mul(self.bytes_per_byte).max(self.min_bytes)
    }
}

/// Why an input failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    Panic(String),
    Slow {
        secs: f64,
        limit: f64,
    },
    Memory {
        bytes: usize,
        limit: usize,
    },
    /// Still running long past its limit; the thread is left behind.
    Hang {
        secs: f64,
    },
}

impl Failure {
    /// A short word for file names and summaries.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Panic(_) => "panic",
            Failure::Slow { .. } => "slow",
            Failure::Memory { .. } => "memory",
            Failure::Hang { .. } => "hang",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Panic(m) => write!(f, "panic: {m}"),
            Failure::Slow { secs, limit } => write!(f, "took {secs:.2} s (limit {limit:.2} s)"),
            Failure::Memory { bytes, limit } => write!(
                f,
                "took {:.1} MB of memory (limit {:.1} MB)",
                *bytes as f64 / MB,
                *limit as f64 / MB
            ),
            Failure::Hang { secs } => write!(f, "still running after {secs:.1} s"),
        }
    }
}

/// Time the running input spent on work that no one command does (see the module's
/// documentation), in nanoseconds.
static NOT_ONE_COMMAND: AtomicU64 = AtomicU64::new(0);

/// Leave `d` out of the running input's time: work that a user's one command would not do.
pub fn not_one_command(d: Duration) {
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    NOT_ONE_COMMAND.fetch_add(nanos, Ordering::SeqCst);
}

/// Panics seen while an input runs (on any thread), and whether one is running.
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Record panics instead of printing them while an input runs.
fn install_hook() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // locklint's own hook (which silences the panics it isolates) goes first, so that this
        // one, outermost, still sees every panic
        let _ = locklint::isolate::catch(|| ());
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if ACTIVE.load(Ordering::SeqCst) {
                let msg = match info.payload().downcast_ref::<&str>() {
                    Some(s) => s.to_string(),
                    None => info
                        .payload()
                        .downcast_ref::<String>()
                        .cloned()
                        .unwrap_or_else(|| "(no message)".to_string()),
                };
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                if let Ok(mut p) = PANICS.lock() {
                    p.push(format!("{msg}{at}"));
                }
            } else {
                previous(info);
            }
        }));
    });
}

/// Run `input` through `target` once. Inputs run one at a time per process.
pub fn execute(target: &Target, input: &[u8], limits: &Limits) -> Result<(), Failure> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    install_hook();
    if let Ok(mut p) = PANICS.lock() {
        p.clear();
    }
    let time_limit = limits.time(input.len());
    let memory_limit = limits.memory(input.len());
    let base = alloc::reset_peak();
    alloc::set_hard_cap(base + memory_limit.saturating_mul(10).max(1 << 30));
    NOT_ONE_COMMAND.store(0, Ordering::SeqCst);
    ACTIVE.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let (tx, rx) = mpsc::channel();
    let run = target.run;
    let owned = input.to_vec();
    let spawned = std::thread::Builder::new()
        .name(format!("fuzz-{}", target.name))
        .stack_size(limits.stack_bytes)
        .spawn(move || {
            let r = std::panic::catch_unwind(|| run(&owned));
            let _ = tx.send(r.is_ok());
        });
    let outcome = match spawned {
        Err(e) => Err(Failure::Panic(format!("could not start a thread: {e}"))),
        Ok(handle) => match rx.recv_timeout(time_limit * limits.hang_factor) {
            Ok(_) => {
                let _ = handle.join();
                Ok(())
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = handle.join();
                Ok(())
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Failure::Hang {
                secs: started.elapsed().as_secs_f64(),
            }),
        },
    };
    let elapsed = started
        .elapsed()
        .saturating_sub(Duration::from_nanos(NOT_ONE_COMMAND.load(Ordering::SeqCst)));
    ACTIVE.store(false, Ordering::SeqCst);
    let peak = alloc::peak().saturating_sub(base);
    alloc::set_hard_cap(0);
    let panics = PANICS.lock().map(|p| p.clone()).unwrap_or_default();
    outcome?;
    if !panics.is_empty() {
        return Err(Failure::Panic(panics.join("; ")));
    }
    if peak > memory_limit {
        return Err(Failure::Memory {
            bytes: peak,
            limit: memory_limit,
        });
    }
    if elapsed > time_limit {
        return Err(Failure::Slow {
            secs: elapsed.as_secs_f64(),
            limit: time_limit.as_secs_f64(),
        });
    }
    Ok(())
}
