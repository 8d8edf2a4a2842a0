//! Command-line interface: `locklint check|rules|explain` and `cargo locklint`.

pub mod audit;
pub mod cargo;
mod check;

use crate::output::Format;
use crate::rules;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code: no finding at or above `fail-on` remains after suppressions, configuration,
/// the baseline and `--changed-since`.
pub const EXIT_CLEAN: u8 = 0;
/// Exit code: such findings remain.
pub const EXIT_FINDINGS: u8 = 1;
/// Exit code: usage error, invalid configuration, a named path that cannot be read or holds
/// nothing to analyse, a file that cannot be written, or an internal error.
pub const EXIT_ERROR: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "locklint",
    version,
    about = "Finds distributed-lock misuse: Redis locks without expiry, unsafe releases and renewals, check-then-act races",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Analyse files and directories (default: the current directory).
    Check(CheckArgs),
    /// Inventory every lock: mechanism, sites, TTL, fencing, what it protects, and a verdict.
    Audit(audit::AuditArgs),
    /// List every rule: name, summary, default severity, whether it has a fix.
    Rules,
    /// Print a rule's documentation page.
    Explain {
        /// Rule name, e.g. `separate-expire`.
        rule: String,
    },
    /// Serve the Language Server Protocol over stdin/stdout (diagnostics, fixes, docs).
    Lsp,
    /// Show the configuration that applies to a path.
    Config {
        /// Print the effective settings.
        #[arg(long)]
        show: bool,
        /// File or directory (default: the current directory).
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Use this configuration file instead of discovering one.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Files or directories to analyse.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub report: ReportArgs,
}

/// Where the analysis cache lives (shared by `check`, `audit` and `cargo locklint`).
#[derive(Debug, Args, Clone, Default)]
pub struct CacheArgs {
    /// The analysis cache's directory. Default: `.locklint_cache` at the project root.
    #[arg(long, value_name = "DIR", env = "LOCKLINT_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Neither read nor write the analysis cache.
    #[arg(long)]
    pub no_cache: bool,
    /// Parse every file, also those whose bytes show they hold nothing a rule reads (slower;
    /// the findings are the same).
    #[arg(long)]
    pub no_prefilter: bool,
}

impl CacheArgs {
    /// The cache directory for a run in the project at `root` (none without a project root,
    /// unless `--cache-dir` names one).
    pub fn dir(&self, root: Option<&std::path::Path>) -> Option<PathBuf> {
        if self.no_cache {
            return None;
        }
        self.cache_dir
            .clone()
            .or_else(|| root.map(|r| r.join(crate::cache::DIR_NAME)))
    }
}

/// Options shared by `locklint check` and `cargo locklint`.
#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Run only these rules (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "RULE,...")]
    pub select: Vec<String>,
    /// Do not run these rules (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "RULE,...")]
    pub ignore: Vec<String>,
    /// Print findings only: no summary line, no notes about skipped files.
    #[arg(long, short)]
    pub quiet: bool,
    /// Do not colour the output (also when `NO_COLOR` is set).
    #[arg(long)]
    pub no_color: bool,
    /// Write the report to FILE (in --format); the terminal gets the human summary.
    #[arg(long, value_name = "FILE")]
    pub output_file: Option<std::path::PathBuf>,
    /// Print how many findings each rule produced.
    #[arg(long)]
    pub statistics: bool,
    /// Report only findings that are not recorded in this baseline file.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<std::path::PathBuf>,
    /// Record the current findings in a baseline file (and exit 0).
    #[arg(long, value_name = "FILE", conflicts_with = "baseline")]
    pub write_baseline: Option<std::path::PathBuf>,
    /// Report only findings in files changed since this git ref (the whole tree is still read
    /// for cross-file facts).
    #[arg(long, value_name = "REF")]
    pub changed_since: Option<String>,
    /// Insert `// locklint: allow(rule) -- REASON` above every current finding (and exit 0).
    #[arg(long, value_name = "REASON")]
    pub add_suppressions: Option<String>,
    /// Use this configuration file for every analysed file.
    #[arg(long, value_name = "FILE", conflicts_with = "isolated")]
    pub config: Option<PathBuf>,
    /// Ignore all configuration files.
    #[arg(long)]
    pub isolated: bool,
    /// The project the paths belong to: every file under it gives facts (helpers, consts,
    /// schema, scripts), findings come from the paths only. Default: the Cargo workspace,
    /// `locklint.toml` directory or repository above the paths.
    #[arg(long, value_name = "DIR")]
    pub project_root: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Apply safe fixes to the files.
    #[arg(long)]
    pub fix: bool,
    /// With `--fix` or `--diff`, also apply unsafe fixes (valid code, but a judgement call).
    #[arg(long)]
    pub unsafe_fixes: bool,
    /// Print a unified diff of what `--fix` would change, and change nothing.
    #[arg(long)]
    pub diff: bool,
    /// Redis version the fixes may rely on, e.g. `8.4` (overrides `redis-version`).
    #[arg(long, value_name = "X.Y", value_parser = parse_redis_version)]
    pub redis_version: Option<String>,
    /// Expiry that fixes give locks taken without one, e.g. `30s` (overrides `default-ttl`).
    #[arg(long, value_name = "DURATION", value_parser = parse_ttl)]
    pub default_ttl: Option<String>,
}

