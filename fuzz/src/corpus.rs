//! The seed corpus of a target: its built-in inputs, then every fitting file under the fixture
//! tree and the extra corpus directories, in path order.

use crate::targets::Target;
use std::path::{Path, PathBuf};

/// The project's fixture tree.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, out),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
}

/// Seed inputs for `target` from `dirs`, at most `max_len` bytes each.
pub fn seeds(target: &Target, dirs: &[PathBuf], max_len: usize) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = target
        .builtin
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let mut files = Vec::new();
    for d in dirs {
        walk(d, &mut files);
    }
    files.sort();
    for f in files {
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        if let Some(mut input) = (target.seed)(&f, &bytes) {
            input.truncate(max_len);
            out.push(input);
        }
    }
    out
}
