//! The project held in memory (`locklint::index::Index`, the language server's): after edits
//! in memory, and after files changed, created and deleted on disk, each file's findings are
//! those the command line reports on the same texts, byte for byte in JSON; and an analysis
//! reads nothing from the disk until a file is reported changed.

#[path = "support/projects.rs"]
mod projects;
#[path = "support/sources.rs"]
mod sources;

use locklint::engine::{self, ConfigSource, Options, Report};
use locklint::index::Index;
use sources::try_lock_helper;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

type Texts = HashMap<PathBuf, String>;

fn options(root: &Path) -> Options {
    Options {
        project_root: Some(root.to_path_buf()),
        config: ConfigSource::Discover,
        ..Default::default()
    }
}

/// The report as `check --format json` prints it.
fn json(report: &Report) -> String {
    locklint::output::json::render(report)
}

/// `check FILE` with `texts` in place of the files on disk (none: the files on disk).
fn checked(root: &Path, file: &Path, texts: &Texts) -> String {
    json(&engine::run(&Options {
        paths: vec![file.to_path_buf()],
        overlay: (!texts.is_empty()).then(|| Arc::new(texts.clone())),
        ..options(root)
    }))
}

fn indexed(index: &mut Index, file: &Path, texts: &Texts) -> String {
    json(&index.analyse(&[file.to_path_buf()], Arc::new(texts.clone())))
}

/// The project's files, as discovery finds them.
fn files(root: &Path) -> Vec<PathBuf> {
    let (files, errors) =
        locklint::discover::discover(&[root.to_path_buf()], &[], Arc::new(|_| false));
    assert!(errors.is_empty());
    files
}

/// A text edited: the lock helpers stop acquiring (`SET` becomes `GET`) and a comment
/// line is added.
fn edited(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let comment = if path.extension().is_some_and(|e| e == "rs") {
        "//"
    } else {
        "--"
    };
    format!("{}\n{comment} edited\n", text.replace("\"SET\"", "\"GET\""))
}

#[test]
fn each_file_has_the_command_lines_findings_through_edits_and_once_they_are_saved() {
    for name in ["workspace", "plain"] {
        let (_tmp, root) = projects::project(name);
        let files = files(&root);
        let mut index = Index::new(options(&root));
        let mut texts = Texts::new();
        let before: Vec<String> = files
            .iter()
            .map(|f| {
                let seen = indexed(&mut index, f, &texts);
                assert_eq!(seen, checked(&root, f, &texts), "{name}: {}", f.display());
                seen
            })
            .collect();
        // one file edited at a time, the edits kept: every file's findings each time
        for e in &files {
            texts.insert(e.clone(), edited(e));
            for f in &files {
                assert_eq!(
                    indexed(&mut index, f, &texts),
                    checked(&root, f, &texts),
                    "{name}: {} with {} edited",
                    f.display(),
                    e.display()
                );
            }
        }
        // the edits saved: what `check` reads from the disk
        for (path, text) in &texts {
            std::fs::write(path, text).unwrap();
        }
        let after: Vec<String> = files
            .iter()
            .map(|f| {
                let seen = indexed(&mut index, f, &texts);
                assert_eq!(
                    seen,
                    checked(&root, f, &Texts::new()),
                    "{name}: {}",
                    f.display()
                );
                seen
            })
            .collect();
        if name == "workspace" {
            assert_ne!(before, after, "the edits change findings");
        }
    }
}

const JOBS: &str = "use super::locks::try_lock;\n\npub async fn nightly(con: &mut redis::aio::MultiplexedConnection, token: &str) {\n    let _ = try_lock(con, \"lock:nightly\", token, 60_000).await;\n}\n";

