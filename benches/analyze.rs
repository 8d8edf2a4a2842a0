//! Analyser throughput over a large corpus of real Rust: the vendored sources of a pinned set
//! of popular crates (redis, fred, sqlx, tokio, hyper, axum, serde, clap, syn, regex and all
//! their dependencies). Prints, side by side, wall time, lines per second, the ratio to the
//! floor and peak RSS for: a bare `syn::parse_file` + `syn::visit` pass over the same files
//! (the floor), `locklint` without its analysis cache, with a cold cache (entries written),
//! with a warm cache and nothing changed (the project's stored answer), with one file changed
//! on disk, with the largest file the prefilter lets through given a new function, and with
//! one file touched (its time changed, not its bytes); then
//! the run without cache over 25, 50 and 100 % of the corpus (whole crates, hard-linked into
//! `target/bench-subsets/`), to show whether time and memory grow linearly with lines; then
//! the warm runs (nothing changed, one changed, one parsed file changed) on the 50 % tree,
//! about 1.7 M lines.
//!
//! Each figure is a separate process (this binary re-run with `--child`), so peak RSS
//! (`VmHWM`) is that run's alone; each is the best of three runs (of five for the floor and
//! the run without cache, made in pairs, one after the other, whose median ratio is printed
//! too: a shared machine's speed drifts) (peak RSS: the largest), with
//! the CPU time (user + system) of that run: on a shared machine the steadier figure. The runs
//! are the command line's: `engine::run` with the options `locklint check DIR --project-root DIR`
//! gives it, the files changed on disk.
//!
//! `cargo bench --bench analyze` vendors the corpus into `target/bench-corpus` on first use
//! (`cargo vendor`, needs crates.io); set `LOCKLINT_BENCH_CORPUS=/some/dir` to analyse another tree.

#[path = "support/corpus.rs"]
mod corpus;
#[path = "support/rss.rs"]
mod rss;

#[global_allocator]
static ALLOCATOR: locklint::allocator::Allocator = locklint::allocator::ALLOCATOR;

use corpus::corpus;
use locklint::engine::{self, Options};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

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

/// What a child process measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Floor,
    NoCache,
    /// No cache, every file parsed (`--no-prefilter`).
    NoPrefilter,
    Cold,
    Warm,
    OneChanged,
    /// The largest file the prefilter lets through gets a new function: what the analysis
    /// reads changes, so the stored answer does not hold.
    OneParsedChanged,
    OneTouched,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Floor => "floor",
            Mode::NoCache => "no-cache",
            Mode::NoPrefilter => "no-prefilter",
            Mode::Cold => "cold",
            Mode::Warm => "warm",
            Mode::OneChanged => "one-changed",
            Mode::OneParsedChanged => "one-parsed-changed",
            Mode::OneTouched => "one-touched",
        }
    }

    fn parse(s: &str) -> Option<Mode> {
        [
            Mode::Floor,
            Mode::NoCache,
            Mode::NoPrefilter,
            Mode::Cold,
            Mode::Warm,
            Mode::OneChanged,
            Mode::OneParsedChanged,
            Mode::OneTouched,
        ]
        .into_iter()
        .find(|m| m.name() == s)
    }
}

/// The largest Rust file of a tree that the prefilter lets through (parsed from the start).
fn largest_parsed(files: &[PathBuf]) -> PathBuf {
    files
        .iter()
        .filter(|p| {
            std::fs::read_to_string(p)
                .is_ok_and(|t| locklint::frontend::prefilter::can_contribute(&t))
        })
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .cloned()
        .unwrap()
}

/// The largest Rust file of a tree (the one the editor's case changes).
fn largest(files: &[PathBuf]) -> PathBuf {
    files
        .iter()
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .cloned()
        .unwrap()
}

/// The CPU time (user + system, every thread) the process has used, in seconds.
fn cpu_seconds() -> f64 {
    // /proc/self/stat: the fields after the command's closing parenthesis; utime and stime
    // are the 12th and 13th, in clock ticks (100 per second on Linux)
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
            Some(ticks / 100.0)
        })
        .unwrap_or(0.0)
}

