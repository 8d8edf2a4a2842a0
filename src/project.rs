//! The project a run belongs to: the directory whose files give the facts (lock helpers,
//! consts, key builders, the SQL schema, Lua scripts, struct fields) that findings rest on,
//! whatever files are selected for findings.
//!
//! The root of a path is, looking at the path's directory and its ancestors up to and
//! including the first one that holds `.git` (the repository root; nothing above it is looked
//! at):
//!
//! 1. the nearest directory whose `Cargo.toml` has a `[workspace]` table;
//! 2. else the outermost directory whose `Cargo.toml` has a `[package]` table;
//! 3. else the outermost directory holding `locklint.toml` or `.locklint.toml` (a nested
//!    configuration configures a part of the project; it does not start another one, so that
//!    a file checked alone has the facts it has in the whole tree);
//! 4. else the repository root (the directory holding `.git`);
//! 5. else none: the named paths are the project (as before projects existed).
//!
//! A manifest that is not valid TOML marks nothing. Several paths share the root they all
//! have; when their roots differ, the outermost one is used if it holds all the others, else
//! there is none. Nothing here runs `cargo metadata`.

use std::path::{Component, Path, PathBuf};

/// What marked a directory as the project root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A `Cargo.toml` with `[workspace]`.
    CargoWorkspace,
    /// The outermost `Cargo.toml` with `[package]` (no workspace above it).
    CargoPackage,
    /// The outermost `locklint.toml` or `.locklint.toml`.
    Config,
    /// `.git`.
    Vcs,
}

/// A project root: an absolute directory without `.` or `..` components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    pub dir: PathBuf,
    pub marker: Marker,
}

/// `path` made absolute against the current directory, with `.` and `..` resolved lexically.
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return lexical(path);
    }
    absolute_in(std::env::current_dir().ok().as_deref(), path)
}

/// [`absolute`] against `cwd`, the current directory read once for many paths (`None`: it
/// could not be read, and a relative path stays relative).
pub fn absolute_in(cwd: Option<&Path>, path: &Path) -> PathBuf {
    match cwd {
        Some(cwd) if !path.is_absolute() => lexical(&cwd.join(path)),
        _ => lexical(path),
    }
}

pub use crate::source::lexical;

/// Which of the tables cargo reads a manifest has: (`[workspace]`, `[package]`).
fn manifest_tables(path: &Path) -> (bool, bool) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return (false, false);
    };
    match text.parse::<toml::Table>() {
        Ok(t) => (t.contains_key("workspace"), t.contains_key("package")),
        Err(_) => (false, false),
    }
}

/// The project root of one path (a file or a directory, existing or not).
pub fn detect(path: &Path) -> Option<Root> {
    let abs = absolute(path);
    let start = if abs.is_dir() {
        abs
    } else {
        abs.parent().map(Path::to_path_buf)?
    };
    let mut package = None;
    let mut config = None;
    let mut vcs = None;
    for dir in start.ancestors() {
        let manifest = dir.join("Cargo.toml");
        if manifest.is_file() {
            let (workspace, is_package) = manifest_tables(&manifest);
            if workspace {
                return Some(Root {
                    dir: dir.to_path_buf(),
                    marker: Marker::CargoWorkspace,
                });
            }
            if is_package {
                package = Some(dir.to_path_buf());
            }
        }
        if dir.join("locklint.toml").is_file() || dir.join(".locklint.toml").is_file() {
            config = Some(dir.to_path_buf());
        }
        if dir.join(".git").exists() {
            vcs = Some(dir.to_path_buf());
            break;
        }
    }
    let (dir, marker) = package
        .map(|d| (d, Marker::CargoPackage))
        .or(config.map(|d| (d, Marker::Config)))
        .or(vcs.map(|d| (d, Marker::Vcs)))?;
    Some(Root { dir, marker })
}

/// The project root shared by `paths`: see the module's documentation.
pub fn detect_all(paths: &[PathBuf]) -> Option<Root> {
    let mut roots = Vec::new();
    for p in paths {
        roots.push(detect(p)?);
    }
    let outermost = roots.iter().min_by_key(|r| r.dir.components().count())?;
    roots
        .iter()
        .all(|r| r.dir.starts_with(&outermost.dir))
        .then(|| outermost.clone())
}

