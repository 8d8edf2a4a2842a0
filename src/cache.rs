//! The analysis cache: each file's intermediate form, stored under a key made of the tool's
//! build, the file's path and its text, so that an unchanged file is not parsed again, wherever
//! it now sits among the project's files (a loaded analysis is placed at the file's position,
//! [`FileIr::place_at`]). `.locklint_cache/` at the project root by default (`--cache-dir`,
//! `LOCKLINT_CACHE_DIR`, `--no-cache`), holding a `.gitignore` that ignores it all.
//!
//! What a front-end extracts from a file depends on nothing else (not the configuration, not
//! other files), so an entry is valid exactly when its key matches. Entries are written to a
//! temporary file and renamed into place, so runs sharing a cache never read half an entry; an
//! entry that does not read back (truncated, garbage, another build's) is rebuilt. After a
//! run that analysed the project, the entries it did not use (a file's earlier texts, files
//! gone) are removed ([`Cache::prune`]), so the cache holds about one entry per file.

use crate::ir::FileIr;
use crate::source::FileRef;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

/// The cache directory's name at the project root.
pub const DIR_NAME: &str = ".locklint_cache";

/// An open cache directory.
#[derive(Debug, Clone)]
pub struct Cache {
    /// This build's entries: `<dir>/<build>/`.
    entries: PathBuf,
    /// When it was opened: entries written since then may be another run's.
    opened: SystemTime,
    /// The entries this run looked up.
    used: Arc<Mutex<HashSet<PathBuf>>>,
}

/// What a lookup found.
pub enum Lookup {
    Hit(Box<FileIr>),
    Miss,
    /// An entry exists but does not read back; it is rebuilt.
    Corrupt,
}

impl Cache {
    /// Open (creating it when needed) the cache in `dir`. `None` when it cannot be created:
    /// the run goes on without a cache.
    pub fn open(dir: &Path) -> Option<Cache> {
        let entries = dir.join(build_id());
        std::fs::create_dir_all(&entries).ok()?;
        remove_other_builds(dir);
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            let _ = std::fs::write(&ignore, "# Automatically created by locklint.\n*\n");
        }
        Some(Cache {
            entries,
            opened: SystemTime::now(),
            used: Arc::default(),
        })
    }

    /// Remove the entries no run needs any more: those of files this run did not look up (a
    /// file's earlier texts, files gone from the project) written before the cache was opened
    /// (newer ones may be another run's). Called after a run that analysed the project; a run
    /// sharing the cache that loses an entry analyses that file again, nothing is read wrong.
    /// How many were removed.
    pub fn prune(&self) -> usize {
        let used = self.used.lock().map(|u| u.clone()).unwrap_or_default();
        let mut removed = 0;
        for dir in read_dir(&self.entries) {
            let dir = dir.path();
            if !dir.is_dir() {
                continue;
            }
            for entry in read_dir(&dir) {
                let file = entry.path();
                if !used.contains(&file) && modified(&entry) < self.opened {
                    removed += usize::from(std::fs::remove_file(&file).is_ok());
                }
            }
            // only when empty
            let _ = std::fs::remove_dir(&dir);
        }
        removed
    }

    /// This build's directory in the cache (where [`crate::answer`] keeps the project's answer).
    pub fn dir(&self) -> &Path {
        &self.entries
    }

    /// The entry of `file`: where its analysis is stored (the file's text is hashed once, for
    /// the lookup and the store that may follow).
    pub fn entry(&self, file: &FileRef) -> Entry {
        self.entry_at(&self.key(file))
    }

    /// The key of `file`'s entry (see [`Cache::stored`]).
    pub fn key(&self, file: &FileRef) -> String {
        let mut h = Sha256::new();
        h.update(file.path.as_os_str().as_encoded_bytes());
        h.update([0]);
        h.update(file.text.as_bytes());
        let digest = h.finalize();
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn entry_at(&self, key: &str) -> Entry {
        let path = match (key.get(..2), key.get(2..)) {
            (Some(dir), Some(name)) if !key.contains(['/', '\\', '.']) => {
                self.entries.join(dir).join(name)
            }
            _ => self.entries.join("-"),
        };
        if let Ok(mut used) = self.used.lock() {
            used.insert(path.clone());
        }
        Entry {
            path,
            key: key.to_string(),
        }
    }

    /// The analysis stored under `key` ([`Cache::key`]), without its file, placed first in
    /// the project; `None` when there is none or it does not read back.
    pub fn stored(&self, key: &str) -> Option<FileIr> {
        let bytes = std::fs::read(&self.entry_at(key).path).ok()?;
        let mut ir = decode(&bytes)?;
        ir.place_at(0);
        Some(ir)
    }
}

/// The place of one file's analysis in the cache.
pub struct Entry {
    path: PathBuf,
    /// Its key ([`Cache::key`]).
    key: String,
}

impl Entry {
    /// The key the entry is stored under ([`Cache::key`]).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The stored analysis of `file`, placed at position `index` in the project.
    pub fn load(&self, index: usize, file: &FileRef) -> Lookup {
        let Ok(bytes) = std::fs::read(&self.path) else {
            return Lookup::Miss;
        };
        match decode(&bytes) {
            Some(mut ir) => {
                ir.file = file.clone();
                ir.place_at(index);
                Lookup::Hit(Box::new(ir))
            }
            None => Lookup::Corrupt,
        }
    }

