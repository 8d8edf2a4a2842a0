//! The analysis cache: a warm run gives the cold run's answer, a changed file is analysed
//! again (and changes its callers' findings), a broken entry is rebuilt with a note, runs that
//! share a cache both finish with the right answer, and the cache goes where the flags, the
//! environment or the project root say.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "support/bin.rs"]
mod bin;
use bin::rules_in;
#[path = "support/sources.rs"]
mod sources;
use sources::try_lock_helper;

fn locklint(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = bin::command(env!("CARGO_BIN_EXE_locklint"), dir);
    c.args(args).env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run locklint")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Whether a cache file is a project's stored answer (`project-*.json`), not a file's entry.
fn is_answer(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("project-") && n.ends_with(".json"))
}

/// Every file entry under a cache directory (not its `.gitignore`, nor the projects' stored
/// answers, nor the stored scans of their files).
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p
                .file_name()
                .is_some_and(|n| n != ".gitignore" && n != "scans.bin")
                && !is_answer(&p)
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Remove the projects' stored answers from a cache directory.
fn remove_answers(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            remove_answers(&e.path());
        } else if is_answer(&e.path()) {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A project (a git repository) whose lock helpers live in `src/locks.rs` and whose caller
/// is `src/reports.rs`: the caller's finding rests on the helper's release.
fn helper_project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir(tmp.path().join(".git")).unwrap();
    let example =
        repo_root().join("fixtures/unconditional-release/bad_release_helper_in_other_file");
    for f in ["locks.rs", "reports.rs"] {
        std::fs::copy(example.join(f), src.join(f)).unwrap();
    }
    tmp
}

#[test]
fn a_warm_run_gives_the_cold_runs_answer_on_every_fixture() {
    let cache = tempfile::tempdir().unwrap();
    let root = repo_root();
    let args = |c: &Path| -> Vec<String> {
        vec![
            "check".into(),
            "fixtures".into(),
            "--project-root".into(),
            "fixtures".into(),
            "--format".into(),
            "json".into(),
            "--cache-dir".into(),
            c.display().to_string(),
        ]
    };
    let a = args(cache.path());
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let uncached = locklint(
        &root,
        &[
            "check",
            "fixtures",
            "--project-root",
            "fixtures",
            "--format",
            "json",
            "--no-cache",
        ],
        &[],
    );
    let cold = locklint(&root, &a, &[]);
    let stored = entries(cache.path());
    assert!(stored.len() > 100, "{} entries", stored.len());
    let warm = locklint(&root, &a, &[]);
    assert_eq!(stdout(&cold), stdout(&uncached));
    assert_eq!(stdout(&warm), stdout(&uncached));
    assert_eq!(warm.status.code(), uncached.status.code());
    // the warm run read the entries (it wrote none)
    assert_eq!(entries(cache.path()), stored);
    assert!(!stdout(&warm).is_empty());
}

#[test]
fn entries_stay_valid_when_files_are_added_before_them() {
    let tmp = helper_project();
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let check = |cached: bool| {
        let mut args = vec!["check", ".", "--format", "json"];
        if cached {
            args.extend(["--cache-dir", &c]);
        } else {
            args.push("--no-cache");
        }
        let o = locklint(tmp.path(), &args, &[]);
        stdout(&o)
    };
    let before = check(true);
    assert!(!rules_in(&before, "locks.rs").is_empty(), "{before}");
    let stored = entries(cache.path());
    assert_eq!(stored.len(), 2);
    // a new file that comes first in the project's order moves every other file's position
    std::fs::write(
        tmp.path().join("src/a_first.rs"),
        "pub fn ping(con: &mut redis::Connection) {\n    let _: () = redis::cmd(\"PING\").query(con).unwrap();\n}\n",
    )
    .unwrap();
    // a file without lock code is not parsed, so it has no entry
    std::fs::write(
        tmp.path().join("src/b_plain.rs"),
        "pub fn unrelated() -> u8 {\n    7\n}\n",
    )
    .unwrap();
    let after = check(true);
    assert_eq!(after, check(false));
    assert_eq!(rules_in(&after, "locks.rs"), rules_in(&before, "locks.rs"));
    // only the new file was analysed: the others' entries were read where they now sit
    let now = entries(cache.path());
    assert_eq!(now.len(), 3);
    assert!(stored.iter().all(|e| now.contains(e)));
}

