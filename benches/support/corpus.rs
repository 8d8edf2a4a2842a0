//! The benchmarks' corpus of real Rust: the vendored sources of the pinned crates of
//! `benches/corpus/Cargo.toml`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The corpus's directory: `LOCKLINT_BENCH_CORPUS`, else `target/bench-corpus`, vendored
/// there on first use (`cargo vendor`, needs crates.io).
pub fn corpus() -> PathBuf {
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
