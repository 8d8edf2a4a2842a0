//! What the prefilter read of each file of the project, kept in the analysis cache so that a
//! run after an edit reads only the files that changed: per file, how the run that stored it
//! found the file ([`FileState`]: length, modification time, hash of the bytes, and whether it
//! was analysed, with its line count, or skipped with a note), whether the prefilter let it
//! through, and, for a file left out, its identifiers ([`Spelling`]), which the name rounds
//! look names up in.
//!
//! A stored scan stands for a file whose length and time are those recorded and whose time is
//! older than the start of the storing run by more than [`RACY_NANOS`] (a later write would
//! have changed it): such a file left out is not read at all; one let through is read for its
//! text, not scanned again. A file whose length and time match but whose time is too recent to
//! be trusted is read and hashed, and keeps its scan when the bytes are those recorded. Any
//! other file is read and scanned afresh. So a scan is never trusted beyond what the project's
//! stored answer ([`crate::answer`]) trusts of a file.
//!
//! One file per build in the cache (`scans.bin`): a header (magic, the length of the index,
//! a checksum of everything after the header), the index (postcard: per file its absolute
//! path, state, whether it was let through and where its identifiers lie), then every left-out
//! file's identifiers as little-endian `u64`s. It is written after a run that found more than one
//! file in [`STALE_SHARE`] whose scan differs from the stored one (until then each of those is
//! scanned afresh by every run), to a temporary file renamed into place (runs sharing a cache never read half of
//! one), and holds the files of that run. A file that does not read back (truncated, garbage,
//! another layout) is not trusted: every file is scanned again and the store rewritten, with a
//! note.

use crate::answer::{FileState, Kind, RACY_NANOS};
use crate::cache::Cache;
use crate::engine::Note;
use crate::frontend::prefilter::Spelling;
use crate::source::display_path;
use foldhash::HashMap;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::hash::BuildHasher;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The store's name in the build's directory of the cache.
const FILE_NAME: &str = "scans.bin";

/// The first bytes of a store; another layout starts otherwise.
const MAGIC: &[u8; 8] = b"LLSCANS1";

/// A run writes the store again when more than one of its files in `STALE_SHARE` differs from
/// its stored scan: each such file is read and scanned afresh by every run until then (a few
/// files' worth of work in a large project), where writing the store costs as much as all the
/// project's scans. In a large project an edit to a file or two does not rewrite it, a
/// checkout that changes many files does; a small project's store is written at every change.
pub(crate) const STALE_SHARE: usize = 64;

/// Magic, index length, checksum.
const HEADER: usize = 24;

/// How the prefilter found one file, as stored.
#[derive(Debug, Clone)]
pub(crate) struct Scan {
    pub state: FileState,
    /// The prefilter let it through (or it is not Rust): it is parsed from the start.
    pub through: bool,
    /// The identifiers of a file left out.
    pub spelling: Option<Spelling>,
    /// Its time is old enough, by the start of the run that stored it, to stand for its bytes.
    trusted: bool,
}

impl Scan {
    /// The scan of a file whose length and time are those of `meta`, if they are those
    /// recorded; whether they can be trusted without reading the file.
    pub fn fits(&self, len: u64, mtime: u128) -> Option<bool> {
        (self.state.len == len && self.state.mtime == mtime).then_some(self.trusted)
    }
}

/// One file's entry in the index.
#[derive(Serialize, Deserialize)]
struct Indexed {
    path: String,
    state: FileState,
    through: bool,
    /// Where the identifiers of a file left out lie among the stored `u64`s: start, count.
    spelling: Option<(usize, usize)>,
}

#[derive(Serialize, Deserialize)]
struct Index {
    /// When the run that stored the scans started (nanoseconds since the epoch).
    started: u128,
    files: Vec<Indexed>,
}

/// The stored scans of a project, by absolute path, and what this run found of its files.
pub(crate) struct Scans {
    path: PathBuf,
    /// The current directory, which relative paths are made absolute against.
    cwd: Option<PathBuf>,
    stored: HashMap<PathBuf, Scan>,
    /// When this run started: a scan it stores is trusted against it.
    started: u128,
    /// A store was there but did not read back.
    unreadable: bool,
}

