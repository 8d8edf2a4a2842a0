//! The project's stored answer: a run over an unchanged project answers from it, byte for byte
//! as a run without cache, in every format and selection; a file edited (even within the same
//! second, keeping its length), a configuration edited, a file added or removed gives a new
//! answer; a touched file keeps it; a broken or foreign answer is rebuilt with a note; runs
//! sharing a cache never read half of one; `--no-cache` neither reads nor writes it; a baseline
//! applies afresh.
//!
//! A run that reads the files' cache entries instead of the answer says so when the entries are
//! spoiled ("could not be read and was rebuilt"), which tells the two paths apart.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

#[path = "support/bin.rs"]
mod bin;
use bin::rules_in;
#[path = "support/sources.rs"]
mod sources;
use sources::try_lock_helper;
#[path = "support/projects.rs"]
mod projects;
use projects::copy_dir;

const REBUILT_ENTRY: &str = "its entry in the analysis cache could not be read";
const REBUILT_ANSWER: &str = "the stored answer of the project could not be read";

fn locklint(dir: &Path, args: &[&str]) -> Output {
    bin::command(env!("CARGO_BIN_EXE_locklint"), dir)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run locklint")
}

fn cargo_locklint(dir: &Path, args: &[&str]) -> Output {
    bin::command(env!("CARGO_BIN_EXE_cargo-locklint"), dir)
        .arg("locklint")
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run cargo-locklint")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn set_mtime(p: &Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

fn mtime(p: &Path) -> SystemTime {
    std::fs::metadata(p).unwrap().modified().unwrap()
}

/// An hour ago: a time no run can mistake for a write during it.
fn long_ago() -> SystemTime {
    SystemTime::now() - Duration::from_secs(3600)
}

/// Every file of a project written an hour ago, as in a tree nobody is editing.
fn age(root: &Path) {
    for p in files_under(root) {
        set_mtime(&p, long_ago());
    }
}

fn is_answer(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("project-") && n.ends_with(".json"))
}

/// The stored answers in a cache directory.
fn answers(cache: &Path) -> Vec<PathBuf> {
    files_under(cache)
        .into_iter()
        .filter(|p| is_answer(p))
        .collect()
}

/// Overwrite every file entry of a cache (not the stored scans): a run that reads them notes
/// each one it rebuilds.
fn spoil_entries(cache: &Path) {
    for p in files_under(cache) {
        if !is_answer(&p)
            && p.file_name()
                .is_some_and(|n| n != ".gitignore" && n != "scans.bin")
        {
            std::fs::write(&p, b"not an analysis").unwrap();
        }
    }
}

/// A copy of `tests/projects/workspace` (a Cargo workspace whose findings rest on other
/// files and crates), every file an hour old; the path is canonical.
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap().join("workspace");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/workspace"),
        &root,
    );
    age(&root);
    (tmp, root)
}

/// A git repository whose `src/jobs.rs` ignores whether `try_lock` of `src/locks.rs`
/// acquired: a finding in `jobs.rs` only while the helper acquires.
fn helper_project(acquires: bool) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir(tmp.path().join(".git")).unwrap();
    std::fs::write(
        src.join("jobs.rs"),
        "use super::locks::try_lock;\n\npub async fn nightly(con: &mut redis::aio::MultiplexedConnection, token: &str) {\n    let _ = try_lock(con, \"lock:nightly\", token, 60_000).await;\n}\n",
    )
    .unwrap();
    std::fs::write(src.join("locks.rs"), try_lock_helper(acquires)).unwrap();
    tmp
}

/// A file of `tmp`'s `src/` the prefilter leaves out, holding a comment as long as
/// [`SETNX_CODE`].
fn plain_file(tmp: &Path) -> PathBuf {
    let path = tmp.join("src/report.rs");
    std::fs::write(&path, format!("//{}\n", "x".repeat(SETNX_CODE.len() - 3))).unwrap();
    path
}

/// Lock code the prefilter lets through: a `SETNX` with no expiry.
const SETNX_CODE: &str = "use redis::Commands;\n\npub fn take(con: &mut redis::Connection) -> redis::RedisResult<bool> {\n    con.set_nx(\"lock:report\", \"1\")\n}\n";

