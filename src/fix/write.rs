//! Writing a fixed file without losing or corrupting anything.
//!
//! - A symbolic link is followed: its target is fixed and the link stays a link.
//! - The file is only replaced while it still holds the text the fixes were made from: it is
//!   compared before anything is written, again just before the new text takes its place, and
//!   (when the new file is renamed over it) once more afterwards through a handle on the old
//!   file, so a line another process wrote in the meantime is never lost: the run refuses and
//!   leaves the other process's text.
//! - Usually the new text goes to a temporary file beside the file, synced, given the file's
//!   permissions, owner and group, and renamed over it (a reader never sees half a file).
//! - A file with more than one hard link, or whose owner the temporary file cannot be given
//!   (not running as root), is rewritten in place instead, so the other names see the fix and
//!   the owner stays: the new text is first written and synced to a temporary file beside it,
//!   then over the file; if that write fails, the old text is put back, and when even that
//!   fails the new text is kept beside the file under a name the error gives.
//! - A read-only file is left alone.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const CHANGED: &str = "the file changed on disk during the run; it was left alone";
const CHANGED_WHILE_WRITING: &str =
    "another process wrote to the file while it was being fixed; its text was kept and the fixes were not applied";

fn io(e: std::io::Error) -> String {
    crate::discover::describe_io(&e)
}

/// What identifies one state of a file: any write changes one of these (or the content).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    #[cfg(unix)]
    inode: (u64, u64),
}

impl Stamp {
    fn of(m: &Metadata) -> Stamp {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Stamp {
            len: m.len(),
            modified: m.modified().ok(),
            #[cfg(unix)]
            inode: (m.dev(), m.ino()),
        }
    }
}

fn read_all(f: &mut File) -> std::io::Result<Vec<u8>> {
    f.seek(SeekFrom::Start(0))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    Ok(buf)
}

/// Replace the file's content with `new`, provided it still holds `expected`.
pub fn write_atomically(path: &Path, expected: &str, new: &str) -> Result<(), String> {
    write_checked(path, expected, new, &|_| {})
}

/// [`write_atomically`], calling `meanwhile` with the file's path after the first comparison
/// (where another process could write to it).
pub(crate) fn write_checked(
    path: &Path,
    expected: &str,
    new: &str,
    meanwhile: &dyn Fn(&Path),
) -> Result<(), String> {
    // a link is followed to the file it names, which is the one to fix
    let target = std::fs::canonicalize(path).map_err(io)?;
    let mut original = File::open(&target).map_err(io)?;
    let meta = original.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err("not a regular file; it was left alone".to_string());
    }
    if read_all(&mut original).map_err(io)? != expected.as_bytes() {
        return Err(CHANGED.to_string());
    }
    if meta.permissions().readonly() {
        return Err("the file is read-only; it was left alone".to_string());
    }
    let stamp = Stamp::of(&meta);
    meanwhile(&target);
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let mut tmp = temp_beside(&dir, &target, new)?;
    std::fs::set_permissions(tmp.path(), meta.permissions()).map_err(io)?;
    if links(&meta) > 1 || !same_owner(tmp.as_file(), &meta) {
        return write_in_place(&target, expected, new, &stamp, tmp);
    }
    // the owner change may clear set-id bits: give the permissions again
    std::fs::set_permissions(tmp.path(), meta.permissions()).map_err(io)?;
    tmp.as_file_mut().sync_all().map_err(io)?;
    // just before the rename: nobody wrote to the file since it was compared
    let now = std::fs::metadata(&target).map_err(io)?;
    if Stamp::of(&now) != stamp || read_all(&mut original).map_err(io)? != expected.as_bytes() {
        return Err(CHANGED_WHILE_WRITING.to_string());
    }
    tmp.persist(&target).map_err(|e| io(e.error))?;
    sync_dir(&dir);
    // a write that reached the old file between that check and the rename would be lost:
    // put the other process's text back
    let after = original.metadata().map_err(io)?;
    if Stamp::of(&after) != stamp {
        let theirs = read_all(&mut original).map_err(io)?;
        let mut back = temp_beside(&dir, &target, "")?;
        back.as_file_mut()
            .write_all(&theirs)
            .and_then(|_| back.as_file().sync_all())
            .map_err(io)?;
        std::fs::set_permissions(back.path(), meta.permissions()).map_err(io)?;
        same_owner(back.as_file(), &meta);
        back.persist(&target).map_err(|e| io(e.error))?;
        return Err(CHANGED_WHILE_WRITING.to_string());
    }
    Ok(())
}

/// A synced temporary file holding `text` in `dir`, named after `target` so that one left
/// behind by a crash is recognisable.
fn temp_beside(dir: &Path, target: &Path, text: &str) -> Result<tempfile::NamedTempFile, String> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}.locklint-"))
        .tempfile_in(dir)
        .map_err(io)?;
    tmp.write_all(text.as_bytes())
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(io)?;
    Ok(tmp)
}

#[cfg(unix)]
fn links(m: &Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::nlink(m)
}

#[cfg(not(unix))]
fn links(_: &Metadata) -> u64 {
    1
}

/// Gives `file` the owner and group of `like`; whether it has them.
#[cfg(unix)]
fn same_owner(file: &File, like: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = file.metadata() else { return false };
    if (m.uid(), m.gid()) == (like.uid(), like.gid()) {
        return true;
    }
    std::os::unix::fs::fchown(file, Some(like.uid()), Some(like.gid())).is_ok()
}