impl Scans {
    /// The scans stored in `cache` (none when there are none or they do not read back).
    pub fn open(cache: &Cache, started: u128) -> Scans {
        let path = cache.dir().join(FILE_NAME);
        let (stored, unreadable) = match std::fs::read(&path) {
            Err(_) => (HashMap::default(), false),
            Ok(bytes) => match decode(&bytes) {
                Some(stored) => (stored, false),
                None => (HashMap::default(), true),
            },
        };
        Scans {
            path,
            cwd: std::env::current_dir().ok(),
            stored,
            started,
            unreadable,
        }
    }

    /// The stored scan of the file at `path` (as the run names it).
    pub fn get(&self, path: &Path) -> Option<&Scan> {
        if self.stored.is_empty() {
            return None;
        }
        self.stored.get(&self.absolute(path))
    }

    /// `path` made absolute (see [`crate::project::absolute_in`]).
    fn absolute(&self, path: &Path) -> PathBuf {
        crate::project::absolute_in(self.cwd.as_deref(), path)
    }

    /// The note of a store that could not be read (and is rebuilt).
    pub fn note(&self) -> Option<Note> {
        self.unreadable.then(|| Note {
            path: display_path(&self.path),
            message: "the stored scans of the project's files could not be read and were rebuilt"
                .to_string(),
        })
    }

    /// Store the scans of this run's files (`None`: a file that could not be read, or an
    /// editor's text), when more than one in [`STALE_SHARE`] differs from what is stored (or
    /// nothing is stored that reads back).
    pub fn store(&self, scans: Vec<(PathBuf, Option<Scan>)>) {
        let fresh: Vec<(PathBuf, Scan)> = scans
            .into_iter()
            .filter_map(|(p, s)| Some((self.absolute(&p), s?)))
            .collect();
        if !self.unreadable && self.stale(&fresh) * STALE_SHARE <= fresh.len() {
            return;
        }
        let Some(bytes) = encode(self.started, &fresh) else {
            return;
        };
        let Some(dir) = self.path.parent() else {
            return;
        };
        if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) {
            if tmp.write_all(&bytes).is_ok() {
                let _ = tmp.persist(&self.path);
            }
        }
    }
}

impl Scans {
    /// How many of this run's scans differ from the stored ones: a file whose state changed,
    /// one new to the store, one the store holds and the run no longer has, and one whose scan
    /// this run's start would trust where the stored one was not trusted.
    fn stale(&self, fresh: &[(PathBuf, Scan)]) -> usize {
        // per file of the run: whether the store has it, whether its scan differs
        let (present, differ) = fresh
            .par_iter()
            .map(|(p, s)| match self.stored.get(p) {
                None => (0, 1),
                Some(old) => {
                    // a scan not yet trusted is stored again once this run's start trusts it
                    let trusted_now = s.state.mtime.saturating_add(RACY_NANOS) <= self.started;
                    let same = old.state == s.state
                        && old.through == s.through
                        && (old.trusted || !trusted_now);
                    (1, usize::from(!same))
                }
            })
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        differ + self.stored.len().saturating_sub(present)
    }
}

impl Scan {
    /// The scan of a file as a run found it: its state, and the identifiers of a file the
    /// prefilter left out (`None` for one let through).
    pub fn new(state: FileState, spelling: Option<Spelling>) -> Scan {
        Scan {
            through: spelling.is_none() && matches!(state.kind, Kind::Analysed { .. }),
            state,
            spelling,
            trusted: false,
        }
    }
}

fn checksum(bytes: &[u8]) -> u64 {
    foldhash::fast::FixedState::with_seed(0x7363_616e_735f_6c6c).hash_one(bytes)
}