fn same_run(cached: &Output, uncached: &Output, what: &str) {
    assert_eq!(stdout(cached), stdout(uncached), "{what}: stdout");
    assert_eq!(stderr(cached), stderr(uncached), "{what}: stderr");
    assert_eq!(
        cached.status.code(),
        uncached.status.code(),
        "{what}: status"
    );
}

#[test]
fn an_unchanged_project_is_answered_from_its_stored_answer_in_every_format_and_selection() {
    let (_tmp, root) = workspace();
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let cold = locklint(&root, &["check", "--format", "json", "--cache-dir", &c]);
    assert!(!rules_in(&stdout(&cold), "invoices.rs").is_empty());
    assert_eq!(answers(cache.path()).len(), 1);
    // from here on, reading the entries would show: every run must answer from the answer
    spoil_entries(cache.path());
    let formats = ["human", "json", "json-lines", "sarif", "github", "gitlab"];
    let selections: [&[&str]; 4] = [
        &[],
        &["."],
        &["crates/billing/src/invoices.rs"],
        &["crates/billing", "scripts/renew.lua"],
    ];
    for sel in selections {
        for format in formats {
            let mut args = vec!["check"];
            args.extend(sel);
            args.extend(["--format", format]);
            let uncached = locklint(&root, &[args.as_slice(), &["--no-cache"]].concat());
            let cached = locklint(&root, &[args.as_slice(), &["--cache-dir", &c]].concat());
            same_run(&cached, &uncached, &format!("{sel:?} {format}"));
        }
    }
    // from a subdirectory, and a package through cargo
    let sub = root.join("crates/shipping");
    for format in formats {
        let uncached = locklint(&sub, &["check", "--format", format, "--no-cache"]);
        let cached = locklint(&sub, &["check", "--format", format, "--cache-dir", &c]);
        same_run(&cached, &uncached, &format!("crates/shipping {format}"));
    }
    for package in ["billing", "locks"] {
        let uncached = cargo_locklint(&root, &["-p", package, "--format", "json", "--no-cache"]);
        let cached = cargo_locklint(
            &root,
            &["-p", package, "--format", "json", "--cache-dir", &c],
        );
        same_run(&cached, &uncached, &format!("-p {package}"));
    }
    // the answer was never rebuilt
    assert_eq!(answers(cache.path()).len(), 1);
}

#[test]
fn an_edited_helper_changes_its_callers_findings_and_added_or_removed_files_count() {
    let tmp = helper_project(true);
    age(tmp.path());
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
        );
        let uncached = locklint(
            tmp.path(),
            &["check", "src/jobs.rs", "--format", "json", "--no-cache"],
        );
        assert_eq!(stdout(&o), stdout(&uncached));
        stdout(&o)
    };
    let before = check();
    assert_eq!(rules_in(&before, "jobs.rs"), vec!["lock-result-ignored"]);
    assert_eq!(check(), before);
    let locks = tmp.path().join("src/locks.rs");
    std::fs::write(&locks, try_lock_helper(false)).unwrap();
    set_mtime(&locks, long_ago() + Duration::from_secs(60));
    assert!(rules_in(&check(), "jobs.rs").is_empty());
    // the helper removed: the call resolves to nothing
    std::fs::write(&locks, try_lock_helper(true)).unwrap();
    assert_eq!(check(), before);
    std::fs::remove_file(&locks).unwrap();
    assert!(rules_in(&check(), "jobs.rs").is_empty());
    // and added again
    std::fs::write(&locks, try_lock_helper(true)).unwrap();
    age(tmp.path());
    assert_eq!(check(), before);
}

#[test]
fn a_file_rewritten_within_the_same_second_with_the_same_length_is_read_again() {
    // the files are new: their times are as recent as the run that stores the answer
    let tmp = helper_project(true);
    let report = plain_file(tmp.path());
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let args = ["check", "src", "--format", "json", "--cache-dir", &c];
    let before = stdout(&locklint(tmp.path(), &args));
    assert!(rules_in(&before, "report.rs").is_empty(), "{before}");
    assert_eq!(answers(cache.path()).len(), 1);
    // rewritten to the same length with the same time, as a write within the clock's tick
    let when = mtime(&report);
    std::fs::write(&report, SETNX_CODE).unwrap();
    set_mtime(&report, when);
    report_is_analysed(tmp.path(), &args);
}

