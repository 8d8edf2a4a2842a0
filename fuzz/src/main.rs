//! `locklint-fuzz <TARGET|all> --seconds N [--seed S] [--corpus DIR] ...`
//!
//! The parent process runs the fuzz loop in a child process (this same binary with
//! `--worker`), which announces each input over a pipe before running it. A failure the child
//! catches (panic, slow, memory, hang) is reported back; a child that dies (stack overflow,
//! abort) is restarted after the input it died on. Every failing input is saved under the
//! artifacts directory and printed.

use locklint_fuzz::corpus;
use locklint_fuzz::exec::{execute, Failure, Limits};
use locklint_fuzz::runner::{fuzz, preview, save_artifact, Budget, Inputs, Observer};
use locklint_fuzz::targets::{self, Target, TARGETS};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

const USAGE: &str =
    "usage: locklint-fuzz <TARGET|all|list> [--seconds N] [--iterations N] [--seed S]
                     [--corpus DIR]... [--max-len BYTES] [--artifacts DIR] [--input FILE]

Runs the target (or every target, one after the other) for N seconds each (default 60), on
the fixture corpus (mutated) and on generated inputs. --corpus adds seed directories;
--input runs one saved input and reports it. Failing inputs are saved under --artifacts
(default fuzz/artifacts/<target>/). Exit code 1 when anything failed.";

