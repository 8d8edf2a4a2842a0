//! Analyser throughput over a large corpus of real Rust: the vendored sources of a pinned set
//! of popular crates (redis, fred, sqlx, tokio, hyper, axum, serde, clap, syn, regex and all
//! their dependencies). Prints files, lines, wall time and lines per second, side by side for:
//! a bare `syn::parse_file` + `syn::visit` pass over the same files (the floor), `locklint`
//! without its analysis cache, with a cold cache (entries written), with a warm cache and
//! nothing changed, and with one file changed (the editor's case). Each is the best of three
//! runs on the same threads.
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

/// Every `.rs` file of the corpus, as the engine's walk finds them.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    ignore::WalkBuilder::new(dir)
        .build()
        .flatten()
        .map(|e| e.into_path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && p.is_file())
        .collect()
}

/// The floor: read, parse with syn and visit every file, in parallel.
fn syn_floor(files: &[PathBuf]) -> usize {
    use rayon::prelude::*;
    struct Count(usize);
    impl<'ast> syn::visit::Visit<'ast> for Count {
        fn visit_expr(&mut self, e: &'ast syn::Expr) {
            self.0 += 1;
            syn::visit::visit_expr(self, e);
        }
    }
    files
        .par_iter()
        .map(|p| {
            let Ok(text) = std::fs::read_to_string(p) else {
                return 0;
            };
            let Ok(ast) = syn::parse_file(&text) else {
                return 0;
            };
            let mut c = Count(0);
            syn::visit::Visit::visit_file(&mut c, &ast);
            proc_macro2::extra::invalidate_current_thread_spans();
            c.0
        })
        .sum()
}

/// Best wall time of `runs` runs of `f` (after `setup` before each).
fn best_of(runs: usize, mut setup: impl FnMut(), mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..runs {
        setup();
        let start = Instant::now();
        f();
        best = best.min(start.elapsed().as_secs_f64());
    }
    best
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

    // side by side: the syn floor and the analysis cache
    let files = rust_files(&dir);
    let lines = report.lines as f64;
    let pool = rayon::ThreadPoolBuilder::new()
        .stack_size(512 << 20)
        .build()
        .unwrap();
    let floor = pool.install(|| {
        best_of(
            runs,
            || {},
            || {
                std::hint::black_box(syn_floor(&files));
            },
        )
    });
    let cache = std::env::temp_dir().join(format!("locklint-bench-cache-{}", std::process::id()));
    let cached = Options {
        cache_dir: Some(cache.clone()),
        ..opts.clone()
    };
    let cold = best_of(
        runs,
        || drop(std::fs::remove_dir_all(&cache)),
        || drop(engine::run(&cached)),
    );
    let _ = engine::run(&cached);
    let warm = best_of(runs, || {}, || drop(engine::run(&cached)));
    // one file changed: its text differs from every stored entry
    let changed = files
        .iter()
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .cloned()
        .unwrap();
    let mut text = std::fs::read_to_string(&changed).unwrap();
    text.push_str("\n// changed\n");
    let one_changed = Options {
        overlay: Some(std::sync::Arc::new([(changed.clone(), text)].into())),
        ..cached.clone()
    };
    let one = best_of(runs, || {}, || drop(engine::run(&one_changed)));
    let _ = std::fs::remove_dir_all(&cache);
    println!();
    println!(
        "{:<34} {:>9} {:>12} {:>9}",
        "run", "wall s", "lines/s", "x floor"
    );
    for (name, t) in [
        ("syn parse + visit (floor)", floor),
        ("locklint, no cache", best),
        ("locklint, cold cache (writing)", cold),
        ("locklint, warm cache, no change", warm),
        ("locklint, warm cache, one changed", one),
    ] {
        println!("{name:<34} {t:>9.3} {:>12.0} {:>9.2}", lines / t, t / floor);
    }
    println!("(one changed: {})", changed.display());
}
