//! `cargo locklint`: analyse the packages of a Cargo workspace, selected as cargo does.

use super::{exit_clap, fail, list_rules, ReportArgs, EXIT_CLEAN};
use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "cargo", bin_name = "cargo")]
enum CargoCli {
    /// Find distributed-lock misuse in the packages of a Cargo workspace.
    Locklint(CargoArgs),
}

#[derive(Debug, Args)]
#[command(version, args_conflicts_with_subcommands = true)]
struct CargoArgs {
    #[command(subcommand)]
    command: Option<CargoCommand>,
    #[command(flatten)]
    check: CargoCheckArgs,
}

/// `cargo locklint [check]`: package selection plus the options of `locklint check`.
#[derive(Debug, Args)]
struct CargoCheckArgs {
    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH")]
    manifest_path: Option<PathBuf>,
    /// Package(s) to analyse.
    #[arg(short, long, value_name = "SPEC")]
    package: Vec<String>,
    /// Analyse every package of the workspace.
    #[arg(long)]
    workspace: bool,
    /// `json`: cargo's JSON messages (rustc-style diagnostics with suggested fixes), for
    /// editors that run `cargo check --message-format=json` (rust-analyzer). Not with
    /// `--format`.
    #[arg(long, value_enum, default_value_t = MessageFormat::Human, conflicts_with = "format")]
    message_format: MessageFormat,
    /// With `--message-format=json`: also run `cargo check` or `cargo clippy` on the same
    /// packages and pass their messages through, so compiler errors still show.
    #[arg(long, value_enum, value_name = "COMMAND", requires = "message_format")]
    also: Option<AlsoRun>,
    #[command(flatten)]
    report: ReportArgs,
}

/// `--message-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum MessageFormat {
    Human,
    Json,
}

/// `--also`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AlsoRun {
    Check,
    Clippy,
}

#[derive(Debug, Subcommand)]
enum CargoCommand {
    /// Analyse the selected packages (the default when no subcommand is given).
    Check(CargoCheckArgs),
    /// Inventory every lock of the selected packages.
    Audit(CargoAuditArgs),
    /// List every rule.
    Rules,
    /// Print a rule's documentation page.
    Explain { rule: String },
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

/// `cargo locklint audit`: package selection plus the audit's own options.
#[derive(Debug, Args)]
struct CargoAuditArgs {
    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH")]
    manifest_path: Option<PathBuf>,
    /// Package(s) to audit.
    #[arg(short, long, value_name = "SPEC")]
    package: Vec<String>,
    /// Audit every package of the workspace.
    #[arg(long)]
    workspace: bool,
    #[command(flatten)]
    audit: super::audit::AuditArgs,
}

/// The directories of the selected packages, and all member directories (to keep walks apart).
pub struct Selection {
    /// The workspace root: the project root.
    pub root: PathBuf,
    pub dirs: Vec<PathBuf>,
    pub members: Vec<PathBuf>,
    /// The selected packages as cargo describes them (for cargo's JSON messages).
    pub packages: Vec<crate::output::cargo_json::PackageInfo>,
}

/// The nearest `Cargo.toml` at or above `dir`.
fn nearest_manifest(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|d| d.join("Cargo.toml"))
        .find(|p| p.is_file())
}

/// Select packages as cargo does: `-p` names, `--workspace`, the package of the current
/// manifest, or the default members (all members) at the root of a virtual manifest.
pub fn select(
    manifest_path: Option<&Path>,
    packages: &[String],
    workspace: bool,
) -> Result<Selection, String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let manifest = match manifest_path {
        Some(p) => {
            let p = if p.is_absolute() {
                p.to_path_buf()
            } else {
                cwd.join(p)
            };
            if !p.is_file() {
                return Err(format!("manifest path `{}` does not exist", p.display()));
            }
            p
        }
        None => nearest_manifest(&cwd).ok_or_else(|| {
            format!(
                "could not find `Cargo.toml` in `{}` or any parent directory",
                cwd.display()
            )
        })?,
    };
    let meta = cargo_metadata::MetadataCommand::new()
        .manifest_path(&manifest)
        .no_deps()
        .exec()
        .map_err(|e| {
            let text = e.to_string();
            format!(
                "`cargo metadata` failed: {}",
                text.lines().next().unwrap_or(&text)
            )
        })?;
    let members: Vec<&cargo_metadata::Package> = meta
        .packages
        .iter()
        .filter(|p| meta.workspace_members.contains(&p.id))
        .collect();
    let dir_of = |p: &cargo_metadata::Package| {
        p.manifest_path
            .parent()
            .map(|d| d.as_std_path().to_path_buf())
            .unwrap_or_default()
    };
    let member_dirs: Vec<PathBuf> = members.iter().map(|p| dir_of(p)).collect();
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let selected: Vec<&cargo_metadata::Package> = if !packages.is_empty() {
        let mut out = Vec::new();
        for spec in packages {
            match members.iter().find(|p| p.name.as_str() == spec) {
                Some(p) => out.push(*p),
                None => {
                    let names: Vec<&str> = members.iter().map(|p| p.name.as_str()).collect();
                    return Err(format!(
                        "package `{spec}` is not a member of the workspace (members: {})",
                        names.join(", ")
                    ));
                }
            }
        }
        out
    } else if workspace {
        members.clone()
    } else {
        let m = canon(&manifest);
        let current = members
            .iter()
            .find(|p| canon(p.manifest_path.as_std_path()) == m);
        let at_root = canon(&meta.workspace_root.as_std_path().join("Cargo.toml")) == m;
        let defaults: Vec<&cargo_metadata::Package> =
            if meta.workspace_default_members.is_available() {
                members
                    .iter()
                    .filter(|p| meta.workspace_default_members.contains(&p.id))
                    .copied()
                    .collect()
            } else {
                Vec::new()
            };
        match current {
            Some(p) if !at_root || defaults.is_empty() => vec![*p],
            _ if !defaults.is_empty() => defaults,
            _ => members.clone(),
        }
    };
    let packages = selected
        .iter()
        .map(|p| crate::output::cargo_json::PackageInfo {
            id: p.id.repr.clone(),
            manifest_path: p.manifest_path.as_std_path().to_path_buf(),
            dir: canon(&dir_of(p)),
            target: p
                .targets
                .first()
                .and_then(|t| serde_json::to_value(t).ok())
                .unwrap_or(serde_json::Value::Null),
        })
        .collect();
    // paths relative to the current directory when it lies in the workspace, as `locklint
    // check` names them, so that both show a finding the same way
    let root = meta.workspace_root.as_std_path().to_path_buf();
    let style = if crate::project::lexical(&cwd).starts_with(&root) {
        PathBuf::from(".")
    } else {
        root.clone()
    };
    Ok(Selection {
        root: crate::project::in_style_of(&root, &style),
        dirs: selected
            .iter()
            .map(|p| crate::project::in_style_of(&dir_of(p), &style))
            .collect(),
        members: member_dirs,
        packages,
    })
}