/// A run of `args` in `root` finds the `SETNX` of `src/report.rs`, as a run without the cache
/// does.
fn report_is_analysed(root: &Path, args: &[&str]) {
    let after = stdout(&locklint(root, args));
    assert!(!rules_in(&after, "report.rs").is_empty(), "{after}");
    assert_eq!(
        after,
        stdout(&locklint(
            root,
            &["check", "src", "--format", "json", "--no-cache"]
        ))
    );
}

#[test]
fn a_touched_file_keeps_the_answer() {
    let (_tmp, root) = workspace();
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let args = ["check", "--format", "json", "--cache-dir", &c];
    let cold = locklint(&root, &args);
    spoil_entries(cache.path());
    let answer = answers(cache.path()).remove(0);
    let stored = std::fs::read(&answer).unwrap();
    let helper = root.join("crates/locks/src/lib.rs");
    set_mtime(&helper, long_ago() + Duration::from_secs(600));
    let touched = locklint(&root, &args);
    same_run(&touched, &cold, "touched");
    // stored again with the file's new time, so that the next run need not read it
    assert_ne!(std::fs::read(&answer).unwrap(), stored);
    same_run(&locklint(&root, &args), &cold, "after the touch");
}

/// Write `text` to `path` with a time ten minutes after [`long_ago`], as an edit in a tree
/// nobody else is editing.
fn edit(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    set_mtime(path, long_ago() + Duration::from_secs(600));
}

/// The workspace with a lock-free `money.rs` in the billing crate (which the analysis leaves
/// out), answered once with a cache whose entries are then spoiled (a run that analyses the
/// project again notes every entry it rebuilds): the project, the cache, `money.rs`, the
/// arguments of the run and its output.
struct LeftOut {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    cache: tempfile::TempDir,
    money: PathBuf,
    cold: Output,
}

impl LeftOut {
    fn new() -> LeftOut {
        let (_tmp, root) = workspace();
        let money = root.join("crates/billing/src/money.rs");
        edit(
            &money,
            "pub fn cents(units: u64) -> u64 {\n    units * 100\n}\n",
        );
        let cache = tempfile::tempdir().unwrap();
        let cold = cached_check(&root, cache.path());
        assert!(!stdout(&cold).contains("money.rs"));
        spoil_entries(cache.path());
        LeftOut {
            _tmp,
            root,
            cache,
            money,
            cold,
        }
    }

    fn check(&self) -> Output {
        cached_check(&self.root, self.cache.path())
    }

    fn uncached(&self) -> Output {
        locklint(&self.root, &["check", "--format", "json", "--no-cache"])
    }
}

/// `check` of the project at `root` in JSON with the cache in `cache`.
fn cached_check(root: &Path, cache: &Path) -> Output {
    let c = cache.display().to_string();
    locklint(root, &["check", "--format", "json", "--cache-dir", &c])
}

#[test]
fn an_edit_of_a_file_the_analysis_left_out_keeps_the_answer() {
    let p = LeftOut::new();
    let answer = answers(p.cache.path()).remove(0);
    let stored = std::fs::read(&answer).unwrap();
    // no lock code, no name the analysis asked the other files for: left out again
    edit(
        &p.money,
        "pub fn cents(units: u64) -> u64 {\n    units * 100 + 0\n}\n",
    );
    let warm = p.check();
    same_run(&warm, &p.cold, "edited");
    assert!(!stderr(&warm).contains("rebuilt"), "{}", stderr(&warm));
    // stored again with the file's new state
    assert_ne!(std::fs::read(&answer).unwrap(), stored);
    same_run(&p.check(), &p.cold, "after the edit");
    // the answer is the one a run without the cache gives
    same_run(&warm, &p.uncached(), "without the cache");
}

