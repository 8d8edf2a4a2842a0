//! Time and memory on pathological inputs: every deeply nested Rust form, huge functions, doc
//! comment lines, long lines, huge SQL texts and a large Lua file, each about 1 MB (the Lua
//! file 2.7 MB).
//!
//! `cargo bench --bench pathological [NAME...]` writes each input under
//! `target/pathological/<case>/`, analyses it in a child process (this binary re-run with
//! `--child <dir>`), and prints a table: case, input size, wall time, CPU time (user and
//! system, all threads: on a loaded machine the steadier figure), peak RSS of the child
//! (`VmHWM`), peak RSS over an empty run, and that growth per input byte. A child that crashes
//! or runs longer than the timeout is reported as such. Positional arguments select cases
//! whose name contains one of them.
//!
//! Some cases go on after the analysis, as the command line would: `+human` renders every
//! finding as the human output does, `+add-suppressions` computes the `--add-suppressions`
//! edits, `+fix` applies every fix (unsafe ones too) in memory as `--fix --unsafe-fixes`
//! does before writing. Their `stage s` column is the wall time of that step alone.
//!
//! `LOCKLINT_PATHO_SIZE` sets the input size in bytes (default 1000000), or several sizes
//! separated by commas (`1000000,2000000`): each case then runs at every size and the last
//! column gives its CPU time over the CPU time at the first size (about the ratio of the sizes
//! when the work is linear). `LOCKLINT_PATHO_TIMEOUT` sets the timeout per case in seconds
//! (default 60).

#[path = "../tests/support/pathological.rs"]
mod pathological;
#[path = "support/rss.rs"]
mod rss;

#[global_allocator]
static ALLOCATOR: locklint::allocator::Allocator = locklint::allocator::ALLOCATOR;

use locklint::engine::{self, Options};
use pathological as p;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Builds an input from a repetition count.
type Generator = fn(usize) -> String;

/// What the child does after analysing the input.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Nothing: the analysis alone.
    Analyse,
    /// Render every finding as human output.
    Human,
    /// Compute the `--add-suppressions` edits.
    AddSuppressions,
    /// Apply every fix, unsafe ones too, in memory, as `--fix --unsafe-fixes` does before it
    /// writes (the analyses of the fixed text included).
    Fix,
}

impl Stage {
    fn arg(self) -> &'static str {
        match self {
            Stage::Analyse => "analyse",
            Stage::Human => "human",
            Stage::AddSuppressions => "add-suppressions",
            Stage::Fix => "fix",
        }
    }

    fn of(arg: &str) -> Stage {
        match arg {
            "human" => Stage::Human,
            "add-suppressions" => Stage::AddSuppressions,
            "fix" => Stage::Fix,
            _ => Stage::Analyse,
        }
    }
}

