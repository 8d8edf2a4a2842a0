//! `locklint audit` and `cargo locklint audit`: the lock inventory.

use super::{fail, EXIT_CLEAN, EXIT_ERROR};
use crate::audit::{self, AuditFormat};
use crate::engine::ConfigSource;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args, Clone)]
pub struct AuditArgs {
    /// Files or directories to audit.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = AuditFormat::Table)]
    pub format: AuditFormat,
    /// The table with every column (mechanism, acquire site, TTL, token, checked, release,
    /// fenced, purpose, verdict) on one line per lock, however wide.
    #[arg(long)]
    pub wide: bool,
    /// Write the report to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub output_file: Option<PathBuf>,
    /// Use this configuration file for every analysed file.
    #[arg(long, value_name = "FILE", conflicts_with = "isolated")]
    pub config: Option<PathBuf>,
    /// Ignore all configuration files.
    #[arg(long)]
    pub isolated: bool,
    /// The project the paths belong to: every file under it gives facts, the inventory lists
    /// the locks the paths take, release, renew or protect. Default: the Cargo workspace,
    /// `locklint.toml` directory or repository above the paths.
    #[arg(long, value_name = "DIR")]
    pub project_root: Option<PathBuf>,
    #[command(flatten)]
    pub cache: super::CacheArgs,
}

/// Run the audit over `paths` (or `args.paths` when empty) in the project of `root` (else
/// the one detected above the paths; `--project-root` wins over both) and print it; exit 0
/// unless a path or the configuration cannot be read.
pub fn run(
    paths: &[PathBuf],
    exclude_dirs: &[PathBuf],
    root: Option<PathBuf>,
    args: &AuditArgs,
) -> ExitCode {
    let config = if args.isolated {
        ConfigSource::Isolated
    } else if let Some(p) = &args.config {
        ConfigSource::File(p.clone())
    } else {
        ConfigSource::Discover
    };
    let paths = if paths.is_empty() {
        &args.paths[..]
    } else {
        paths
    };
    let explicit = match super::project_root_arg(args.project_root.as_deref()) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let root = explicit
        .or(root)
        .or_else(|| crate::project::root_for(paths, None));
    let mut opts = audit::model::options(paths, exclude_dirs, config);
    opts.cache_dir = args.cache.dir(root.as_deref());
    opts.parse_all = args.cache.no_prefilter;
    opts.project_root = root;
    let result = audit::run(&opts);
    for e in &result.errors {
        if e.starts_with("error") {
            eprintln!("{e}");
        } else {
            eprintln!("error: {e}");
        }
    }
    for n in &result.notes {
        eprintln!("note: {n}");
    }
    for p in &result.empty_paths {
        eprintln!("{}", super::nothing_to_analyse(p));
    }
    if !result.errors.is_empty() && result.files == 0 {
        return ExitCode::from(EXIT_ERROR);
    }
    let text = audit::render(&result, args.format, args.wide);
    if let Some(path) = &args.output_file {
        if let Err(e) = std::fs::write(path, &text) {
            return fail(format!(
                "{}: cannot write the report: {}",
                path.display(),
                crate::discover::describe_io(&e)
            ));
        }
        println!("{}", audit::table::summary_line(&result));
    } else {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
    }
    if result.errors.is_empty() && result.empty_paths.is_empty() {
        ExitCode::from(EXIT_CLEAN)
    } else {
        ExitCode::from(EXIT_ERROR)
    }
}
