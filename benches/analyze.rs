//! Analyser throughput over a large corpus of real Rust: the vendored sources of a pinned set
//! of popular crates (redis, fred, sqlx, tokio, hyper, axum, serde, clap, syn, regex and all
//! their dependencies). Prints files, lines, wall time and lines per second.
//!
//! `cargo bench --bench analyze` vendors the corpus into `target/bench-corpus` on first use
//! (`cargo vendor`, needs crates.io); set `LOCKLINT_BENCH_CORPUS=/some/dir` to analyse another tree.

use locklint::engine::{self, Options};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn corpus() -> PathBuf {
    if let Some(dir) = std::env::var_os("LOCKLINT_BENCH_CORPUS") {
        return PathBuf::from(dir);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/bench-corpus");
    if !dir.join(".done").exists() {
        eprintln!("vendoring the benchmark corpus into {} ...", dir.display());
        let status = Command::new(env!("CARGO"))
            .args(["vendor", "--locked", "--versioned-dirs", "--manifest-path"])
            .arg(root.join("benches/corpus/Cargo.toml"))
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run cargo vendor");
        assert!(status.success(), "cargo vendor failed");
        std::fs::write(dir.join(".done"), "").unwrap();
    }
    dir
}

fn main() {
    // `cargo bench` passes `--bench`; accept and ignore harness flags
    let dir = corpus();
    let opts = Options {
        paths: vec![dir.clone()],
        ..Default::default()
    };
    // warm the file cache once, then measure
    let _ = engine::run(&opts);
    let runs = 3;
    let mut best = f64::MAX;
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        let report = engine::run(&opts);
        best = best.min(start.elapsed().as_secs_f64());
        last = Some(report);
    }
    let report = last.unwrap();
    let parse_errors = report
        .findings
        .iter()
        .filter(|f| f.rule == "parse-error")
        .count();
    println!("corpus:        {}", dir.display());
    println!("threads:       {}", rayon::current_num_threads());
    println!("files:         {}", report.files);
    println!("lines:         {}", report.lines);
    println!("skipped:       {}", report.notes.len());
    println!(
        "findings:      {} ({} parse-error)",
        report.findings.len(),
        parse_errors
    );
    println!("wall time:     {:.3} s (best of {runs})", best);
    println!("lines/second:  {:.0}", report.lines as f64 / best);
    println!("files/second:  {:.0}", report.files as f64 / best);
}