/// Run the `cargo-locklint` binary (invoked by cargo as `cargo-locklint locklint ...`).
pub fn main(mut args: Vec<OsString>) -> ExitCode {
    // when run directly rather than through cargo, accept the arguments without `locklint`
    if args.get(1).is_none_or(|a| a != "locklint") {
        args.insert(1, OsString::from("locklint"));
    }
    let CargoCli::Locklint(a) = match CargoCli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => return exit_clap(e),
    };
    let check = match a.command {
        None => a.check,
        Some(CargoCommand::Check(c)) => c,
        Some(CargoCommand::Rules) => {
            print!("{}", list_rules());
            return ExitCode::from(EXIT_CLEAN);
        }
        Some(CargoCommand::Explain { rule }) => {
            return match super::explain(&rule) {
                Ok(doc) => {
                    print!("{doc}");
                    ExitCode::from(EXIT_CLEAN)
                }
                Err(e) => fail(e),
            }
        }
        Some(CargoCommand::Lsp) => return crate::lsp::serve(),
        Some(CargoCommand::Config { show, path, config }) => {
            return super::show_config(show, &path, config.as_deref())
        }
        Some(CargoCommand::Audit(args)) => {
            return match select(args.manifest_path.as_deref(), &args.package, args.workspace) {
                Ok(sel) => super::audit::run(&sel.dirs, &sel.members, Some(sel.root), &args.audit),
                Err(e) => fail(e),
            }
        }
    };
    let sel = match select(
        check.manifest_path.as_deref(),
        &check.package,
        check.workspace,
    ) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    if check.message_format == MessageFormat::Json {
        return json_messages(&check, &sel);
    }
    super::check::run(
        &sel.dirs,
        &sel.members,
        Some(sel.root.clone()),
        &check.report,
    )
}

/// `--message-format=json`: cargo's message stream, optionally after `cargo check`'s own.
fn json_messages(a: &CargoCheckArgs, sel: &Selection) -> ExitCode {
    use std::io::Write;
    let mut success = true;
    let mut out = std::io::stdout().lock();
    if let Some(also) = a.also {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.arg(match also {
            AlsoRun::Check => "check",
            AlsoRun::Clippy => "clippy",
        })
        .arg("--message-format=json");
        if let Some(m) = &a.manifest_path {
            cmd.arg("--manifest-path").arg(m);
        }
        for p in &a.package {
            cmd.arg("-p").arg(p);
        }
        if a.workspace {
            cmd.arg("--workspace");
        }
        match cmd.stderr(std::process::Stdio::inherit()).output() {
            Ok(o) => {
                success = o.status.success();
                for line in String::from_utf8_lossy(&o.stdout).lines() {
                    // one `build-finished` at the end, for both
                    if !line.contains("\"reason\":\"build-finished\"") {
                        let _ = writeln!(out, "{line}");
                    }
                }
            }
            Err(e) => return fail(format!("cannot run cargo: {e}")),
        }
    }
    let opts =
        match super::check::options(&sel.dirs, &sel.members, Some(sel.root.clone()), &a.report) {
            Ok(o) => o,
            Err(code) => return code,
        };
    let report = crate::engine::run(&opts);
    if let Some(e) = &report.config_error {
        eprint!("{e}");
        return ExitCode::from(super::EXIT_ERROR);
    }
    super::check::print_problems(&report, a.report.quiet);
    let code = super::check::exit_code(&report, false);
    let clean = code == ExitCode::from(EXIT_CLEAN);
    let text = crate::output::cargo_json::render(&report, &sel.packages, success && clean);
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    if !success && clean {
        ExitCode::from(super::EXIT_FINDINGS)
    } else {
        code
    }
}