#[derive(Debug, Clone)]
struct Args {
    target: String,
    seconds: f64,
    iterations: Option<u64>,
    seed: u64,
    corpus: Vec<PathBuf>,
    max_len: usize,
    artifacts: PathBuf,
    input: Option<PathBuf>,
    worker: bool,
    from: u64,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut it = args.iter();
    let target = it.next().ok_or("missing target")?.clone();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let mut a = Args {
        target,
        seconds: 60.0,
        iterations: None,
        seed,
        corpus: vec![corpus::fixtures_dir()],
        max_len: 1 << 20,
        artifacts: Path::new(env!("CARGO_MANIFEST_DIR")).join("artifacts"),
        input: None,
        worker: false,
        from: 0,
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |v: &String| {
            v.parse::<f64>()
                .map_err(|_| format!("{flag}: not a number: {v}"))
        };
        // counts and the seed are read exactly (a seed of 19 digits does not survive a float)
        let int = |v: &String| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: not a whole number: {v}"))
        };
        match flag.as_str() {
            "--seconds" => a.seconds = num(value()?)?,
            "--iterations" => a.iterations = Some(int(value()?)?),
            "--seed" => a.seed = int(value()?)?,
            "--corpus" => a.corpus.push(PathBuf::from(value()?)),
            "--max-len" => a.max_len = int(value()?)? as usize,
            "--artifacts" => a.artifacts = PathBuf::from(value()?),
            "--input" => a.input = Some(PathBuf::from(value()?)),
            "--from" => a.from = int(value()?)?,
            "--worker" => a.worker = true,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.is_empty() || argv[0] == "--help" || argv[0] == "-h" {
        println!("{USAGE}\n\ntargets:");
        for t in TARGETS {
            println!("  {:<10} {}", t.name, t.about);
        }
        return ExitCode::SUCCESS;
    }
    let args = match parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.target == "list" {
        for t in TARGETS {
            println!("{}", t.name);
        }
        return ExitCode::SUCCESS;
    }
    let chosen: Vec<&'static Target> = if args.target == "all" {
        TARGETS.iter().collect()
    } else {
        match targets::find(&args.target) {
            Some(t) => vec![t],
            None => {
                eprintln!("error: unknown target `{}` (see --help)", args.target);
                return ExitCode::from(2);
            }
        }
    };
    if args.worker {
        return worker(chosen[0], &args);
    }
    if let Some(file) = &args.input {
        return replay(chosen[0], file);
    }
    let mut failed = false;
    for t in chosen {
        failed |= parent(t, &args) > 0;
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Run one saved input in this process.
fn replay(target: &Target, file: &Path) -> ExitCode {
    let input = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    match execute(target, &input, &Limits::default()) {
        Ok(()) => {
            println!(
                "{}: ok in {:.3} s ({} bytes)",
                target.name,
                started.elapsed().as_secs_f64(),
                input.len()
            );
            ExitCode::SUCCESS
        }
        Err(f) => {
            println!("{}: {f}", target.name);
            ExitCode::from(1)
        }
    }
}

// ---- child side: frames on stdout ----

fn frame(out: &mut impl Write, tag: u8, parts: &[&[u8]]) {
    let mut buf = vec![tag];
    buf.extend((parts.len() as u64).to_le_bytes());
    for p in parts {
        buf.extend((p.len() as u64).to_le_bytes());
        buf.extend(*p);
    }
    // the parent is gone when this fails: nothing left to report to
    let _ = out.write_all(&buf);
    let _ = out.flush();
}

struct Pipe(std::io::Stdout);

impl Observer for Pipe {
    fn before(&mut self, index: u64, input: &[u8]) {
        frame(&mut self.0.lock(), b'I', &[&index.to_le_bytes(), input]);
    }
    fn failed(&mut self, _index: u64, _input: &[u8], f: &Failure) {
        frame(
            &mut self.0.lock(),
            b'F',
            &[f.kind().as_bytes(), f.to_string().as_bytes()],
        );
    }
}

fn worker(target: &'static Target, args: &Args) -> ExitCode {
    let seeds = corpus::seeds(target, &args.corpus, args.max_len);
    let inputs = Inputs {
        target,
        seeds: &seeds,
        seed: args.seed,
        max_len: args.max_len,
    };
    let budget = Budget {
        until: Instant::now() + Duration::from_secs_f64(args.seconds),
        iterations: args.iterations,
    };
    let mut pipe = Pipe(std::io::stdout());
    let n = fuzz(&inputs, args.from, budget, &Limits::default(), &mut pipe);
    frame(&mut pipe.0.lock(), b'E', &[&n.to_le_bytes()]);
    // a hung input's thread is still running: leave without waiting for it
    std::process::exit(0)
}

// ---- parent side ----

fn read_frame(r: &mut impl Read) -> Option<(u8, Vec<Vec<u8>>)> {
    let mut tag = [0u8; 1];
    r.read_exact(&mut tag).ok()?;
    let mut n = [0u8; 8];
    r.read_exact(&mut n).ok()?;
    let mut parts = Vec::new();
    for _ in 0..u64::from_le_bytes(n) {
        let mut len = [0u8; 8];
        r.read_exact(&mut len).ok()?;
        let mut p = vec![0u8; u64::from_le_bytes(len) as usize];
        r.read_exact(&mut p).ok()?;
        parts.push(p);
    }
    Some((tag[0], parts))
}

fn report_failure(target: &Target, args: &Args, index: u64, input: &[u8], what: &str, kind: &str) {
    let saved = match save_artifact(&args.artifacts, target, kind, input) {
        Ok(p) => p.display().to_string(),
        Err(e) => format!("(not saved: {e})"),
    };
    println!(
        "FAILURE {} #{index} ({} bytes): {what}\n  saved: {saved}\n  input: {}",
        target.name,
        input.len(),
        preview(input, 600)
    );
}

/// Fuzz one target for the time given, restarting the child after a crash. Returns the
/// number of failures.
fn parent(target: &'static Target, args: &Args) -> usize {
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(args.seconds);
    let mut from = 0u64;
    let mut execs = 0u64;
    let mut failures = 0usize;
    println!(
        "fuzzing {} for {:.0} s (seed {}, max input {} bytes)",
        target.name, args.seconds, args.seed, args.max_len
    );
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let iterations_left = args.iterations.map(|n| n.saturating_sub(execs));
        if left.is_zero() || iterations_left == Some(0) {
            break;
        }
        let exe = match std::env::current_exe() {
            Ok(e) => e,
            Err(e) => {
                eprintln!("error: cannot find this program: {e}");
                return failures + 1;
            }
        };
        let mut cmd = Command::new(exe);
        cmd.arg(target.name)
            .args(["--worker", "--from", &from.to_string()])
            .args(["--seed", &args.seed.to_string()])
            .args(["--seconds", &left.as_secs_f64().to_string()])
            .args(["--max-len", &args.max_len.to_string()]);
        if let Some(n) = iterations_left {
            cmd.args(["--iterations", &n.to_string()]);
        }
        for c in args.corpus.iter().skip(1) {
            cmd.arg("--corpus").arg(c);
        }
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: cannot start the worker: {e}");
                return failures + 1;
            }
        };
        let stderr = child.stderr.take().map(|mut s| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = s.read_to_end(&mut buf);
                buf
            })
        });
        let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut last: Option<(u64, Vec<u8>)> = None;
        let mut ended = false;
        let mut hung = false;
        while let Some((tag, parts)) = read_frame(&mut out) {
            match (tag, parts.as_slice()) {
                (b'I', [index, input]) => {
                    let i = u64::from_le_bytes(index.as_slice().try_into().unwrap_or([0; 8]));
                    last = Some((i, input.clone()));
                    execs += 1;
                }
                (b'F', [kind, message]) => {
                    let kind = String::from_utf8_lossy(kind).to_string();
                    hung |= kind == "hang";
                    if let Some((i, input)) = &last {
                        report_failure(
                            target,
                            args,
                            *i,
                            input,
                            &String::from_utf8_lossy(message),
                            &kind,
                        );
                    }
                    failures += 1;
                }
                (b'E', _) => ended = true,
                _ => {}
            }
        }
        let status = child.wait();
        let err = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
        if !ended && !hung {
            let tail = String::from_utf8_lossy(&err);
            let tail: String = tail.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
            let what = match &status {
                Ok(s) => format!("the process died ({s}): {tail}"),
                Err(e) => format!("the process was lost: {e}"),
            };
            match &last {
                Some((i, input)) => report_failure(target, args, *i, input, &what, "crash"),
                None => println!("FAILURE {}: {what}", target.name),
            }
            failures += 1;
        }
        // after a crash or a hang (the child leaves its hung thread behind), go on with the
        // next input until the time is up
        match &last {
            Some((i, _)) if !ended || hung => from = i + 1,
            None if !ended => break,
            _ => break,
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{}: {execs} executions in {secs:.1} s ({:.1}/s), {failures} failures",
        target.name,
        execs as f64 / secs.max(1e-9)
    );
    failures
}