fn parse_redis_version(s: &str) -> Result<String, String> {
    crate::locks::parse_version(s)
        .map(|_| s.trim().to_string())
        .ok_or_else(|| "must look like `7.2` or `8.4`".to_string())
}

fn parse_ttl(s: &str) -> Result<String, String> {
    match crate::config::parse_duration_ms(s) {
        Some(ms) if ms > 0 => Ok(s.trim().to_string()),
        _ => Err("must be a duration such as `30s` or `1500ms`".to_string()),
    }
}

/// Print an error line and return the error exit code.
pub fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(EXIT_ERROR)
}

/// `--project-root`: an existing directory, or a usage error.
pub fn project_root_arg(dir: Option<&std::path::Path>) -> Result<Option<PathBuf>, String> {
    match dir {
        None => Ok(None),
        Some(d) if d.is_dir() => Ok(Some(d.to_path_buf())),
        Some(d) => Err(format!("--project-root {}: not a directory", d.display())),
    }
}

/// The warning for a named path that yields nothing to analyse (the run exits 2).
pub fn nothing_to_analyse(path: &std::path::Path) -> String {
    format!(
        "warning: {}: no .rs, .sql or .lua files to analyse (all ignored or excluded, or none there)",
        path.display()
    )
}

/// `locklint rules`.
pub fn list_rules() -> String {
    let infos = rules::infos();
    let w = infos.iter().map(|i| i.name.len()).max().unwrap_or(4);
    let mut out = format!(
        "{:<w$}  {:<8}  {:<3}  {}\n",
        "RULE", "SEVERITY", "FIX", "SUMMARY"
    );
    for i in infos {
        out.push_str(&format!(
            "{:<w$}  {:<8}  {:<3}  {}\n",
            i.name,
            i.severity.to_string(),
            if i.fixable { "yes" } else { "no" },
            i.summary
        ));
    }
    out
}

/// `locklint explain RULE`.
pub fn explain(rule: &str) -> Result<String, String> {
    match rules::find(rule) {
        Some(i) => Ok(i.doc.to_string()),
        None => Err(rules::validate(&[rule.to_string()], "explain").unwrap_err()),
    }
}

/// Run the `locklint` binary.
pub fn main(args: Vec<std::ffi::OsString>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => return exit_clap(e),
    };
    match cli.command {
        Command::Check(a) => {
            let root = crate::project::root_for(&a.paths, None);
            check::run(&a.paths, &[], root, &a.report)
        }
        Command::Audit(a) => audit::run(&[], &[], None, &a),
        Command::Rules => {
            print!("{}", list_rules());
            ExitCode::from(EXIT_CLEAN)
        }
        Command::Config { show, path, config } => show_config(show, &path, config.as_deref()),
        Command::Lsp => crate::lsp::serve(),
        Command::Explain { rule } => match explain(&rule) {
            Ok(doc) => {
                print!("{doc}");
                ExitCode::from(EXIT_CLEAN)
            }
            Err(e) => fail(e),
        },
    }
}

/// `locklint config --show PATH`.
pub(crate) fn show_config(
    show: bool,
    path: &std::path::Path,
    file: Option<&std::path::Path>,
) -> ExitCode {
    if !show {
        return fail("`locklint config` needs `--show`");
    }
    let loaded = match file {
        Some(f) => crate::config::load(f)
            .map(Option::unwrap_or_default)
            .map_err(|e| e.render()),
        None => {
            let resolver = crate::config::Resolver::new(crate::config::Mode::Discover);
            let found = resolver.for_file(path).map(|s| (*s).clone());
            for (p, why) in resolver.notes() {
                eprintln!("note: {}: {why}", crate::source::display_path(&p));
            }
            found.map_err(|e| e.render())
        }
    };
    match loaded {
        Ok(s) => {
            print!("{}", crate::config::show(&s));
            ExitCode::from(EXIT_CLEAN)
        }
        Err(e) => {
            eprint!("{e}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Print a clap error (or help/version) with the right exit code.
pub fn exit_clap(e: clap::Error) -> ExitCode {
    let code = if e.use_stderr() {
        EXIT_ERROR
    } else {
        EXIT_CLEAN
    };
    let _ = e.print();
    ExitCode::from(code)
}

/// Run `f`, turning a panic into one error line and exit code 2.
pub fn guarded(f: impl FnOnce() -> ExitCode + std::panic::UnwindSafe) -> ExitCode {
    crate::allocator::tune();
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("error: internal error: {msg}{at}; please report it");
    }));
    std::panic::catch_unwind(f).unwrap_or(ExitCode::from(EXIT_ERROR))
}