struct Case {
    name: String,
    file: &'static str,
    text: String,
    stage: Stage,
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Depth of a nested form that makes about `size` bytes.
fn depth_for(build: Generator, size: usize) -> usize {
    let unit = build(101).len().saturating_sub(build(1).len()) / 100;
    p::count_for(size, unit)
}

fn cases(size: usize) -> Vec<Case> {
    let mut out = vec![Case {
        name: "empty".to_string(),
        file: "empty.rs",
        text: "fn main() {}\n".to_string(),
        stage: Stage::Analyse,
    }];
    for form in p::FORMS {
        out.push(Case {
            name: format!("rust/{}", form.name),
            file: "deep.rs",
            text: (form.build)(depth_for(form.build, size)),
            stage: Stage::Analyse,
        });
    }
    let per_line = |f: Generator| p::count_for(size, f(11).len() - f(1).len()) * 10;
    let rust: [(&str, Generator); 7] = [
        ("many_lets", p::many_lets),
        ("nested_block", p::nested_block),
        ("many_redis_calls", p::many_redis_calls),
        ("many_findings", p::many_findings),
        ("get_then_set_chain", p::get_then_set_chain),
        ("many_helper_calls", p::many_helper_calls),
        ("helper_fan_out", p::helper_fan_out),
    ];
    for (name, f) in rust {
        let n = if name == "helper_fan_out" {
            p::count_for(size / 4, f(11).len() - f(1).len()) * 10
        } else {
            per_line(f)
        };
        out.push(Case {
            name: format!("rust/{name}"),
            file: "big.rs",
            text: f(n),
            stage: Stage::Analyse,
        });
    }
    // every finding of one file rendered, or given a suppression comment
    for stage in [Stage::Human, Stage::AddSuppressions, Stage::Fix] {
        out.push(Case {
            name: format!("rust/many_findings+{}", stage.arg()),
            file: "big.rs",
            text: p::many_findings(per_line(p::many_findings)),
            stage,
        });
    }
    // a quarter of the size: each fix triples the text it replaces
    out.push(Case {
        name: "rust/separate_expires+fix".to_string(),
        file: "big.rs",
        text: p::separate_expires(
            p::count_for(
                size / 4,
                p::separate_expires(11).len() - p::separate_expires(1).len(),
            ) * 10,
        ),
        stage: Stage::Fix,
    });
    out.push(Case {
        name: "rust/get_then_set_chain+fix".to_string(),
        file: "big.rs",
        text: p::get_then_set_chain(per_line(p::get_then_set_chain)),
        stage: Stage::Fix,
    });
    // one finding with a related location per call site of its helper, rendered
    out.push(Case {
        name: "rust/many_helper_calls+human".to_string(),
        file: "big.rs",
        text: p::many_helper_calls(per_line(p::many_helper_calls)),
        stage: Stage::Human,
    });
    for (name, inner) in [
        ("rust/inner_doc_lines", true),
        ("rust/outer_doc_lines", false),
    ] {
        out.push(Case {
            name: name.to_string(),
            file: "docs.rs",
            text: p::doc_lines(size, inner),
            stage: Stage::Analyse,
        });
    }
    // wide forms, each a statement or a file's items too large to parse at once
    let wide: [(&str, Generator); 4] = [
        ("wide_call", p::wide_call),
        ("wide_signature", p::wide_signature),
        ("wide_table", p::wide_table),
        ("dense_statements", p::dense_statements),
    ];
    for (name, f) in wide {
        out.push(Case {
            name: format!("rust/{name}"),
            file: "wide.rs",
            text: f(per_line(f)),
            stage: Stage::Analyse,
        });
    }
    out.push(Case {
        name: "rust/long_line_ascii".to_string(),
        file: "line.rs",
        text: p::long_line(size, false),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "rust/long_line_non_ascii".to_string(),
        file: "line.rs",
        text: p::long_line(size, true),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "rust/sql_literal_statements".to_string(),
        file: "queries.rs",
        text: p::sql_literal_statements(per_line(p::sql_literal_statements)),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "sql/advisory_statements".to_string(),
        file: "locks.sql",
        text: p::advisory_statements(per_line(p::advisory_statements)),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "sql/lock_table_updates".to_string(),
        file: "locks.sql",
        text: p::lock_table_updates(per_line(p::lock_table_updates)),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "sql/lock_table_updates+fix".to_string(),
        file: "locks.sql",
        text: p::lock_table_updates(per_line(p::lock_table_updates)),
        stage: Stage::Fix,
    });
    out.push(Case {
        name: "sql/parse_errors".to_string(),
        file: "jobs.sql",
        text: p::sql_parse_errors(per_line(p::sql_parse_errors)),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "sql/long_statement".to_string(),
        file: "locks.sql",
        text: p::sql_long_statement(size),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "sql/column_options".to_string(),
        file: "locks.sql",
        // just under the statement limit of 50,000 tokens
        text: p::sql_column_options(49_980),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "sql/plpgsql_locks_before_raise".to_string(),
        file: "locks.sql",
        text: p::plpgsql_locks_before_raise(per_line(p::plpgsql_locks_before_raise)),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "sql/plpgsql_nested_ifs".to_string(),
        file: "locks.sql",
        // under the statement limit of 50,000 tokens (3 per `IF a THEN`)
        text: p::plpgsql_nested_ifs(per_line(p::plpgsql_nested_ifs).min(16_000)),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "lua/escapes_outside_strings".to_string(),
        file: "scripts.rs",
        // 7 bytes each in the Rust literal
        text: p::lua_escapes_outside_strings(size / 7),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "lua/top_level_calls".to_string(),
        file: "script.lua",
        text: p::lua_top_level_calls(size),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "lua/broken_statements".to_string(),
        file: "script.lua",
        text: p::lua_broken_statements(size),
        stage: Stage::Analyse,
    });
    out.push(Case {
        name: "lua/large_file".to_string(),
        file: "script.lua",
        text: p::lua_file(size * 27 / 10),
        stage: Stage::Analyse,
    });
    out
}

/// In the child: analyse `dir` and print one result line.
fn child(dir: &Path, stage: Stage) {
    locklint::allocator::tune();
    let start = Instant::now();
    // every input is parsed, as a file that can hold lock code would be
    let opts = Options {
        paths: vec![dir.to_path_buf()],
        parse_all: true,
        ..Default::default()
    };
    let report = engine::run(&opts);
    let findings = report.findings.len();
    let parse_errors = report
        .findings
        .iter()
        .filter(|f| f.rule == "parse-error")
        .count();
    let stage_start = Instant::now();
    let produced = match stage {
        Stage::Analyse => 0,
        // written as the command line writes it: one finding at a time, to a stream
        Stage::Human => {
            let mut out = Counted::default();
            let style = locklint::output::human::Style {
                color: false,
                width: 100,
            };
            locklint::output::human::write(&report, style, false, &mut out)
                .expect("a counting sink does not fail");
            out.0
        }
        Stage::AddSuppressions => locklint::suppress::insertions(&report.findings, "bench")
            .iter()
            .map(|(_, edits)| edits.len())
            .sum(),
        Stage::Fix => {
            let plan = locklint::fix::plan(report, locklint::fix::Level::Unsafe, &|overlay| {
                engine::run(&Options {
                    overlay: Some(overlay),
                    ..opts.clone()
                })
            });
            for (_, why) in &plan.backed_out {
                eprintln!("backed out: {why}");
            }
            plan.changes.iter().map(|c| c.fixes).sum()
        }
    };
    std::hint::black_box(produced);
    let stage_wall = stage_start.elapsed().as_secs_f64();
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds();
    let hwm = rss::peak_rss_kib("self");
    println!("RESULT {wall} {hwm} {findings} {parse_errors} {cpu} {stage_wall}");
}

/// A sink that counts the bytes written to it.
#[derive(Default)]
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// User and system time of this process so far, every thread included (`/proc/self/stat`,
/// in clock ticks of 1/100 s).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // after the name: state is field 3 of the man page, utime 14 and stime 15
    (ticks(11) + ticks(12)) / 100.0
}