#[cfg(not(unix))]
fn same_owner(_: &File, _: &Metadata) -> bool {
    true
}

/// Makes a rename durable (best effort: not every platform can sync a directory).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Rewrites the file itself (keeping its inode, so its hard links and owner), with `backup`
/// already holding the new text.
fn write_in_place(
    target: &Path,
    expected: &str,
    new: &str,
    stamp: &Stamp,
    backup: tempfile::NamedTempFile,
) -> Result<(), String> {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(target)
        .map_err(io)?;
    let now = f.metadata().map_err(io)?;
    if Stamp::of(&now) != *stamp || read_all(&mut f).map_err(io)? != expected.as_bytes() {
        return Err(CHANGED_WHILE_WRITING.to_string());
    }
    let written = overwrite(&mut f, new.as_bytes());
    if let Err(e) = written {
        if overwrite(&mut f, expected.as_bytes()).is_ok() {
            return Err(format!(
                "{}; the file was left as it was",
                crate::discover::describe_io(&e)
            ));
        }
        let kept = kept_name(target);
        return match backup.persist(&kept) {
            Ok(_) => Err(format!(
                "{}; the file may be incomplete: the fixed text is in {}",
                crate::discover::describe_io(&e),
                kept.display()
            )),
            Err(p) => Err(format!(
                "{}; the file may be incomplete and the fixed text could not be kept: {}",
                crate::discover::describe_io(&e),
                crate::discover::describe_io(&p.error)
            )),
        };
    }
    Ok(())
}

fn overwrite(f: &mut File, bytes: &[u8]) -> std::io::Result<()> {
    f.seek(SeekFrom::Start(0))?;
    f.write_all(bytes)?;
    f.set_len(bytes.len() as u64)?;
    f.sync_all()
}

fn kept_name(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(".locklint-fixed");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_changed_on_disk_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rs");
        std::fs::write(&p, "new content").unwrap();
        assert!(write_atomically(&p, "old content", "x").is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new content");
        write_atomically(&p, "new content", "fixed").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "fixed");
    }

    #[test]
    fn a_line_appended_while_fixing_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rs");
        std::fs::write(&p, "fn a() {}\n").unwrap();
        let append = |path: &Path| {
            let mut f = OpenOptions::new().append(true).open(path).unwrap();
            f.write_all(b"fn b() {}\n").unwrap();
        };
        let e = write_checked(&p, "fn a() {}\n", "fn fixed() {}\n", &append).unwrap_err();
        assert!(e.contains("another process wrote"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "fn a() {}\nfn b() {}\n"
        );
        assert_eq!(leftovers(dir.path()), ["a.rs"]);
    }

    /// The names in a directory, sorted.
    fn leftovers(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[cfg(unix)]
    #[test]
    fn a_line_appended_in_place_while_fixing_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rs");
        std::fs::write(&p, "fn a() {}\n").unwrap();
        std::fs::hard_link(&p, dir.path().join("b.rs")).unwrap();
        let append = |path: &Path| {
            let mut f = OpenOptions::new().append(true).open(path).unwrap();
            f.write_all(b"fn b() {}\n").unwrap();
        };
        assert!(write_checked(&p, "fn a() {}\n", "fn fixed() {}\n", &append).is_err());
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "fn a() {}\nfn b() {}\n"
        );
        assert_eq!(leftovers(dir.path()), ["a.rs", "b.rs"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_is_followed_and_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        let target = dir.path().join("real/a.rs");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.rs");
        std::os::unix::fs::symlink("real/a.rs", &link).unwrap();
        write_atomically(&link, "old", "fixed").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("real/a.rs"));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "fixed");
        assert_eq!(leftovers(dir.path()), ["link.rs", "real"]);
        assert_eq!(leftovers(&dir.path().join("real")), ["a.rs"]);
    }

    #[cfg(unix)]
    #[test]
    fn hard_links_keep_sharing_the_fixed_text() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rs");
        let other = dir.path().join("b.rs");
        std::fs::write(&p, "old").unwrap();
        std::fs::hard_link(&p, &other).unwrap();
        let inode = std::fs::metadata(&p).unwrap().ino();
        write_atomically(&p, "old", "fixed").unwrap();
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "fixed");
        assert_eq!(std::fs::metadata(&p).unwrap().ino(), inode);
        assert_eq!(std::fs::metadata(&other).unwrap().nlink(), 2);
        assert_eq!(leftovers(dir.path()), ["a.rs", "b.rs"]);
    }

    #[cfg(unix)]
    #[test]
    fn permissions_and_owner_are_kept() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rs");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        // another user's file, when the tests may give it one (they run as root in CI)
        let other = std::os::unix::fs::chown(&p, Some(65534), Some(65534)).is_ok();
        write_atomically(&p, "old", "fixed").unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "fixed");
        assert_eq!(m.permissions().mode() & 0o7777, 0o640);
        if other {
            assert_eq!((m.uid(), m.gid()), (65534, 65534));
        }
    }

    #[test]
    fn a_read_only_file_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rs");
        std::fs::write(&p, "old").unwrap();
        let mut perms = std::fs::metadata(&p).unwrap().permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(&p, perms).unwrap();
        let e = write_atomically(&p, "old", "fixed").unwrap_err();
        assert!(e.contains("read-only"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
    }
}
