//! The Cargo packages of a project's files, read from their manifests: a file belongs to the
//! package of the nearest `Cargo.toml` with a `[package]` table above it (looking no higher
//! than the project root, nor past a `[workspace]` manifest), and a package depends on the
//! packages named in its `[dependencies]`, `[dev-dependencies]`, `[build-dependencies]` and
//! their `[target.*]` forms (a renamed dependency, `x = { package = "y" }`, names `y`).
//! Dependencies are matched by package name among the project's packages (two versions of one
//! crate both count). A manifest that does not parse gives its files no package: they see
//! every function and are seen from everywhere, as files outside any package are.

use locklint_project::Packages;
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use toml::de::{DeTable, DeValue};

/// The packages of `paths` (each file by its index), below `root` when there is one.
pub fn of_files<'p>(paths: impl IntoIterator<Item = &'p Path>, root: Option<&Path>) -> Packages {
    let cwd = std::env::current_dir().ok();
    let absolute = |p: &Path| crate::project::absolute_in(cwd.as_deref(), p);
    let root = root.map(absolute);
    let dirs: Vec<Option<PathBuf>> = paths
        .into_iter()
        .map(|p| absolute(p).parent().map(Path::to_path_buf))
        .collect();
    // every directory a package is looked for in (each file's and those above it, up to the
    // root), its manifest read in parallel
    let mut looked: HashSet<&Path> = HashSet::new();
    for d in dirs.iter().flatten() {
        for a in d.ancestors() {
            if !looked.insert(a) || root.as_deref() == Some(a) {
                break;
            }
        }
    }
    let read: HashMap<PathBuf, Read> = looked
        .into_par_iter()
        .map(|d| (d.to_path_buf(), read(&d.join("Cargo.toml"))))
        .collect();
    let mut reader = Reader {
        root: root.clone(),
        by_dir: HashMap::new(),
        read,
        manifests: Vec::new(),
    };
    let of_file: Vec<Option<u32>> = dirs
        .iter()
        .map(|d| d.as_deref().and_then(|d| reader.package_of(d)))
        .collect();
    let mut ids_by_name: HashMap<&str, Vec<u32>> = HashMap::new();
    for (i, m) in reader.manifests.iter().enumerate() {
        ids_by_name
            .entry(m.name.as_str())
            .or_default()
            .push(i as u32);
    }
    let depends: Vec<Vec<u32>> = reader
        .manifests
        .iter()
        .enumerate()
        .map(|(i, m)| {
            m.depends
                .iter()
                .flat_map(|d| ids_by_name.get(d.as_str()).into_iter().flatten())
                .copied()
                .filter(|&d| d as usize != i)
                .collect()
        })
        .collect();
    Packages::new(of_file, &depends)
}

struct Manifest {
    name: String,
    depends: Vec<String>,
}

struct Reader {
    root: Option<PathBuf>,
    /// Per directory looked at: the package it is in (the answer of its nearest manifest).
    by_dir: HashMap<PathBuf, Option<u32>>,
    /// What each directory's `Cargo.toml` says, read beforehand (a directory not in it is read
    /// when looked at).
    read: HashMap<PathBuf, Read>,
    manifests: Vec<Manifest>,
}

/// What one `Cargo.toml` says.
enum Read {
    Package(Manifest),
    /// A `[workspace]` manifest without a package: nothing above it is looked at.
    Workspace,
    /// No manifest, or one that says neither.
    Nothing,
    /// Not valid TOML: the files under it belong to no package.
    Invalid,
}

impl Reader {
    fn package_of(&mut self, dir: &Path) -> Option<u32> {
        if let Some(known) = self.by_dir.get(dir) {
            return *known;
        }
        let said = match self.read.remove(dir) {
            Some(said) => said,
            None => read(&dir.join("Cargo.toml")),
        };
        let answer = match said {
            Read::Package(m) => {
                self.manifests.push(m);
                Some(self.manifests.len() as u32 - 1)
            }
            Read::Workspace | Read::Invalid => None,
            Read::Nothing => {
                let at_root = self.root.as_deref() == Some(dir);
                match dir.parent() {
                    Some(parent) if !at_root => self.package_of(parent),
                    _ => None,
                }
            }
        };
        self.by_dir.insert(dir.to_path_buf(), answer);
        answer
    }
}

fn read(manifest: &Path) -> Read {
    let Ok(text) = std::fs::read_to_string(manifest) else {
        return Read::Nothing;
    };
    // parsed without copying its strings: a few keys are read of it
    let Ok(doc) = toml::de::DeTable::parse(&text) else {
        return Read::Invalid;
    };
    let table = doc.get_ref();
    let Some(name) = field(table, "package")
        .and_then(DeValue::as_table)
        .and_then(|p| field(p, "name"))
        .and_then(DeValue::as_str)
    else {
        return if table.contains_key("workspace") {
            Read::Workspace
        } else {
            Read::Nothing
        };
    };
    let mut depends = Vec::new();
    dependency_names(table, &mut depends);
    if let Some(targets) = field(table, "target").and_then(DeValue::as_table) {
        for t in targets.values().filter_map(|t| t.get_ref().as_table()) {
            dependency_names(t, &mut depends);
        }
    }
    Read::Package(Manifest {
        name: name.to_string(),
        depends,
    })
}

/// The value of `key` in a table.
fn field<'t, 'i>(table: &'t DeTable<'i>, key: &str) -> Option<&'t DeValue<'i>> {
    table.get(key).map(|v| v.get_ref())
}

fn dependency_names(table: &DeTable, out: &mut Vec<String>) {
    for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let Some(deps) = field(table, section).and_then(DeValue::as_table) else {
            continue;
        };
        for (key, spec) in deps {
            let renamed = spec
                .get_ref()
                .as_table()
                .and_then(|t| field(t, "package"))
                .and_then(DeValue::as_str);
            out.push(renamed.unwrap_or(key.get_ref()).to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn files_belong_to_the_nearest_package_and_see_its_dependencies() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        write(
            root,
            "Cargo.toml",
            "[workspace]\nmembers = [\"app\", \"iface\", \"tool\"]\n",
        );
        write(
            root,
            "app/Cargo.toml",
            "[package]\nname = \"app\"\n[dependencies]\nredis_if = { package = \"iface\", path = \"../iface\" }\n",
        );
        write(
            root,
            "iface/Cargo.toml",
            "[package]\nname = \"iface\"\n[target.'cfg(unix)'.dependencies]\nredis = \"1\"\n",
        );
        write(root, "tool/Cargo.toml", "[package]\nname = \"tool\"\n");
        write(root, "broken/Cargo.toml", "[package\nname = ");
        let files = [
            write(root, "app/src/main.rs", ""),
            write(root, "iface/src/lib.rs", ""),
            write(root, "tool/src/deep/x.rs", ""),
            write(root, "migrations/1.sql", ""),
            write(root, "broken/src/lib.rs", ""),
        ];
        let p = of_files(files.iter().map(PathBuf::as_path), Some(root));
        assert!(p.visible(0, 1), "a renamed dependency");
        assert!(!p.visible(1, 0), "a dependency does not see its dependent");
        assert!(!p.visible(0, 2) && !p.visible(2, 1), "unrelated packages");
        assert_eq!(p.package(3), None, "the workspace root's own files");
        assert_eq!(p.package(4), None, "a manifest that does not parse");
        assert!(p.visible(2, 4) && p.visible(4, 0));
    }
}
