//! The harness keeps working: every target runs a fixed number of inputs from a fixed seed
//! without failing, and the harness catches and saves each kind of failure.

use locklint_fuzz::corpus;
use locklint_fuzz::exec::{Failure, Limits};
use locklint_fuzz::runner::{fuzz, Budget, Inputs, Observer};
use locklint_fuzz::targets::{self, TARGETS};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Collect {
    inputs: u64,
    failures: Vec<(u64, String)>,
}

impl Observer for Collect {
    fn before(&mut self, _index: u64, _input: &[u8]) {
        self.inputs += 1;
    }
    fn failed(&mut self, index: u64, input: &[u8], f: &Failure) {
        self.failures.push((
            index,
            format!("{f}: {}", locklint_fuzz::runner::preview(input, 300)),
        ));
    }
}

#[test]
fn every_target_runs_a_fixed_seed_cleanly() {
    // debug builds are slow: only crashes and runaway memory count here
    let limits = Limits {
        min_secs: 60.0,
        ..Limits::default()
    };
    for t in TARGETS {
        let seeds = corpus::seeds(t, &[corpus::fixtures_dir()], 16 * 1024);
        assert!(
            !seeds.is_empty() || t.generate.is_some(),
            "{}: nothing to start from",
            t.name
        );
        let inputs = Inputs {
            target: t,
            seeds: &seeds,
            seed: 1,
            max_len: 16 * 1024,
        };
        let mut c = Collect::default();
        // a few seeds as they are, then generated and mutated inputs
        let from = seeds.len().saturating_sub(3) as u64;
        let budget = Budget {
            until: Instant::now() + Duration::from_secs(120),
            iterations: Some(12),
        };
        let n = fuzz(&inputs, from, budget, &limits, &mut c);
        assert_eq!(n, 12, "{}", t.name);
        assert_eq!(c.inputs, 12);
        assert!(c.failures.is_empty(), "{}: {:?}", t.name, c.failures);
    }
}

#[test]
fn inputs_follow_from_seed_and_index() {
    let t = targets::find("sql").unwrap();
    let seeds = corpus::seeds(t, &[corpus::fixtures_dir()], 4096);
    let inputs = Inputs {
        target: t,
        seeds: &seeds,
        seed: 5,
        max_len: 4096,
    };
    let i = seeds.len() as u64 + 10;
    assert_eq!(inputs.get(i), inputs.get(i));
    assert_ne!(inputs.get(i), inputs.get(i + 1));
    assert_eq!(inputs.get(0), seeds[0]);
}

#[test]
fn failures_are_caught_in_process() {
    let t = targets::find("selftest").unwrap();
    let limits = Limits::default();
    let run = |input: &[u8]| locklint_fuzz::exec::execute(t, input, &limits);
    assert_eq!(run(b"ok"), Ok(()));
    assert!(matches!(run(b"panic"), Err(Failure::Panic(m)) if m.contains("selftest panic")));
    assert!(
        matches!(run(b"thread-panic"), Err(Failure::Panic(m)) if m.contains("caught elsewhere"))
    );
    assert!(matches!(run(b"slow"), Err(Failure::Slow { .. })));
    // 1.8 s in all, as three commands of 0.6 s each: judged by the slowest
    assert_eq!(run(b"outputs"), Ok(()));
    assert!(matches!(run(b"memory"), Err(Failure::Memory { .. })));
    // the next input starts clean
    assert_eq!(run(b"ok"), Ok(()));
}

#[test]
fn the_binary_saves_crashing_inputs_and_goes_on() {
    let artifacts = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_locklint-fuzz"))
        .args([
            "selftest",
            "--seconds",
            "120",
            "--iterations",
            "8",
            "--seed",
            "1",
        ])
        .arg("--artifacts")
        .arg(artifacts.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("selftest: 8 executions"), "{stdout}");
    assert!(stdout.contains("6 failures"), "{stdout}");
    let saved: Vec<PathBuf> = std::fs::read_dir(artifacts.path().join("selftest"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let mut kinds: Vec<String> = saved
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            let kind = name.split('-').next().unwrap().to_string();
            let body = std::fs::read_to_string(p).unwrap();
            format!("{kind}:{body}")
        })
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "crash:abort",
            "crash:overflow",
            "memory:memory",
            "panic:panic",
            "panic:thread-panic",
            "slow:slow"
        ],
        "{stdout}"
    );
}

#[test]
fn a_seed_is_read_exactly() {
    let out = Command::new(env!("CARGO_BIN_EXE_locklint-fuzz"))
        .args(["sql", "--iterations", "1", "--seed", "12345678901234567891"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("seed 12345678901234567891,"), "{stdout}");
}
