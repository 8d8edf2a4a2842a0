//! The fault suite of `examples/faults`, run smaller under `cargo test`: every scenario
//! against throwaway servers, asserting the safety checks (no stale write accepted, loss
//! signalled, errors instead of panics), never the timings.
//!
//! A plain `main` (no test harness), because one scenario runs this same binary again as
//! the lock holder it pauses with SIGSTOP.

mod support;

#[path = "../examples/faults/scenarios.rs"]
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
    let report = runtime.block_on(async {
        let mut servers = Servers::start().await?;
        scenarios::run_all(&mut servers, true).await
    })?;
    eprint!("{}", report.render());
    let failures = report.failures();
    assert!(failures.is_empty(), "safety checks failed: {failures:#?}");
    assert!(
        report.checks.len() >= 20,
        "every scenario reported its checks: {:#?}",
        report.checks
    );
    Ok(())
}
