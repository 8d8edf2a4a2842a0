//! `locklint check`: run the engine and print the report.

use super::{fail, ReportArgs, EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS};
use crate::baseline::Baseline;
use crate::engine::{self, Options};
use crate::output::{self, human, Format};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Whether to colour human output.
/// Colour when stdout is a terminal (or `CLICOLOR_FORCE` is set), never with `--no-color`
/// or a non-empty `NO_COLOR`.
fn use_color(args: &ReportArgs) -> bool {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    !args.no_color && !set("NO_COLOR") && (set("CLICOLOR_FORCE") || std::io::stdout().is_terminal())
}

fn width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100)
}

/// Configuration per the flags: `--isolated`, `--config FILE`, or discovery.
pub fn config_source(args: &ReportArgs) -> engine::ConfigSource {
    if args.isolated {
        engine::ConfigSource::Isolated
    } else if let Some(p) = &args.config {
        engine::ConfigSource::File(p.clone())
    } else {
        engine::ConfigSource::Discover
    }
}

/// Files changed since `reference` (committed, staged, unstaged and untracked), canonical.
fn changed_files(reference: &str) -> Result<std::collections::HashSet<PathBuf>, String> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .map_err(|e| format!("cannot run git: {e}"))
            .and_then(|o| {
                if o.status.success() {
                    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
                } else {
                    Err(format!(
                        "git {}: {}",
                        args.join(" "),
                        String::from_utf8_lossy(&o.stderr).trim()
                    ))
                }
            })
    };
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?.trim());
    let mut names = git(&["diff", "--name-only", reference, "--"])?;
    names.push_str(&git(&[
        "ls-files",
        "--others",
        "--exclude-standard",
        "--full-name",
    ])?);
    Ok(names
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let p = top.join(l);
            p.canonicalize().unwrap_or(p)
        })
        .collect())
}

/// `--add-suppressions`: write a suppression above every finding.
fn add_suppressions(report: &crate::engine::Report, reason: &str) -> ExitCode {
    let reason = reason.trim();
    if reason.is_empty() {
        return fail("--add-suppressions needs a reason");
    }
    let mut added = 0;
    let mut files = 0;
    let mut failed = false;
    for (file, edits) in crate::suppress::insertions(&report.findings, reason) {
        let new = match crate::fix::apply_to_text(&file.text, &edits) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {}: {e}", file.display);
                failed = true;
                continue;
            }
        };
        match crate::fix::write_atomically(&file.path, &file.text, &new) {
            Ok(()) => {
                added += edits.len();
                files += 1;
            }
            Err(e) => {
                eprintln!("error: {}: {e}", file.display);
                failed = true;
            }
        }
    }
    println!(
        "added {} in {}",
        human::plural(added, "suppression"),
        human::plural(files, "file")
    );
    ExitCode::from(if failed { EXIT_ERROR } else { EXIT_CLEAN })
}

/// `--fix` / `--diff`: apply fixes in memory until they settle, then write the changed files
/// (or print the diff and stop). Returns the report after fixing and whether a write failed.
fn fix_files(
    opts: &Options,
    args: &ReportArgs,
    first: crate::engine::Report,
) -> Result<(crate::engine::Report, bool), ExitCode> {
    let level = if args.unsafe_fixes {
        crate::fix::Level::Unsafe
    } else {
        crate::fix::Level::Safe
    };
    let mut plan = crate::fix::plan(first, level, &|overlay| {
        engine::run(&Options {
            overlay: Some(overlay),
            ..opts.clone()
        })
    });
    for (file, why) in &plan.backed_out {
        eprintln!("warning: {file}: {why}");
    }
    for (file, fix) in &plan.repeated {
        eprintln!("warning: {file}: the fix `{fix}` was not applied: the code it writes still has the defect");
    }
    if plan.unconverged {
        eprintln!(
            "warning: fixes were still changing the code after {} passes; the last changes were not applied",
            crate::fix::MAX_PASSES
        );
    }
    if args.diff {
        let n: usize = plan.changes.iter().map(|c| c.fixes).sum();
        let mut stdout = std::io::stdout().lock();
        let _ = stdout
            .write_all(crate::fix::unified_diff(&plan.changes).as_bytes())
            .and_then(|_| stdout.flush());
        if !args.quiet {
            eprintln!(
                "{} would be applied to {}",
                human::plural(n, "fix"),
                human::plural(plan.changes.len(), "file")
            );
        }
        return Err(ExitCode::from(if plan.changes.is_empty() {
            EXIT_CLEAN
        } else {
            EXIT_FINDINGS
        }));
    }
    let mut fixed = 0;
    let mut failed = false;
    for c in &plan.changes {
        match crate::fix::write_atomically(&c.path, &c.original, &c.new) {
            Ok(()) => fixed += c.fixes,
            Err(e) => {
                eprintln!("error: {}: {e}", c.display);
                failed = true;
            }
        }
    }
    // the plan's last analysis is of the texts just written, unless a write failed
    let mut report = match plan.report.take() {
        Some(r) if !failed => r,
        _ => engine::run(opts),
    };
    report.fixed = Some(fixed);
    Ok((report, failed))
}

