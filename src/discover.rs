//! Finds the files to analyse: walks paths honouring `.gitignore`, skipping `target/`.

use std::path::{Path, PathBuf};

/// A path that could not be walked or read, reported as an error line.
#[derive(Debug, Clone)]
pub struct PathError {
    pub path: PathBuf,
    pub message: String,
}

/// Decides whether a directory met during the walk is left out (excluded by configuration).
pub type Prune = std::sync::Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// Files under `roots` that a front-end reads, deduplicated and sorted.
/// `exclude_dirs` are directories not to descend into (other packages of a workspace);
/// `prune` is asked about every other directory below a root, after `.gitignore`.
pub fn discover(
    roots: &[PathBuf],
    exclude_dirs: &[PathBuf],
    prune: Prune,
) -> (Vec<PathBuf>, Vec<PathError>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for root in roots {
        match std::fs::metadata(root) {
            Err(e) => {
                errors.push(PathError {
                    path: root.clone(),
                    message: describe_io(&e),
                });
                continue;
            }
            Ok(m) if m.is_file() => {
                // an explicitly named file is analysed whatever its extension
                files.push(root.clone());
                continue;
            }
            Ok(_) => {}
        }
        let excluded: Vec<PathBuf> = exclude_dirs
            .iter()
            .filter_map(|d| d.canonicalize().ok())
            .collect();
        let prune = prune.clone();
        let mut builder = ignore::WalkBuilder::new(root);
        builder
            .hidden(true)
            .git_ignore(true)
            .git_exclude(true)
            .git_global(false)
            .require_git(false)
            .parents(true)
            .follow_links(false)
            .filter_entry(move |e| {
                let is_dir = e.file_type().is_some_and(|t| t.is_dir());
                if !is_dir {
                    return true;
                }
                if e.depth() > 0 && e.file_name() == "target" {
                    return false;
                }
                if e.depth() > 0 && !excluded.is_empty() {
                    if let Ok(c) = e.path().canonicalize() {
                        if excluded.contains(&c) {
                            return false;
                        }
                    }
                }
                e.depth() == 0 || !prune(e.path())
            });
        // walked on every core: a large tree holds thousands of directories
        let found = std::sync::Mutex::new((Vec::new(), Vec::new()));
        builder.build_parallel().run(|| {
            Box::new(|entry| {
                let mut found = found.lock().unwrap_or_else(|e| e.into_inner());
                match entry {
                    Ok(e) => {
                        if e.file_type().is_some_and(|t| t.is_file())
                            && crate::frontend::is_supported(e.path())
                        {
                            found.0.push(e.into_path());
                        }
                    }
                    Err(err) => found.1.push(PathError {
                        path: error_path(&err).unwrap_or_else(|| root.clone()),
                        message: err_message(&err),
                    }),
                }
                ignore::WalkState::Continue
            })
        });
        let (mut walked, mut failed) = found.into_inner().unwrap_or_else(|e| e.into_inner());
        files.append(&mut walked);
        // in the order of their paths, not of the walk's threads
        failed.sort_by(|a, b| (&a.path, &a.message).cmp(&(&b.path, &b.message)));
        errors.append(&mut failed);
    }
    files.sort();
    files.dedup();
    // one root yields each file once (the walk follows no link); several may name one file
    // twice, under two spellings
    if roots.len() > 1 {
        files.dedup_by(|a, b| same_file(a, b));
    }
    (files, errors)
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

fn error_path(err: &ignore::Error) -> Option<PathBuf> {
    match err {
        ignore::Error::WithPath { path, .. } => Some(path.clone()),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        _ => None,
    }
}

fn err_message(err: &ignore::Error) -> String {
    match err {
        ignore::Error::WithPath { err, .. }
        | ignore::Error::WithDepth { err, .. }
        | ignore::Error::WithLineNumber { err, .. } => err_message(err),
        ignore::Error::Io(e) => describe_io(e),
        other => other.to_string(),
    }
}

pub fn describe_io(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}