#[test]
fn an_edit_that_calls_a_lock_helper_is_analysed_again() {
    let p = LeftOut::new();
    // no Redis client in sight, but the name of a helper of the `locks` crate, which billing
    // depends on: the analysis would parse it
    edit(
        &p.money,
        "pub async fn settle<C>(con: &mut C, token: &str) {\n    let _ = locks::try_lock(con, \"lock:settle\", token, 30_000).await;\n}\n",
    );
    let warm = p.check();
    assert!(stderr(&warm).contains("rebuilt"), "{}", stderr(&warm));
    assert_eq!(stdout(&warm), stdout(&p.uncached()));
    assert!(stdout(&warm).contains("money.rs"), "{}", stdout(&warm));
}

#[test]
fn a_file_left_out_is_not_read_again_while_its_length_and_time_are_those_stored() {
    let tmp = helper_project(true);
    let report = plain_file(tmp.path());
    age(tmp.path());
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let args = ["check", "src", "--format", "json", "--cache-dir", &c];
    let cold = stdout(&locklint(tmp.path(), &args));
    assert!(rules_in(&cold, "report.rs").is_empty(), "{cold}");
    // the project's answer no longer holds (another key in `jobs.rs`), so the files are
    // loaded again; `report.rs` gets lock code of the same length with the time it had: as
    // stored, an hour old, it stands for its bytes (as it does for the stored answer) and
    // is not read
    let when = mtime(&report);
    std::fs::write(&report, SETNX_CODE).unwrap();
    set_mtime(&report, when);
    let jobs = tmp.path().join("src/jobs.rs");
    let text = std::fs::read_to_string(&jobs).unwrap();
    edit(&jobs, &text.replace("lock:nightly", "lock:weekly"));
    let warm = stdout(&locklint(tmp.path(), &args));
    assert!(warm.contains("lock:weekly"), "{warm}");
    assert!(rules_in(&warm, "report.rs").is_empty(), "{warm}");
    // another time: read, scanned and analysed afresh
    set_mtime(&report, long_ago() + Duration::from_secs(1200));
    report_is_analysed(tmp.path(), &args);
}

#[test]
fn an_edited_configuration_changes_the_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(
        root.join("src/report.rs"),
        "use redis::Commands;\n\npub fn take(con: &mut redis::Connection) -> redis::RedisResult<bool> {\n    con.set_nx(\"zorp:report\", \"1\")\n}\n",
    )
    .unwrap();
    let config = root.join("locklint.toml");
    std::fs::write(&config, "lock-key-patterns = [\"zorp\"]\n").unwrap();
    age(root);
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let args = ["check", "--format", "json", "--cache-dir", &c];
    let first = stdout(&locklint(root, &args));
    assert!(
        rules_in(&first, "report.rs").contains(&"setnx-without-expiry".to_string()),
        "{first}"
    );
    assert_eq!(answers(cache.path()).len(), 1);
    // the same length, an hour old: only its content tells
    std::fs::write(&config, "lock-key-patterns = [\"zarp\"]\n").unwrap();
    set_mtime(&config, long_ago());
    let second = stdout(&locklint(root, &args));
    assert!(rules_in(&second, "report.rs").is_empty(), "{second}");
    // a configuration added where there was none
    std::fs::write(
        root.join("src/locklint.toml"),
        "lock-key-patterns = [\"zorp\"]\n",
    )
    .unwrap();
    set_mtime(&root.join("src/locklint.toml"), long_ago());
    std::fs::remove_file(&config).unwrap();
    let uncached = stdout(&locklint(
        root,
        &["check", "--format", "json", "--no-cache"],
    ));
    assert_eq!(stdout(&locklint(root, &args)), uncached);
}

