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
    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH")]
    manifest_path: Option<PathBuf>,
    /// Package(s) to analyse.
    #[arg(short, long, value_name = "SPEC")]
    package: Vec<String>,
    /// Analyse every package of the workspace.
    #[arg(long)]
    workspace: bool,
    #[command(flatten)]
    report: ReportArgs,
}

#[derive(Debug, Subcommand)]
enum CargoCommand {
    /// List every rule.
    Rules,
    /// Print a rule's documentation page.
    Explain { rule: String },
    /// Inventory every lock of the selected packages.
    Audit(CargoAuditArgs),
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
    pub dirs: Vec<PathBuf>,
    pub members: Vec<PathBuf>,
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
    Ok(Selection {
        dirs: selected.iter().map(|p| dir_of(p)).collect(),
        members: member_dirs,
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
    match a.command {
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
        Some(CargoCommand::Audit(args)) => {
            return match select(args.manifest_path.as_deref(), &args.package, args.workspace) {
                Ok(sel) => super::audit::run(&sel.dirs, &sel.members, &args.audit),
                Err(e) => fail(e),
            }
        }
        None => {}
    }
    let sel = match select(a.manifest_path.as_deref(), &a.package, a.workspace) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    super::check::run(&sel.dirs, &sel.members, &a.report)
}