/// The engine's options for `paths` per the flags: the project root (`--project-root`, else
/// `root`), rules, configuration, fix flavour, and the findings to leave out (`--baseline`,
/// `--changed-since`). A usage or I/O error is printed and becomes the exit code.
pub fn options(
    paths: &[PathBuf],
    exclude_dirs: &[PathBuf],
    root: Option<PathBuf>,
    args: &ReportArgs,
) -> Result<Options, ExitCode> {
    let project_root = super::project_root_arg(args.project_root.as_deref())
        .map_err(fail)?
        .or(root);
    crate::rules::validate(&args.select, "--select").map_err(fail)?;
    crate::rules::validate(&args.ignore, "--ignore").map_err(fail)?;
    let baseline = match &args.baseline {
        Some(p) => Some(std::sync::Arc::new(
            Baseline::read(p).map_err(|e| fail(format!("{}: {e}", p.display())))?,
        )),
        None => None,
    };
    let only_files = match &args.changed_since {
        Some(r) => Some(std::sync::Arc::new(changed_files(r).map_err(fail)?)),
        None => None,
    };
    Ok(Options {
        paths: paths.to_vec(),
        exclude_dirs: exclude_dirs.to_vec(),
        cache_dir: args.cache.dir(project_root.as_deref()),
        parse_all: args.cache.no_prefilter,
        project_root,
        select: args.select.clone(),
        ignore: args.ignore.clone(),
        config: config_source(args),
        redis_version: args.redis_version.clone(),
        default_ttl: args.default_ttl.clone(),
        baseline,
        only_files,
        ..Default::default()
    })
}

/// Analyse the project of `paths` (`root`, unless `--project-root` says otherwise), print the
/// report of `paths`; returns the process exit code.
pub fn run(
    paths: &[PathBuf],
    exclude_dirs: &[PathBuf],
    root: Option<PathBuf>,
    args: &ReportArgs,
) -> ExitCode {
    let opts = match options(paths, exclude_dirs, root, args) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let mut report = engine::run(&opts);
    if let Some(e) = &report.config_error {
        eprint!("{e}");
        return ExitCode::from(EXIT_ERROR);
    }
    if let Some(reason) = &args.add_suppressions {
        return add_suppressions(&report, reason);
    }
    if let Some(path) = &args.write_baseline {
        let b = Baseline::of(&report.findings);
        if let Err(e) = b.write(path) {
            return fail(format!("{}: {e}", path.display()));
        }
        println!(
            "recorded {} in the baseline {}",
            human::plural(report.findings.len(), "finding"),
            path.display()
        );
        return ExitCode::from(EXIT_CLEAN);
    }
    if report.baseline_gone > 0 && !args.quiet {
        eprintln!(
            "note: {} of the baseline {} gone (fixed or removed)",
            human::plural(report.baseline_gone, "finding"),
            if report.baseline_gone == 1 {
                "is"
            } else {
                "are"
            }
        );
    }
    let mut write_failed = false;
    if args.fix || args.diff {
        match fix_files(&opts, args, std::mem::take(&mut report)) {
            Ok((r, failed)) => {
                report = r;
                write_failed = failed;
            }
            Err(code) => return code,
        }
    }
    report.unsafe_fixes = args.unsafe_fixes;
    print_problems(&report, args.quiet);
    let style = human::Style {
        color: use_color(args),
        width: width(),
    };
    let statistics = args.statistics.then(|| output::statistics(&report));
    let stats_on_stdout = args.format == Format::Human || args.output_file.is_some();
    if let Some(stats) = statistics.as_ref().filter(|_| !stats_on_stdout) {
        // keep stdout parseable
        eprint!("{stats}");
    }
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    // a closed pipe (`| head`) is not an error of the analysis: stdout's errors are ignored
    let _ = if let Some(path) = &args.output_file {
        // the file gets the report without colour; the terminal the summary
        let plain = human::Style {
            color: false,
            ..style
        };
        if let Err(e) = write_report_file(path, &report, args.format, plain, args.quiet) {
            return fail(format!(
                "{}: cannot write the report: {}",
                path.display(),
                crate::discover::describe_io(&e)
            ));
        }
        if args.quiet {
            Ok(())
        } else {
            writeln!(stdout, "{}", human::summary(&report))
        }
    } else {
        output::write(&report, args.format, style, args.quiet, &mut stdout)
    };
    if let Some(stats) = statistics.as_ref().filter(|_| stats_on_stdout) {
        let _ = stdout.write_all(stats.as_bytes());
    }
    let _ = stdout.flush();
    exit_code(&report, write_failed)
}

/// Write the report to a file, one finding at a time where the format allows.
fn write_report_file(
    path: &std::path::Path,
    report: &engine::Report,
    format: Format,
    style: human::Style,
    quiet: bool,
) -> std::io::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    output::write(report, format, style, quiet, &mut file)?;
    file.flush()
}

/// Print what is not a finding, on stderr: named paths with nothing to analyse, paths that
/// cannot be read, and (unless `quiet`) notes about skipped files and unusable manifests.
pub fn print_problems(report: &engine::Report, quiet: bool) {
    for p in &report.empty_paths {
        eprintln!("{}", super::nothing_to_analyse(p));
    }
    for e in &report.errors {
        eprintln!(
            "error: {}: {}",
            crate::source::display_path(&e.path),
            e.message
        );
    }
    if !quiet {
        for n in &report.notes {
            eprintln!("note: {}: {}", n.path, n.message);
        }
    }
}

/// The exit code of a report: 2 when a named path could not be read or held nothing to
/// analyse (or a fix could not be written), else 1 when findings that fail the run remain.
pub fn exit_code(report: &engine::Report, write_failed: bool) -> ExitCode {
    if !report.errors.is_empty() || !report.empty_paths.is_empty() || write_failed {
        ExitCode::from(EXIT_ERROR)
    } else if report.failing == 0 {
        ExitCode::from(EXIT_CLEAN)
    } else {
        ExitCode::from(EXIT_FINDINGS)
    }
}