/// A digest of a run's findings (rule, file, span, message), leaving out the parse errors of
/// files the prefilter does not let through (those are parsed only without it): equal digests
/// mean the prefilter cost no finding.
fn digest(findings: &[locklint::diagnostic::Diagnostic]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in findings {
        let file = &f.primary.file;
        if f.rule == "parse-error" && !locklint::frontend::prefilter::can_contribute(&file.text) {
            continue;
        }
        (
            f.rule,
            &file.path,
            f.primary.span.start,
            f.primary.span.end,
            &f.message,
        )
            .hash(&mut h);
    }
    h.finish()
}

/// In the child: one measured run of `mode` over `dir`; prints `RESULT wall_s rss_kib lines
/// findings parse_errors digest cpu_s`. One changed: the largest file gets a new last line on
/// disk (the stored answer and that file's entry no longer fit) and is put back afterwards;
/// one touched: its time changes, not its bytes.
fn child(mode: Mode, dir: &Path, cache: &Path) {
    let files = rust_files(dir);
    // the tree is a project of its own (the corpus sits inside this repository)
    let opts = Options {
        paths: vec![dir.to_path_buf()],
        project_root: Some(dir.to_path_buf()),
        cache_dir: (!matches!(mode, Mode::NoCache | Mode::NoPrefilter))
            .then(|| cache.to_path_buf()),
        parse_all: mode == Mode::NoPrefilter,
        // as the command line reads configuration
        config: engine::ConfigSource::Discover,
        ..Default::default()
    };
    let changed = if mode == Mode::OneParsedChanged {
        largest_parsed(&files)
    } else {
        largest(&files)
    };
    let original = std::fs::read(&changed).unwrap();
    let original_time = std::fs::metadata(&changed).unwrap().modified().unwrap();
    let set_time = |t: std::time::SystemTime| {
        std::fs::File::options()
            .write(true)
            .open(&changed)
            .and_then(|f| f.set_modified(t))
            .unwrap();
    };
    match mode {
        Mode::OneChanged => {
            let mut text = original.clone();
            text.extend_from_slice(format!("\n// changed {}\n", std::process::id()).as_bytes());
            std::fs::write(&changed, text).unwrap();
        }
        Mode::OneParsedChanged => {
            let mut text = original.clone();
            text.extend_from_slice(
                format!("\nfn locklint_bench_added_{}() {{}}\n", std::process::id()).as_bytes(),
            );
            std::fs::write(&changed, text).unwrap();
        }
        Mode::OneTouched => set_time(std::time::SystemTime::now()),
        _ => {}
    }
    if mode == Mode::Cold {
        let _ = std::fs::remove_dir_all(cache);
    }
    let cpu_before = cpu_seconds();
    let start = Instant::now();
    let report = if mode == Mode::Floor {
        let pool = rayon::ThreadPoolBuilder::new()
            .stack_size(512 << 20)
            .build()
            .unwrap();
        std::hint::black_box(pool.install(|| syn_floor(&files)));
        None
    } else {
        Some(engine::run(&opts))
    };
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    if matches!(mode, Mode::OneChanged | Mode::OneParsedChanged) {
        std::fs::write(&changed, &original).unwrap();
        set_time(original_time);
    }
    let (lines, findings, parse_errors, sum) = report.map_or((0, 0, 0, 0), |r| {
        let parse_errors = r
            .findings
            .iter()
            .filter(|f| f.rule == "parse-error")
            .count();
        (r.lines, r.findings.len(), parse_errors, digest(&r.findings))
    });
    println!(
        "RESULT {wall} {} {lines} {findings} {parse_errors} {sum} {cpu}",
        rss::peak_rss_kib("self")
    );
}

/// One measurement: the best wall time of `runs` child runs and the largest peak RSS.
struct Measured {
    wall: f64,
    rss_kib: u64,
    lines: usize,
    findings: usize,
    parse_errors: usize,
    digest: u64,
    cpu: f64,
}

/// How many paired runs of the floor and of the run without cache are made.
const PAIRS: usize = 5;

impl Measured {
    /// No run yet.
    fn none() -> Measured {
        Measured {
            wall: f64::MAX,
            rss_kib: 0,
            lines: 0,
            findings: 0,
            parse_errors: 0,
            digest: 0,
            cpu: 0.0,
        }
    }