#[test]
fn a_changed_helper_changes_its_callers_findings_on_the_next_warm_run() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir(tmp.path().join(".git")).unwrap();
    // the caller ignores whether it got the lock: a finding only while `try_lock` acquires
    std::fs::write(
        src.join("jobs.rs"),
        "use super::locks::try_lock;\n\npub async fn nightly(con: &mut redis::aio::MultiplexedConnection, token: &str) {\n    let _ = try_lock(con, \"lock:nightly\", token, 60_000).await;\n}\n",
    )
    .unwrap();
    let locks = src.join("locks.rs");
    std::fs::write(&locks, try_lock_helper(true)).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let check = || {
        let o = locklint(
            tmp.path(),
            &[
                "check",
                "src/jobs.rs",
                "--format",
                "json",
                "--cache-dir",
                &c,
            ],
            &[],
        );
        stdout(&o)
    };
    let before = check();
    assert_eq!(rules_in(&before, "jobs.rs"), vec!["lock-result-ignored"]);
    assert_eq!(check(), before);
    std::fs::write(&locks, try_lock_helper(false)).unwrap();
    let after = check();
    assert!(rules_in(&after, "jobs.rs").is_empty(), "{after}");
    // and back: analysed again as before; the cache keeps one entry per file, not per text
    std::fs::write(&locks, try_lock_helper(true)).unwrap();
    assert_eq!(check(), before);
    assert_eq!(entries(cache.path()).len(), 2);
}

#[test]
fn the_cache_keeps_what_the_project_needs_and_the_latest_answers() {
    let tmp = helper_project();
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let check = |extra: &[&str]| {
        let mut args = vec!["check", ".", "--format", "json", "--cache-dir", &c];
        args.extend(extra);
        let o = locklint(tmp.path(), &args, &[]);
        assert!(o.status.code() != Some(2), "{}", stderr(&o));
        stdout(&o)
    };
    let first = check(&[]);
    let kept = entries(cache.path());
    assert_eq!(kept.len(), 2, "{kept:?}");
    let build = kept[0].parent().unwrap().parent().unwrap().to_path_buf();
    // an earlier text of some file, and an entry another run is writing right now
    let stale = build.join("00").join("stale");
    let fresh = build.join("00").join("fresh");
    std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
    std::fs::write(&stale, "{}").unwrap();
    std::fs::write(&fresh, "{}").unwrap();
    let hour = std::time::Duration::from_secs(3600);
    let set = |p: &Path, t: std::time::SystemTime| {
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(t)
            .unwrap()
    };
    set(&stale, std::time::SystemTime::now() - hour);
    set(&fresh, std::time::SystemTime::now() + hour);
    // each edit of a file leaves no entry behind
    let reports = tmp.path().join("src/reports.rs");
    let text = std::fs::read_to_string(&reports).unwrap();
    for i in 0..3 {
        std::fs::write(
            &reports,
            format!(
                "{text}
// edit {i}
"
            ),
        )
        .unwrap();
        check(&[]);
    }
    assert!(!stale.exists());
    assert!(fresh.exists());
    std::fs::remove_file(&fresh).unwrap();
    assert_eq!(entries(cache.path()).len(), 2);
    std::fs::write(&reports, &text).unwrap();
    assert_eq!(check(&[]), first);
    // answers: one per set of options, the latest eight kept
    let rules = [
        "get-then-set",
        "setnx-without-expiry",
        "separate-expire",
        "constant-lock-value",
        "lock-result-ignored",
        "unconditional-release",
        "unconditional-renew",
        "unfenced-write",
        "lock-table-steals-live-lock",
        "lock-table-no-owner-check",
    ];
    for rule in rules {
        check(&["--select", rule]);
    }
    let answers = || -> Vec<PathBuf> {
        let mut a: Vec<PathBuf> = std::fs::read_dir(&build)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| is_answer(p))
            .collect();
        a.sort();
        a
    };
    let kept = answers();
    assert_eq!(kept.len(), 8);
    // the latest is among them: answering from it writes no other answer in its place
    let last = check(&["--select", "lock-table-no-owner-check"]);
    assert!(rules_in(&last, "reports.rs").is_empty(), "{last}");
    assert_eq!(answers(), kept);
    // the oldest is not: its options are answered again, and the oldest kept one goes
    check(&["--select", "get-then-set"]);
    assert_eq!(answers().len(), 8);
    assert_ne!(answers(), kept);
}

/// The stored scans of the project's files in a cache directory.
fn scans(dir: &Path) -> PathBuf {
    let build = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("the build's directory");
    build.join("scans.bin")
}