#[test]
fn a_broken_or_foreign_answer_is_rebuilt_with_a_note() {
    let (_tmp, root) = workspace();
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let args = ["check", "--format", "json", "--cache-dir", &c];
    let cold = locklint(&root, &args);
    let answer = answers(cache.path()).remove(0);
    let whole = std::fs::read(&answer).unwrap();
    for broken in [
        whole[..whole.len() / 2].to_vec(),
        b"\x00\xffnot an answer".to_vec(),
        b"{\"format\": 1}".to_vec(),
    ] {
        std::fs::write(&answer, &broken).unwrap();
        let o = locklint(&root, &args);
        assert_eq!(stdout(&o), stdout(&cold));
        assert_eq!(
            stderr(&o).matches(REBUILT_ANSWER).count(),
            1,
            "{}",
            stderr(&o)
        );
        // rebuilt: read back without a note
        assert_ne!(std::fs::read(&answer).unwrap(), broken);
        let again = locklint(&root, &args);
        same_run(&again, &cold, "rebuilt");
    }
    // the answer of other options (another rule set) under this one's name
    let ignoring = [
        "check",
        "--format",
        "json",
        "--cache-dir",
        &c,
        "--ignore",
        "unfenced-write",
    ];
    let other = locklint(&root, &ignoring);
    assert_ne!(stdout(&other), stdout(&cold));
    let theirs = answers(cache.path())
        .into_iter()
        .find(|p| *p != answer)
        .unwrap();
    std::fs::copy(&theirs, &answer).unwrap();
    let o = locklint(&root, &args);
    assert_eq!(stdout(&o), stdout(&cold));
    assert_eq!(
        stderr(&o).matches(REBUILT_ANSWER).count(),
        1,
        "{}",
        stderr(&o)
    );
    same_run(
        &locklint(&root, &ignoring),
        &other,
        "the other options' answer",
    );
}