    /// Keep the faster of two measurements, with the larger peak RSS of both.
    fn keep(&mut self, other: Measured) {
        let rss = self.rss_kib.max(other.rss_kib);
        if other.wall < self.wall {
            *self = other;
        }
        self.rss_kib = rss;
    }
}

fn measure(mode: Mode, dir: &Path, cache: &Path, runs: usize) -> Measured {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let mut best = Measured::none();
    for _ in 0..runs {
        let out = Command::new(&exe)
            .arg("--child")
            .arg(mode.name())
            .arg(dir)
            .arg(cache)
            .output()
            .expect("run the benchmark child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("RESULT ")) else {
            panic!(
                "{} run failed: {}",
                mode.name(),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let v: Vec<&str> = line.split_whitespace().collect();
        let wall: f64 = v[0].parse().unwrap();
        best.rss_kib = best.rss_kib.max(v[1].parse().unwrap());
        if wall < best.wall {
            best.wall = wall;
            best.lines = v[2].parse().unwrap();
            best.findings = v[3].parse().unwrap();
            best.parse_errors = v[4].parse().unwrap();
            best.digest = v[5].parse().unwrap();
            best.cpu = v[6].parse().unwrap();
        }
    }
    best
}

/// Lines of the Rust files under `dir`.
fn lines_of(dir: &Path) -> usize {
    rust_files(dir)
        .iter()
        .map(|p| std::fs::read(p).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count()))
        .sum()
}

/// A tree of whole crates of the corpus holding about `percent` % of its lines: the first
/// crate directories in name order, hard-linked under `target/bench-subsets/<percent>/`.
fn subset(dir: &Path, percent: usize) -> PathBuf {
    if percent >= 100 {
        return dir.to_path_buf();
    }
    let root =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/bench-subsets/{percent}"));
    let _ = std::fs::remove_dir_all(&root);
    let mut crates: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    crates.sort();
    let total = lines_of(dir).max(1);
    let mut taken = 0;
    for c in crates {
        if taken * 100 >= total * percent {
            break;
        }
        taken += lines_of(&c);
        for e in ignore::WalkBuilder::new(&c)
            .standard_filters(false)
            .build()
            .flatten()
        {
            let from = e.path();
            let to = root
                .join(c.file_name().unwrap())
                .join(from.strip_prefix(&c).unwrap());
            if from.is_dir() {
                std::fs::create_dir_all(&to).unwrap();
            } else if std::fs::hard_link(from, &to).is_err() {
                let _ = std::fs::copy(from, &to);
            }
        }
    }
    root
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        // every mode, the floor included, runs with the allocator settings of the command line
        locklint::allocator::tune();
        let mode = Mode::parse(&args[i + 1]).expect("a mode");
        child(mode, Path::new(&args[i + 2]), Path::new(&args[i + 3]));
        return;
    }
    // `cargo bench` passes `--bench`; accept and ignore harness flags
    let dir = corpus();
    let runs = 3;
    let cache = std::env::temp_dir().join(format!("locklint-bench-cache-{}", std::process::id()));
    // read every file once so the first measurement does not pay for the disk
    let _ = lines_of(&dir);
    // the floor and the run without cache in pairs, one right after the other: a shared
    // machine's speed drifts over a minute, so the ratio is taken per pair (the median of 5)
    let (mut floor, mut no_cache) = (Measured::none(), Measured::none());
    let mut ratios = Vec::new();
    for _ in 0..PAIRS {
        let f = measure(Mode::Floor, &dir, &cache, 1);
        let n = measure(Mode::NoCache, &dir, &cache, 1);
        ratios.push(n.wall / f.wall);
        floor.keep(f);
        no_cache.keep(n);
    }
    ratios.sort_by(f64::total_cmp);
    let no_prefilter = measure(Mode::NoPrefilter, &dir, &cache, runs);
    let cold = measure(Mode::Cold, &dir, &cache, runs);
    let warm = measure(Mode::Warm, &dir, &cache, runs);
    let one = measure(Mode::OneChanged, &dir, &cache, runs);
    measure(Mode::Warm, &dir, &cache, 1);
    let one_parsed = measure(Mode::OneParsedChanged, &dir, &cache, runs);
    // the tree as it was: a warm run stores its answer again before the touched runs
    measure(Mode::Warm, &dir, &cache, 1);
    let touched = measure(Mode::OneTouched, &dir, &cache, runs);
    let _ = std::fs::remove_dir_all(&cache);
    let lines = no_cache.lines as f64;
    println!("corpus:        {}", dir.display());
    println!("threads:       {}", rayon::current_num_threads());
    println!("lines:         {}", no_cache.lines);
    println!(
        "findings:      {} ({} parse-error)",
        no_cache.findings, no_cache.parse_errors
    );
    println!(
        "prefilter:     {} (without it: {} findings, {} parse-error)",
        if no_prefilter.digest == no_cache.digest {
            "the same findings as parsing every file"
        } else {
            "DIFFERENT findings from parsing every file"
        },
        no_prefilter.findings,
        no_prefilter.parse_errors
    );
    println!();
    println!(
        "{:<34} {:>9} {:>9} {:>12} {:>9} {:>10}",
        "run", "wall s", "cpu s", "lines/s", "x floor", "peak MiB"
    );
    for (name, m) in [
        ("syn parse + visit (floor)", &floor),
        ("locklint, no cache", &no_cache),
        ("locklint, no cache, no prefilter", &no_prefilter),
        ("locklint, cold cache (writing)", &cold),
        ("locklint, warm cache, no change", &warm),
        ("locklint, warm cache, one changed", &one),
        ("locklint, warm, one parsed changed", &one_parsed),
        ("locklint, warm cache, one touched", &touched),
    ] {
        println!(
            "{name:<34} {:>9.3} {:>9.2} {:>12.0} {:>9.2} {:>10.1}",
            m.wall,
            m.cpu,
            lines / m.wall,
            m.wall / floor.wall,
            m.rss_kib as f64 / 1024.0
        );
    }
    println!(
        "(one changed and one touched: {}; one parsed changed: {}, a function added; load average {})",
        largest(&rust_files(&dir)).display(),
        largest_parsed(&rust_files(&dir)).display(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "no cache against the floor, {PAIRS} paired runs: median {:.3}x (from {:.3} to {:.3})",
        ratios[PAIRS / 2],
        ratios[0],
        ratios[PAIRS - 1]
    );
    println!();
    println!(
        "{:<20} {:>10} {:>9} {:>12} {:>10}",
        "no cache, corpus", "lines", "wall s", "µs/line", "peak MiB"
    );
    for percent in [25, 50, 100] {
        let tree = subset(&dir, percent);
        let m = measure(Mode::NoCache, &tree, &cache, runs);
        println!(
            "{:<20} {:>10} {:>9.3} {:>12.3} {:>10.1}",
            format!("{percent} %"),
            m.lines,
            m.wall,
            m.wall * 1e6 / m.lines.max(1) as f64,
            m.rss_kib as f64 / 1024.0
        );
    }
    // the warm runs again on half the corpus, about the size of a large service's project
    let half = subset(&dir, 50);
    let half_cache = cache.with_extension("half");
    measure(Mode::Cold, &half, &half_cache, 1);
    let warm = measure(Mode::Warm, &half, &half_cache, runs);
    let one = measure(Mode::OneChanged, &half, &half_cache, runs);
    measure(Mode::Warm, &half, &half_cache, 1);
    let one_parsed = measure(Mode::OneParsedChanged, &half, &half_cache, runs);
    let _ = std::fs::remove_dir_all(&half_cache);
    println!();
    println!(
        "50 % of the corpus ({} lines), warm cache: nothing changed {:.3} s, one changed {:.3} s, \
         one parsed changed {:.3} s ({}); {:.1} MiB at most",
        lines_of(&half),
        warm.wall,
        one.wall,
        one_parsed.wall,
        largest_parsed(&rust_files(&half)).display(),
        [warm.rss_kib, one.rss_kib, one_parsed.rss_kib]
            .into_iter()
            .max()
            .unwrap_or(0) as f64
            / 1024.0
    );
}