/// `root` written the way `like` is: absolute when `like` is, else relative to the current
/// directory (`..` for each level above it), so that the files found under the root are
/// named in the same style as the paths the user gave.
pub fn in_style_of(root: &Path, like: &Path) -> PathBuf {
    if like.is_absolute() {
        return root.to_path_buf();
    }
    let Ok(cwd) = std::env::current_dir() else {
        return root.to_path_buf();
    };
    let cwd = lexical(&cwd);
    let (a, b): (Vec<Component>, Vec<Component>) =
        (cwd.components().collect(), root.components().collect());
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return root.to_path_buf();
    }
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c.as_os_str());
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// The project root for `paths`: `explicit` (`--project-root`) when given, else the detected
/// one, written in the style of the first path. `None`: the paths are the project.
pub fn root_for(paths: &[PathBuf], explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = explicit {
        return Some(dir.to_path_buf());
    }
    let root = detect_all(paths)?;
    let like = paths
        .first()
        .map(PathBuf::as_path)
        .unwrap_or(Path::new("."));
    Some(in_style_of(&root.dir, like))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn lexical_resolves_dots() {
        assert_eq!(lexical(Path::new("/a/b/../c/./d")), PathBuf::from("/a/c/d"));
        assert_eq!(lexical(Path::new("../x")), PathBuf::from("../x"));
    }

    #[test]
    fn the_nearest_workspace_wins_over_packages_config_and_vcs() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir(r.join(".git")).unwrap();
        write(r, "Cargo.toml", "[workspace]\nmembers = [\"crates/*\"]\n");
        write(r, "crates/a/Cargo.toml", "[package]\nname = \"a\"\n");
        write(r, "crates/a/locklint.toml", "");
        write(r, "crates/a/src/lib.rs", "");
        let root = detect(&r.join("crates/a/src/lib.rs")).unwrap();
        assert_eq!(root.dir, absolute(r));
        assert_eq!(root.marker, Marker::CargoWorkspace);
        // a file that does not exist yet has the root of its directory
        let root = detect(&r.join("crates/a/src/new.rs")).unwrap();
        assert_eq!(root.marker, Marker::CargoWorkspace);
    }

    #[test]
    fn the_outermost_package_then_config_then_vcs() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir(r.join(".git")).unwrap();
        write(r, "p/Cargo.toml", "[package]\nname = \"p\"\n");
        write(r, "p/examples/e/Cargo.toml", "[package]\nname = \"e\"\n");
        write(r, "p/examples/e/src/main.rs", "");
        let root = detect(&r.join("p/examples/e/src/main.rs")).unwrap();
        assert_eq!(
            (root.dir, root.marker),
            (absolute(&r.join("p")), Marker::CargoPackage)
        );
        write(r, "q/sub/locklint.toml", "");
        write(r, "q/sub/deep/.locklint.toml", "");
        write(r, "q/sub/deep/a.sql", "");
        let root = detect(&r.join("q/sub/deep/a.sql")).unwrap();
        assert_eq!(
            (root.dir, root.marker),
            (absolute(&r.join("q/sub")), Marker::Config)
        );
        write(r, "z/a.lua", "");
        let root = detect(&r.join("z/a.lua")).unwrap();
        assert_eq!((root.dir, root.marker), (absolute(r), Marker::Vcs));
        // a manifest that does not parse marks nothing
        write(r, "bad/Cargo.toml", "[package\n");
        write(r, "bad/a.rs", "");
        assert_eq!(detect(&r.join("bad/a.rs")).unwrap().marker, Marker::Vcs);
    }

    #[test]
    fn nothing_above_the_repository_root_is_looked_at() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        write(r, "Cargo.toml", "[workspace]\n");
        std::fs::create_dir_all(r.join("repo/.git")).unwrap();
        write(r, "repo/a.rs", "");
        let root = detect(&r.join("repo/a.rs")).unwrap();
        assert_eq!(
            (root.dir, root.marker),
            (absolute(&r.join("repo")), Marker::Vcs)
        );
    }

    #[test]
    fn paths_share_the_outermost_root_that_holds_the_others() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("x/.git")).unwrap();
        std::fs::create_dir_all(r.join("y/.git")).unwrap();
        write(r, "x/a.rs", "");
        write(r, "y/b.rs", "");
        let both = [r.join("x/a.rs"), r.join("y/b.rs")];
        assert_eq!(detect_all(&both), None);
        let one = [r.join("x/a.rs"), r.join("x")];
        assert_eq!(detect_all(&one).unwrap().dir, absolute(&r.join("x")));
    }
}