fn rules(json: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn files_are_read_again_only_once_reported_changed_created_or_deleted() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    let jobs = root.join("src/jobs.rs");
    let locks = root.join("src/locks.rs");
    std::fs::write(&jobs, JOBS).unwrap();
    std::fs::write(&locks, try_lock_helper(true)).unwrap();
    let mut index = Index::new(options(&root));
    let mut texts = Texts::from([(jobs.clone(), JOBS.to_string())]);
    let seen = indexed(&mut index, &jobs, &texts);
    assert_eq!(rules(&seen), ["lock-result-ignored"]);
    assert_eq!(index.reads(), 2, "the project's files, once each");
    // the document edited: nothing is read
    for k in 0..5 {
        texts.insert(jobs.clone(), format!("{JOBS}// {k}\n"));
        let seen = indexed(&mut index, &jobs, &texts);
        assert_eq!(seen, checked(&root, &jobs, &texts));
    }
    assert_eq!(index.reads(), 2);
    // the helper changed on disk behind the index's back: not seen
    std::fs::write(&locks, try_lock_helper(false)).unwrap();
    assert_eq!(
        rules(&indexed(&mut index, &jobs, &texts)),
        ["lock-result-ignored"]
    );
    assert_eq!(index.reads(), 2);
    // reported changed: read again, and the caller's finding goes
    index.files_changed([locks.clone()]);
    let seen = indexed(&mut index, &jobs, &texts);
    assert_eq!(seen, checked(&root, &jobs, &texts));
    assert!(rules(&seen).is_empty(), "{seen}");
    assert_eq!(index.reads(), 3);
    // deleted, then created again acquiring
    std::fs::remove_file(&locks).unwrap();
    index.files_changed([locks.clone()]);
    let seen = indexed(&mut index, &jobs, &texts);
    assert_eq!(seen, checked(&root, &jobs, &texts));
    assert!(rules(&seen).is_empty(), "{seen}");
    std::fs::write(&locks, try_lock_helper(true)).unwrap();
    index.files_changed([locks.clone()]);
    let seen = indexed(&mut index, &jobs, &texts);
    assert_eq!(seen, checked(&root, &jobs, &texts));
    assert_eq!(rules(&seen), ["lock-result-ignored"]);
    assert_eq!(index.reads(), 4, "only the new file is read");
    // a file created elsewhere in the project is listed and read, the others are not
    let more = root.join("src/more.rs");
    std::fs::write(&more, "pub fn unrelated() {}\n").unwrap();
    index.files_changed([more]);
    assert_eq!(
        indexed(&mut index, &jobs, &texts),
        checked(&root, &jobs, &texts)
    );
    assert_eq!(index.reads(), 5);
}

/// Every file's findings in `index`, each as `check FILE` prints them, compared with the
/// command line's on the same texts.
fn every_file(index: &mut Index, root: &Path, files: &[PathBuf], texts: &Texts) -> Vec<String> {
    files
        .iter()
        .map(|f| {
            let seen = indexed(index, f, texts);
            assert_eq!(seen, checked(root, f, texts), "{}", f.display());
            seen
        })
        .collect()
}

#[test]
fn an_edit_that_changes_nothing_the_analysis_read_keeps_its_findings() {
    let (_tmp, root) = sources::layered();
    let files = files(&root);
    let mut index = Index::new(options(&root));
    let mut texts = Texts::new();
    let before = every_file(&mut index, &root, &files, &texts);
    assert_eq!(index.analysed(), 1, "the project once, then its findings");
    assert!(before.iter().any(|f| !rules(f).is_empty()));
    // a comment added at the start of each Rust file in turn (every offset in it moves), and
    // taken away again
    let mut kept = Vec::new();
    for e in files
        .iter()
        .filter(|e| e.extension().is_some_and(|x| x == "rs"))
    {
        let text = std::fs::read_to_string(e).unwrap();
        let analysed = index.analysed();
        texts.insert(e.clone(), format!("// Edited.\n\n{text}"));
        let edited = every_file(&mut index, &root, &files, &texts);
        texts.remove(e);
        assert_eq!(every_file(&mut index, &root, &files, &texts), before);
        if index.analysed() == analysed {
            assert_eq!(edited, before, "{}", e.display());
            kept.push(e.strip_prefix(&root).unwrap().to_path_buf());
        }
    }
    // the module list (left out) and the consts (parsed for them, no client in sight): no
    // finding points into them; the caller's findings and the helper's acquire, which a
    // finding shows, are read from their text
    assert_eq!(kept, ["src/keys.rs", "src/lib.rs"].map(PathBuf::from));
}

#[test]
fn an_edit_of_a_helper_a_const_or_the_schema_is_analysed_again() {
    let (_tmp, root) = sources::layered();
    let files = files(&root);
    let mut index = Index::new(options(&root));
    let mut texts = Texts::new();
    let before = every_file(&mut index, &root, &files, &texts);
    for (file, from, to) in sources::FACT_EDITS {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file}");
        let analysed = index.analysed();
        texts.insert(path.clone(), text.replace(from, to));
        let after = every_file(&mut index, &root, &files, &texts);
        assert_ne!(after, before, "{file} changes findings");
        assert_eq!(index.analysed(), analysed + 1, "{file}");
        // and back
        texts.remove(&path);
        assert_eq!(every_file(&mut index, &root, &files, &texts), before);
        assert_eq!(index.analysed(), analysed + 2, "{file}");
    }
}