    /// Store an analysis; a failure to write only costs the next run a parse.
    pub fn store(&self, ir: &FileIr) {
        let path = &self.path;
        let Some(dir) = path.parent() else { return };
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        let Some(bytes) = encode(ir) else {
            return;
        };
        let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) else {
            return;
        };
        if tmp.write_all(&bytes).is_ok() {
            let _ = tmp.persist(path);
        }
    }
}

/// The first bytes of an entry; another layout starts otherwise.
const MAGIC: &[u8; 4] = b"LLIR";

/// The checksum of an entry's form.
fn checksum(bytes: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x6c6c_6972_5f65_6e74).hash_one(bytes)
}

/// An entry's bytes: [`MAGIC`], the checksum of the form, the form (postcard: compact and quick
/// to read back, since a warm run reads every parsed file's form).
fn encode(ir: &FileIr) -> Option<Vec<u8>> {
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&[0; 8]);
    let bytes = postcard::to_extend(ir, bytes).ok()?;
    let mut bytes = bytes;
    let sum = checksum(&bytes[12..]);
    bytes[4..12].copy_from_slice(&sum.to_le_bytes());
    Some(bytes)
}

/// The form an entry's bytes hold; `None` when they are not a whole entry of this layout (a
/// form that does not read back is not trusted: its bytes were checked, and all of them read).
fn decode(bytes: &[u8]) -> Option<FileIr> {
    let form = bytes.get(12..)?;
    if bytes.get(..4)? != MAGIC || bytes.get(4..12)? != checksum(form).to_le_bytes() {
        return None;
    }
    match postcard::take_from_bytes::<FileIr>(form) {
        Ok((ir, [])) => Some(ir),
        _ => None,
    }
}

/// A directory's entries; none when it cannot be read.
pub(crate) fn read_dir(dir: &Path) -> impl Iterator<Item = std::fs::DirEntry> {
    std::fs::read_dir(dir).into_iter().flatten().flatten()
}

/// When a directory entry was last written; the epoch when that cannot be read.
pub(crate) fn modified(e: &std::fs::DirEntry) -> SystemTime {
    e.metadata()
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Remove the entries other builds of locklint left (they are never read by this one). A
/// build running at the same time loses its entries and analyses again; nothing is read wrong.
fn remove_other_builds(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if name != build_id() && is_build_dir(name) && e.path().is_dir() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A directory name [`build_id`] makes: `<version>-<12 hex digits>`.
fn is_build_dir(name: &str) -> bool {
    name.rsplit_once('-').is_some_and(|(version, hash)| {
        hash.len() == 12
            && hash.bytes().all(|b| b.is_ascii_hexdigit())
            && version.split('.').count() == 3
            && version.split('.').all(|n| n.parse::<u32>().is_ok())
    })
}

/// This build of locklint: its version and the executable's size and modification time (a
/// rebuilt binary of the same version does not trust the entries of the old one).
fn build_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let exe = std::env::current_exe()
            .and_then(std::fs::metadata)
            .map(|m| {
                let modified = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                format!("{}-{modified}", m.len())
            })
            .unwrap_or_default();
        let mut h = Sha256::new();
        h.update(exe.as_bytes());
        let digest = h.finalize();
        let short: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        format!("{}-{short}", env!("CARGO_PKG_VERSION"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_analysis_placed_elsewhere_is_the_analysis_made_there() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        for example in [
            "unfenced-write/bad_write_under_redis_lock.rs",
            "unconditional-release/bad_release_helper_in_other_file/reports.rs",
            "advisory-lock-unbalanced/bad_try_lock_executed.rs",
        ] {
            let path = dir.join(example);
            let text = std::fs::read_to_string(&path).unwrap();
            let file = crate::source::SourceFile::new(path, text);
            let at = |i: usize| crate::frontend::analyze(i, file.clone());
            let json = |ir: &FileIr| serde_json::to_value(ir).unwrap();
            let (first, fifth) = (at(0), at(5));
            assert_ne!(
                json(&first),
                json(&fifth),
                "{example}: positions are recorded"
            );
            let mut moved = first;
            moved.place_at(5);
            assert_eq!(json(&moved), json(&fifth), "{example}");
        }
    }

    #[test]
    fn build_directories_are_told_apart_from_anything_else() {
        assert!(is_build_dir(build_id()));
        assert!(is_build_dir("0.1.0-0123456789ab"));
        for other in [
            "0.1.0",
            "notes-0123456789ab",
            "0.1-0123456789ab",
            "0.1.0-xyz",
            ".gitignore",
        ] {
            assert!(!is_build_dir(other), "{other}");
        }
    }

    #[test]
    fn opening_removes_other_builds_entries_only() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("0.0.1-0123456789ab");
        std::fs::create_dir_all(old.join("ab")).unwrap();
        std::fs::write(old.join("ab/cd"), "old entry").unwrap();
        let mine = dir.path().join("kept by the user");
        std::fs::create_dir(&mine).unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        assert!(!old.exists());
        assert!(mine.exists());
        assert!(cache.entries.is_dir());
        assert!(dir.path().join(".gitignore").is_file());
    }
}