#[test]
fn broken_stored_scans_are_rebuilt_with_a_note_and_the_same_answer() {
    let tmp = helper_project();
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let args = ["check", "src", "--format", "json", "--cache-dir", &c];
    let first = locklint(tmp.path(), &args, &[]);
    let stored = scans(cache.path());
    let whole = std::fs::read(&stored).unwrap();
    let mut flipped = whole.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    for spoiled in [
        whole[..whole.len() / 2].to_vec(),
        flipped,
        b"garbage".to_vec(),
    ] {
        // without the project's stored answer, the next run loads the files
        remove_answers(cache.path());
        std::fs::write(&stored, &spoiled).unwrap();
        let second = locklint(tmp.path(), &args, &[]);
        assert_eq!(stdout(&second), stdout(&first));
        let notes = stderr(&second);
        assert!(
            notes.contains("the stored scans of the project's files could not be read"),
            "{notes}"
        );
        // rebuilt: the next run reads them without a note
        remove_answers(cache.path());
        let third = locklint(tmp.path(), &args, &[]);
        assert_eq!(stdout(&third), stdout(&first));
        assert!(!stderr(&third).contains("rebuilt"), "{}", stderr(&third));
    }
}

#[test]
fn a_broken_cache_entry_is_rebuilt_with_a_note_and_the_same_answer() {
    let tmp = helper_project();
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let args = ["check", "src", "--format", "json", "--cache-dir", &c];
    let first = locklint(tmp.path(), &args, &[]);
    let stored = entries(cache.path());
    assert_eq!(stored.len(), 2, "{stored:?}");
    // without the project's stored answer, the next run reads the entries
    remove_answers(cache.path());
    // one entry truncated, the other garbage
    let whole = std::fs::read(&stored[0]).unwrap();
    std::fs::write(&stored[0], &whole[..whole.len() / 2]).unwrap();
    std::fs::write(&stored[1], b"\x00\xffnot an analysis").unwrap();
    let second = locklint(tmp.path(), &args, &[]);
    remove_answers(cache.path());
    assert_eq!(stdout(&second), stdout(&first));
    let notes = stderr(&second);
    assert_eq!(
        notes.matches("could not be read and was rebuilt").count(),
        2,
        "{notes}"
    );
    // rebuilt: the next run reads them without a note
    let third = locklint(tmp.path(), &args, &[]);
    assert_eq!(stdout(&third), stdout(&first));
    assert!(!stderr(&third).contains("rebuilt"), "{}", stderr(&third));
}

#[test]
fn runs_sharing_a_cache_both_finish_with_the_right_answer() {
    let tmp = helper_project();
    let expected = stdout(&locklint(
        tmp.path(),
        &["check", "src", "--format", "json", "--no-cache"],
        &[],
    ));
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    for _ in 0..3 {
        let spawn = || {
            Command::new(env!("CARGO_BIN_EXE_locklint"))
                .args(["check", "src", "--format", "json", "--cache-dir", &c])
                .current_dir(tmp.path())
                .env_remove("LOCKLINT_CACHE_DIR")
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        for child in [a, b] {
            let o = child.wait_with_output().unwrap();
            assert_eq!(stdout(&o), expected);
        }
    }
}

#[test]
fn the_cache_lives_at_the_project_root_unless_told_otherwise() {
    // default: `.locklint_cache` at the project root, ignored by git
    let tmp = helper_project();
    let sub = tmp.path().join("src");
    locklint(&sub, &["check", "reports.rs"], &[]);
    let dir = tmp.path().join(".locklint_cache");
    assert_eq!(
        std::fs::read_to_string(dir.join(".gitignore"))
            .unwrap()
            .lines()
            .last(),
        Some("*")
    );
    assert_eq!(entries(&dir).len(), 2);
    // `--no-cache`: nothing written
    let tmp = helper_project();
    locklint(tmp.path(), &["check", "src", "--no-cache"], &[]);
    assert!(!tmp.path().join(".locklint_cache").exists());
    // `LOCKLINT_CACHE_DIR`, for `check` and for `audit`
    for command in ["check", "audit"] {
        let tmp = helper_project();
        let env_dir = tempfile::tempdir().unwrap();
        locklint(
            tmp.path(),
            &[command, "src"],
            &[("LOCKLINT_CACHE_DIR", env_dir.path())],
        );
        assert!(!tmp.path().join(".locklint_cache").exists());
        assert_eq!(entries(env_dir.path()).len(), 2, "{command}");
    }
}