/// The bytes of a store holding `scans`, stored by a run that started at `started`.
fn encode(started: u128, scans: &[(PathBuf, Scan)]) -> Option<Vec<u8>> {
    let mut words: Vec<u64> = Vec::new();
    let mut files = Vec::with_capacity(scans.len());
    for (path, scan) in scans {
        // a path that is not UTF-8 is not stored: that file is scanned again
        let Some(path) = path.to_str() else { continue };
        let spelling = scan.spelling.as_ref().map(|s| {
            let start = words.len();
            words.extend_from_slice(s.raw());
            (start, s.len())
        });
        files.push(Indexed {
            path: path.to_string(),
            state: scan.state.clone(),
            through: scan.through,
            spelling,
        });
    }
    let index = postcard::to_stdvec(&Index { started, files }).ok()?;
    let mut bytes = Vec::with_capacity(HEADER + index.len() + 8 * words.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(index.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend_from_slice(&index);
    for w in &words {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    let sum = checksum(&bytes[HEADER..]);
    bytes[16..HEADER].copy_from_slice(&sum.to_le_bytes());
    Some(bytes)
}

/// The scans a store's bytes hold, by absolute path; `None` when they are not a whole store
/// of this layout.
fn decode(bytes: &[u8]) -> Option<HashMap<PathBuf, Scan>> {
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
    };
    if bytes.get(..8)? != MAGIC || word(16)? != checksum(bytes.get(HEADER..)?) {
        return None;
    }
    let index_len = usize::try_from(word(8)?).ok()?;
    let index_end = HEADER.checked_add(index_len)?;
    let index: Index = match postcard::take_from_bytes(bytes.get(HEADER..index_end)?) {
        Ok((index, [])) => index,
        _ => return None,
    };
    let words = bytes.get(index_end..)?;
    if words.len() % 8 != 0 {
        return None;
    }
    let started = index.started;
    // every file's identifiers in one block, which their spellings share
    let words: std::sync::Arc<Vec<u64>> = std::sync::Arc::new(
        words
            .par_chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect(),
    );
    let scans: Option<Vec<(PathBuf, Scan)>> = index
        .files
        .into_par_iter()
        .map(|f| {
            let spelling = match f.spelling {
                None => None,
                Some((start, count)) => {
                    Some(Spelling::within(&words, start..start.checked_add(count)?)?)
                }
            };
            // a file left out has its identifiers; one let through or skipped has none
            let analysed = matches!(f.state.kind, Kind::Analysed { .. });
            if spelling.is_some() == (f.through || !analysed) {
                return None;
            }
            let trusted = f.state.mtime.saturating_add(RACY_NANOS) <= started;
            let scan = Scan {
                state: f.state,
                through: f.through,
                spelling,
                trusted,
            };
            Some((PathBuf::from(f.path), scan))
        })
        .collect();
    Some(scans?.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When the runs of these tests started.
    const STARTED: u128 = 4_000_000_000;

    fn analysed(lines: usize, mtime: u128) -> FileState {
        FileState {
            len: 10,
            mtime,
            hash: Some(crate::answer::hash(b"0123456789")),
            kind: Kind::Analysed { lines },
        }
    }

    fn sample() -> Vec<(PathBuf, Scan)> {
        vec![
            (
                PathBuf::from("/p/src/left_out.rs"),
                Scan::new(analysed(3, 1_000), Some(Spelling::of("fn render() {}"))),
            ),
            (
                PathBuf::from("/p/src/through.rs"),
                Scan::new(analysed(7, 5_000_000_000), None),
            ),
            (
                PathBuf::from("/p/src/blob.rs"),
                Scan::new(
                    FileState {
                        kind: Kind::Skipped("skipped: binary file".to_string()),
                        ..analysed(0, 1_000)
                    },
                    None,
                ),
            ),
        ]
    }

    #[test]
    fn a_store_reads_back_with_what_each_file_was_and_whether_its_time_is_trusted() {
        let bytes = encode(STARTED, &sample()).unwrap();
        let back = decode(&bytes).unwrap();
        assert_eq!(back.len(), 3);
        let left_out = &back[Path::new("/p/src/left_out.rs")];
        assert!(!left_out.through);
        assert_eq!(
            left_out.spelling.as_ref(),
            Some(&Spelling::of("fn render() {}"))
        );
        assert_eq!(left_out.state, analysed(3, 1_000));
        // written long enough before the storing run started
        assert_eq!(left_out.fits(10, 1_000), Some(true));
        assert_eq!(left_out.fits(11, 1_000), None);
        assert_eq!(left_out.fits(10, 1_001), None);
        let through = &back[Path::new("/p/src/through.rs")];
        assert!(through.through && through.spelling.is_none());
        // written after the storing run started: its bytes must be compared
        assert_eq!(through.fits(10, 5_000_000_000), Some(false));
        let blob = &back[Path::new("/p/src/blob.rs")];
        assert!(!blob.through && blob.spelling.is_none());
    }

    #[test]
    fn a_truncated_altered_or_foreign_store_is_not_read() {
        let bytes = encode(STARTED, &sample()).unwrap();
        for cut in [0, 7, HEADER, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        // one bit of the identifiers, of the index, of the header
        for at in [bytes.len() - 3, HEADER + 5, 9] {
            let mut spoiled = bytes.clone();
            spoiled[at] ^= 0x10;
            assert!(decode(&spoiled).is_none(), "byte {at} altered");
        }
        assert!(decode(b"{\"files\": []}").is_none());
        let mut other = bytes.clone();
        other[7] = b'9';
        assert!(decode(&other).is_none());
    }

    /// `n` files left out, each stored long before `started`.
    fn many(n: usize) -> Vec<(PathBuf, Scan)> {
        (0..n)
            .map(|i| {
                let text = format!("fn f{i}() {{}}");
                let scan = Scan::new(analysed(1, 1_000), Some(Spelling::of(&text)));
                (PathBuf::from(format!("/p/src/f{i}.rs")), scan)
            })
            .collect()
    }

    /// Scans over what `stored` holds (as written by a run at `started`), kept in `dir`.
    fn opened(dir: &Path, stored: &[(PathBuf, Scan)], started: u128) -> Scans {
        let path = dir.join(FILE_NAME);
        std::fs::write(&path, encode(started, stored).unwrap()).unwrap();
        Scans {
            stored: decode(&std::fs::read(&path).unwrap()).unwrap(),
            path,
            cwd: None,
            started,
            unreadable: false,
        }
    }

    /// What `scans` stores after a run that found `fresh`.
    fn stored_after(scans: &Scans, fresh: Vec<(PathBuf, Scan)>) -> HashMap<PathBuf, Scan> {
        scans.store(fresh.into_iter().map(|(p, s)| (p, Some(s))).collect());
        decode(&std::fs::read(&scans.path).unwrap()).unwrap()
    }

    /// `scans` with the first `k` files' bytes changed.
    fn edited(mut scans: Vec<(PathBuf, Scan)>, k: usize) -> Vec<(PathBuf, Scan)> {
        for (_, s) in scans.iter_mut().take(k) {
            s.state.len += 1;
        }
        scans
    }

    #[test]
    fn a_few_changed_files_of_a_large_project_do_not_rewrite_the_store_and_many_do() {
        let dir = tempfile::tempdir().unwrap();
        let scans = opened(dir.path(), &many(200), STARTED);
        // 3 of 200 differ (no more than one in 64): each is scanned again by the next run
        let after = stored_after(&scans, edited(many(200), 3));
        assert_eq!(after[Path::new("/p/src/f0.rs")].state.len, 10);
        assert_eq!(scans.stale(&edited(many(200), 3)), 3);
        // 4 of 200 do: the store is this run's
        let after = stored_after(&scans, edited(many(200), 4));
        assert_eq!(after[Path::new("/p/src/f0.rs")].state.len, 11);
        assert_eq!(after.len(), 200);
        // files gone from the project count too
        assert_eq!(scans.stale(&many(190)), 10);
    }

    #[test]
    fn a_small_project_stores_every_change_and_a_first_store_is_always_written() {
        let dir = tempfile::tempdir().unwrap();
        let scans = opened(dir.path(), &many(10), STARTED);
        let after = stored_after(&scans, edited(many(10), 1));
        assert_eq!(after[Path::new("/p/src/f0.rs")].state.len, 11);
        let empty = opened(dir.path(), &[], STARTED);
        assert_eq!(stored_after(&empty, many(3)).len(), 3);
    }

    #[test]
    fn a_store_whose_index_contradicts_itself_is_not_read() {
        // a file let through that claims identifiers: rebuilt as if the layout were foreign
        let mut scans = sample();
        scans[1].1.spelling = Some(Spelling::of("fn x() {}"));
        let bytes = encode(STARTED, &scans).unwrap();
        assert!(decode(&bytes).is_none());
    }
}