#[test]
fn no_cache_neither_reads_nor_writes_the_answer() {
    let (_tmp, root) = workspace();
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    locklint(&root, &["check", "--cache-dir", &c]);
    let answer = answers(cache.path()).remove(0);
    std::fs::write(&answer, b"garbage").unwrap();
    let o = bin::command(env!("CARGO_BIN_EXE_locklint"), &root)
        .args(["check", "--format", "json", "--no-cache"])
        .env("LOCKLINT_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    assert!(!stderr(&o).contains(REBUILT_ANSWER), "{}", stderr(&o));
    assert_eq!(std::fs::read(&answer).unwrap(), b"garbage");
    assert!(!root.join(".locklint_cache").exists());
}

#[test]
fn runs_sharing_a_cache_never_read_half_an_answer() {
    let (_tmp, root) = workspace();
    let expected = locklint(&root, &["check", "--format", "json", "--no-cache"]);
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let helper = root.join("crates/locks/src/lib.rs");
    for round in 0..4u64 {
        // a touch each round: every run stores the answer again while the others read it
        set_mtime(&helper, long_ago() + Duration::from_secs(round + 1));
        let spawn = || {
            Command::new(env!("CARGO_BIN_EXE_locklint"))
                .args(["check", "--format", "json", "--cache-dir", &c])
                .current_dir(&root)
                .env_remove("LOCKLINT_CACHE_DIR")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let children = [spawn(), spawn(), spawn()];
        for child in children {
            let o = child.wait_with_output().unwrap();
            assert_eq!(stdout(&o), stdout(&expected), "round {round}");
            assert!(!stderr(&o).contains("could not be read"), "{}", stderr(&o));
        }
    }
}

#[test]
fn a_changed_file_falls_back_to_the_entries_and_stores_a_new_answer() {
    let (_tmp, root) = workspace();
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    let args = ["check", "--format", "json", "--cache-dir", &c];
    locklint(&root, &args);
    let answer = answers(cache.path()).remove(0);
    let stored = std::fs::read(&answer).unwrap();
    spoil_entries(cache.path());
    let worker = root.join("crates/shipping/src/worker.rs");
    let mut text = std::fs::read_to_string(&worker).unwrap();
    text.push_str("\n// changed\n");
    std::fs::write(&worker, text).unwrap();
    let o = locklint(&root, &args);
    let uncached = locklint(&root, &["check", "--format", "json", "--no-cache"]);
    assert_eq!(stdout(&o), stdout(&uncached));
    // the other files' analyses came from their entries (spoiled here, so rebuilt)
    assert!(stderr(&o).contains(REBUILT_ENTRY), "{}", stderr(&o));
    assert_ne!(std::fs::read(&answer).unwrap(), stored);
    // and the next run answers from the new answer
    same_run(&locklint(&root, &args), &uncached, "after the change");
}

#[test]
fn a_baseline_applies_afresh_to_a_stored_answer_and_other_rules_have_their_own() {
    let (_tmp, root) = workspace();
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().display().to_string();
    locklint(&root, &["check", "--cache-dir", &c]);
    spoil_entries(cache.path());
    // a baseline of one file's findings hides them from the whole tree's run
    let baseline = root.join("baseline.json");
    let b = baseline.display().to_string();
    let o = locklint(
        &root,
        &[
            "check",
            "crates/billing",
            "--no-cache",
            "--write-baseline",
            &b,
        ],
    );
    assert!(baseline.is_file(), "{}", stderr(&o));
    set_mtime(&baseline, long_ago());
    let args = ["check", "--format", "json", "--baseline", &b];
    let uncached = locklint(&root, &[args.as_slice(), &["--no-cache"]].concat());
    let cached = locklint(&root, &[args.as_slice(), &["--cache-dir", &c]].concat());
    same_run(&cached, &uncached, "with a baseline");
    assert!(rules_in(&stdout(&cached), "invoices.rs").is_empty());
    assert!(!rules_in(&stdout(&cached), "worker.rs").is_empty());
    // a rule ignored on the command line is another set of options: its own answer
    let ignoring = [
        "check",
        "--format",
        "json",
        "--ignore",
        "constant-lock-value",
    ];
    let uncached = locklint(&root, &[ignoring.as_slice(), &["--no-cache"]].concat());
    let cached = locklint(&root, &[ignoring.as_slice(), &["--cache-dir", &c]].concat());
    assert_eq!(stdout(&cached), stdout(&uncached));
    assert_eq!(answers(cache.path()).len(), 2);
}

/// [`sources::layered`], every file an hour old.
fn layered() -> (tempfile::TempDir, PathBuf) {
    let (tmp, root) = sources::layered();
    age(&root);
    (tmp, root)
}

#[test]
fn an_edit_of_a_parsed_file_that_changes_nothing_the_analysis_read_keeps_the_answer() {
    let (_tmp, root) = layered();
    let cache = tempfile::tempdir().unwrap();
    let cold = cached_check(&root, cache.path());
    assert!(stdout(&cold).contains("lock-result-ignored"));
    // the analysis cache spoiled but for the const file's entry (the form the answer read of
    // it, which an edit is compared with): a run that analyses the project again says so
    for p in files_under(cache.path()) {
        let keep = is_answer(&p)
            || p.file_name().is_some_and(|n| n == ".gitignore")
            || String::from_utf8_lossy(&std::fs::read(&p).unwrap()).contains("report_title");
        if !keep {
            std::fs::write(&p, b"not an analysis").unwrap();
        }
    }
    let answer = answers(cache.path()).remove(0);
    let stored = std::fs::read(&answer).unwrap();
    // the const's file, parsed for it, no finding in it: a comment between two items moves
    // every offset after it and changes nothing the analysis read
    let keys = root.join("src/keys.rs");
    let text = std::fs::read_to_string(&keys).unwrap();
    let at = text.find("pub fn report_title").unwrap();
    edit(
        &keys,
        &format!("{}// The title of a report.\n{}", &text[..at], &text[at..]),
    );
    let warm = cached_check(&root, cache.path());
    same_run(&warm, &cold, "commented");
    assert!(!stderr(&warm).contains("rebuilt"), "{}", stderr(&warm));
    // stored again with the file's new state, and the answer a run without the cache gives
    assert_ne!(std::fs::read(&answer).unwrap(), stored);
    same_run(&cached_check(&root, cache.path()), &cold, "after the edit");
    let uncached = locklint(&root, &["check", "--format", "json", "--no-cache"]);
    same_run(&warm, &uncached, "without the cache");
    // the same comment in the caller, whose findings it moves: analysed again
    let jobs = root.join("src/jobs.rs");
    let text = std::fs::read_to_string(&jobs).unwrap();
    edit(&jobs, &format!("// The nightly jobs.\n{text}"));
    let moved = cached_check(&root, cache.path());
    assert!(stderr(&moved).contains(REBUILT_ENTRY), "{}", stderr(&moved));
    assert_ne!(stdout(&moved), stdout(&cold));
    assert_eq!(
        stdout(&moved),
        stdout(&locklint(
            &root,
            &["check", "--format", "json", "--no-cache"]
        )),
        "the caller edited"
    );
}

#[test]
fn an_edit_of_a_helper_a_const_or_the_schema_is_analysed_again() {
    let (_tmp, root) = layered();
    let cache = tempfile::tempdir().unwrap();
    let cold = stdout(&cached_check(&root, cache.path()));
    for (file, from, to) in sources::FACT_EDITS {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file}");
        for (edited, findings) in [(text.replace(from, to), None), (text, Some(&cold))] {
            spoil_entries(cache.path());
            edit(&path, &edited);
            let warm = cached_check(&root, cache.path());
            assert!(
                stderr(&warm).contains(REBUILT_ENTRY),
                "{file}: {}",
                stderr(&warm)
            );
            let uncached = locklint(&root, &["check", "--format", "json", "--no-cache"]);
            assert_eq!(stdout(&warm), stdout(&uncached), "{file}");
            match findings {
                // the edit changes findings; taken back, they are the first run's
                None => assert_ne!(&stdout(&warm), &cold, "{file}"),
                Some(cold) => assert_eq!(&stdout(&warm), cold, "{file}"),
            }
        }
    }
}

/// A file of lock code that does not parse: its one finding is its `parse-error`.
const BROKEN: &str = "pub fn release(con: &mut redis::Connection) {\n    let _: () = redis::cmd(\"DEL\").arg(\"lock:broken\").query(con).unwrap() let\n}\n";

#[test]
fn an_edit_that_only_moves_a_file_s_parse_error_keeps_the_answer() {
    let (_tmp, root) = layered();
    let broken = root.join("src/broken.rs");
    edit(&broken, BROKEN);
    let cache = tempfile::tempdir().unwrap();
    let cold = cached_check(&root, cache.path());
    let line_of_error = |o: &Output| -> Vec<u64> {
        let v: serde_json::Value = serde_json::from_str(&stdout(o)).unwrap();
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["rule"] == "parse-error")
            .map(|d| d["line"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(line_of_error(&cold), [2], "{}", stdout(&cold));
    assert!(stdout(&cold).contains("lock-result-ignored"));
    // every entry spoiled but the broken file's (the form its edit is compared with): a run
    // that analyses the project again says so
    for p in files_under(cache.path()) {
        let keep = is_answer(&p)
            || p.file_name().is_some_and(|n| n == ".gitignore")
            || String::from_utf8_lossy(&std::fs::read(&p).unwrap()).contains("expected `;`");
        if !keep {
            std::fs::write(&p, b"not an analysis").unwrap();
        }
    }
    // two comment lines above the error: the error moves, nothing else does
    edit(
        &broken,
        &format!("// Releases the lock.\n// Unfinished.\n{BROKEN}"),
    );
    let warm = cached_check(&root, cache.path());
    assert!(!stderr(&warm).contains("rebuilt"), "{}", stderr(&warm));
    assert_eq!(line_of_error(&warm), [4], "{}", stdout(&warm));
    let uncached = || locklint(&root, &["check", "--format", "json", "--no-cache"]);
    same_run(&warm, &uncached(), "the error moved");
    // answered again from the stored answer, now with the file's new state
    same_run(
        &cached_check(&root, cache.path()),
        &uncached(),
        "answered again",
    );
    // another error: the file's finding says something else, analysed again
    edit(&broken, &BROKEN.replace(" let\n", " )\n"));
    let other = cached_check(&root, cache.path());
    assert!(stderr(&other).contains(REBUILT_ENTRY), "{}", stderr(&other));
    assert_eq!(stdout(&other), stdout(&uncached()), "another error");
    assert_ne!(stdout(&other), stdout(&warm));
}