enum Outcome {
    Done {
        wall: f64,
        stage: f64,
        cpu: f64,
        hwm_kb: u64,
        findings: usize,
        parse_errors: usize,
    },
    Timeout,
    Failed(String),
}

fn run_child(dir: &Path, stage: Stage, timeout: Duration) -> Outcome {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let mut child = match Command::new(exe)
        .arg("--child")
        .arg(dir)
        .arg(stage.arg())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Outcome::Timeout;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Outcome::Failed(e.to_string()),
        }
    };
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut s, &mut out);
    }
    let line = out.lines().find_map(|l| l.strip_prefix("RESULT "));
    match line {
        Some(l) => {
            let f: Vec<&str> = l.split_whitespace().collect();
            Outcome::Done {
                wall: f[0].parse().unwrap_or(f64::NAN),
                stage: f.get(5).and_then(|c| c.parse().ok()).unwrap_or(f64::NAN),
                cpu: f.get(4).and_then(|c| c.parse().ok()).unwrap_or(f64::NAN),
                hwm_kb: f[1].parse().unwrap_or(0),
                findings: f[2].parse().unwrap_or(0),
                parse_errors: f[3].parse().unwrap_or(0),
            }
        }
        None => {
            use std::os::unix::process::ExitStatusExt;
            Outcome::Failed(match status.signal() {
                Some(sig) => format!("killed by signal {sig}"),
                None => format!("exit status {}", status.code().unwrap_or(-1)),
            })
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(
            Path::new(&args[i + 1]),
            Stage::of(args.get(i + 2).map_or("", String::as_str)),
        );
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let sizes: Vec<usize> = std::env::var("LOCKLINT_PATHO_SIZE")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| vec![1_000_000]);
    let timeout = Duration::from_secs(env_num("LOCKLINT_PATHO_TIMEOUT", 60));
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/pathological");
    println!(
        "{:<40} {:>10} {:>8} {:>8} {:>8} {:>10} {:>10} {:>8} {:>9} {:>6}",
        "case",
        "size",
        "wall s",
        "stage s",
        "cpu s",
        "peak RSS",
        "growth",
        "growth/B",
        "findings",
        "cpu x"
    );
    let mut baseline_kb = 0u64;
    let per_size: Vec<Vec<Case>> = sizes.iter().map(|&s| cases(s)).collect();
    for c in 0..per_size[0].len() {
        let name = per_size[0][c].name.clone();
        let wanted = name == "empty"
            || filters.is_empty()
            || filters.iter().any(|f| name.contains(f.as_str()));
        if !wanted {
            continue;
        }
        let mut first_cpu = None;
        for (si, cases) in per_size.iter().enumerate() {
            if name == "empty" && si > 0 {
                break;
            }
            let case = &cases[c];
            let dir = root.join(case.name.replace('/', "-"));
            let _ = std::fs::remove_dir_all(&dir);
            if let Err(e) = std::fs::create_dir_all(&dir)
                .and_then(|_| std::fs::write(dir.join(case.file), &case.text))
            {
                println!("{:<40} cannot write the input: {e}", case.name);
                continue;
            }
            let bytes = case.text.len();
            match run_child(&dir, case.stage, timeout) {
                Outcome::Done {
                    wall,
                    stage,
                    cpu,
                    hwm_kb,
                    findings,
                    parse_errors,
                } => {
                    if case.name == "empty" {
                        baseline_kb = hwm_kb;
                    }
                    let growth = hwm_kb.saturating_sub(baseline_kb) * 1024;
                    let ratio = match first_cpu {
                        Some(f) if f > 0.0 => format!("{:.1}", cpu / f),
                        _ => String::new(),
                    };
                    first_cpu.get_or_insert(cpu);
                    println!(
                        "{:<40} {:>10} {:>8.3} {:>8} {:>8.2} {:>9}K {:>9}K {:>8.1} {:>9} {:>6}",
                        case.name,
                        bytes,
                        wall,
                        if case.stage == Stage::Analyse {
                            String::new()
                        } else {
                            format!("{stage:.3}")
                        },
                        cpu,
                        hwm_kb,
                        growth / 1024,
                        growth as f64 / bytes as f64,
                        if parse_errors > 0 {
                            format!("{findings} ({parse_errors} pe)")
                        } else {
                            findings.to_string()
                        },
                        ratio
                    );
                }
                Outcome::Timeout => println!(
                    "{:<40} {:>10} {:>8} (killed after {} s)",
                    case.name,
                    bytes,
                    "timeout",
                    timeout.as_secs()
                ),
                Outcome::Failed(why) => {
                    println!("{:<40} {:>10} {:>8} ({why})", case.name, bytes, "crashed")
                }
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
