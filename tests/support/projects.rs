//! The test projects of `tests/projects/`, copied where a test can change them.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub fn projects() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects")
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A copy of `tests/projects/<name>` in a temporary directory (outside this repository, whose
/// own workspace would otherwise be the project); the path is canonical.
pub fn project(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap().join(name);
    copy_dir(&projects().join(name), &root);
    (tmp, root)
}
