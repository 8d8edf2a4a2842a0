//! The fault suite: what the lock primitives do when processes pause, servers restart,
//! connections are killed and sessions are terminated, measured against servers this
//! program starts for itself (a `redis-server` and a PostgreSQL made with `initdb`, on free
//! loopback ports, removed on exit).
//!
//! ```sh
//! cargo run -p locklint-runtime --example faults --all-features --release
//! ```
//!
//! It prints a table of figures and a list of safety checks, and exits with status 1 if a
//! check failed. `tests/fault_suite.rs` runs the same scenarios, smaller, under `cargo test`.
//! Needs `redis-server`, `initdb` and `postgres` (Debian packages `redis-server` and
//! `postgresql`) and the `kill` command.

#[path = "../../tests/support/mod.rs"]
mod support;

mod scenarios;

use scenarios::{BoxError, Servers, HOLDER_ENV};

fn main() -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()?;
    if std::env::var_os(HOLDER_ENV).is_some() {
        return runtime.block_on(scenarios::holder_main());
    }
    let started = std::time::Instant::now();
    let report = runtime.block_on(async {
        let mut servers = Servers::start().await?;
        scenarios::run_all(&mut servers, false).await
    })?;
    print!("{}", report.render());
    println!("\nwhole run: {:.1} s", started.elapsed().as_secs_f64());
    if !report.failures().is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
