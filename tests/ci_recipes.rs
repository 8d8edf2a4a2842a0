//! The CI recipes of the README ("Using it in CI"), run exactly as the README writes them: the
//! command lines are taken from its fenced blocks (Markdown parsed with pulldown-cmark, the
//! workflow files with a YAML parser), so the README and what is tested cannot drift apart.
//! Each runs through `sh -c` in a temporary git repository holding a lock defect.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Parser, Tag, TagEnd};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use yaml_rust2::{Yaml, YamlLoader};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fenced block of the README: the headings above it, its info string and its text.
struct Block {
    headings: Vec<String>,
    lang: String,
    text: String,
}

fn readme_blocks() -> Vec<Block> {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut headings: Vec<(HeadingLevel, String)> = Vec::new();
    let mut heading: Option<(HeadingLevel, String)> = None;
    let mut block: Option<Block> = None;
    for event in Parser::new(&text) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => heading = Some((level, String::new())),
            Event::End(TagEnd::Heading(_)) => {
                if let Some((level, title)) = heading.take() {
                    headings.retain(|(l, _)| *l < level);
                    headings.push((level, title));
                }
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                block = Some(Block {
                    headings: headings.iter().map(|(_, t)| t.clone()).collect(),
                    lang: info.to_string(),
                    text: String::new(),
                })
            }
            Event::End(TagEnd::CodeBlock) => blocks.extend(block.take()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(b) = &mut block {
                    b.text.push_str(&t);
                } else if let Some((_, title)) = &mut heading {
                    title.push_str(&t);
                }
            }
            _ => {}
        }
    }
    blocks
}

/// The one block of `lang` under the heading `title`.
fn block(title: &str, lang: &str) -> String {
    let found: Vec<Block> = readme_blocks()
        .into_iter()
        .filter(|b| b.lang == lang && b.headings.last().is_some_and(|h| h == title))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "the README has one `{lang}` block under `{title}`"
    );
    found.into_iter().next().unwrap().text
}

fn yaml(text: &str) -> Yaml {
    YamlLoader::load_from_str(text)
        .expect("the README's workflow is valid YAML")
        .remove(0)
}

/// The `run:` steps of a GitHub Actions workflow that invoke locklint.
fn github_runs(workflow: &Yaml) -> Vec<String> {
    let jobs = workflow["jobs"].as_hash().expect("jobs");
    let mut out = Vec::new();
    for job in jobs.values() {
        for step in job["steps"].as_vec().expect("steps") {
            if let Some(run) = step["run"].as_str() {
                if run.starts_with("locklint ") {
                    out.push(run.to_string());
                }
            }
        }
    }
    out
}

const BAD: &str = r#"use redis::Commands;

pub fn acquire(con: &mut redis::Connection) -> redis::RedisResult<bool> {
    let ok: bool = con.set_nx("lock:report", "1")?;
    if ok {
        let _: () = con.expire("lock:report", 30)?;
    }
    Ok(ok)
}
"#;

const NEW_DEFECT: &str = r#"use redis::Commands;

pub fn release(con: &mut redis::Connection) -> redis::RedisResult<()> {
    let _: () = con.del("lock:report")?;
    Ok(())
}
"#;

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A repository on `main` with a lock defect, and `origin/main` pointing at its commit.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(p.join("src")).unwrap();
    std::fs::write(p.join("src/jobs.rs"), BAD).unwrap();
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "jobs"]);
    git(p, &["update-ref", "refs/remotes/origin/main", "HEAD"]);
    dir
}

/// Run a README command line with `sh`, the built `locklint` first on the PATH.
fn sh(dir: &Path, line: &str) -> Output {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_locklint"));
    let mut path = std::ffi::OsString::from(bin.parent().unwrap());
    if let Some(p) = std::env::var_os("PATH") {
        path.push(":");
        path.push(p);
    }
    Command::new("sh")
        .arg("-c")
        .arg(line)
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .unwrap()
}

fn show(line: &str, o: &Output) -> String {
    format!(
        "`{line}` exited {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn baseline_and_changed_files_recipes() {
    let text = block("Only new findings, only changed files", "sh");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let [write, check, changed] = lines[..] else {
        panic!("three command lines: {text}")
    };
    assert!(write.contains("--write-baseline") && check.contains("--baseline"));
    assert!(changed.contains("--changed-since"));
    let repo = repo();
    let dir = repo.path();

    // once: record today's findings
    let o = sh(dir, write);
    assert_eq!(o.status.code(), Some(0), "{}", show(write, &o));
    let baseline = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().contains("baseline"))
        .expect("the baseline file");
    let recorded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(baseline.path()).unwrap()).unwrap();
    assert_eq!(recorded["findings"].as_array().map(Vec::len), Some(2));

    // in CI: the recorded defects are still there, and the run passes
    let o = sh(dir, check);
    assert_eq!(o.status.code(), Some(0), "{}", show(check, &o));
    // PRs: nothing changed since origin/main
    let o = sh(dir, changed);
    assert_eq!(o.status.code(), Some(0), "{}", show(changed, &o));

    // a change that only edits a clean file passes both
    std::fs::write(dir.join("src/util.rs"), "pub fn two() -> u8 {\n    2\n}\n").unwrap();
    for line in [check, changed] {
        let o = sh(dir, line);
        assert_eq!(o.status.code(), Some(0), "{}", show(line, &o));
    }

    // a new defect fails both, and only it is reported
    std::fs::write(dir.join("src/release.rs"), NEW_DEFECT).unwrap();
    for line in [check, changed] {
        let o = sh(dir, line);
        assert_eq!(o.status.code(), Some(1), "{}", show(line, &o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("unconditional-release"), "{out}");
        assert!(!out.contains("separate-expire"), "{out}");
    }
}

#[test]
fn github_actions_recipe() {
    let workflow = yaml(&block(
        "GitHub Actions (code scanning and PR annotations)",
        "yaml",
    ));
    let runs = github_runs(&workflow);
    let annotations = runs
        .iter()
        .find(|r| r.contains("--format github"))
        .expect("an annotations step");
    let sarif = runs
        .iter()
        .find(|r| r.contains("--format sarif"))
        .expect("a SARIF step");
    // the SARIF file is the one uploaded
    let steps = workflow["jobs"]["locklint"]["steps"].as_vec().unwrap();
    let uploaded = steps
        .iter()
        .find_map(|s| s["with"]["sarif_file"].as_str())
        .expect("an upload step");
    let repo = repo();
    let dir = repo.path();

    let o = sh(dir, annotations);
    assert_eq!(o.status.code(), Some(1), "{}", show(annotations, &o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines()
            .any(|l| l.starts_with("::error file=src/jobs.rs,line=6,")),
        "{out}"
    );
    assert!(out.lines().all(|l| l.starts_with("::")), "{out}");

    // the SARIF step never fails the job; its file is valid SARIF with the findings
    let o = sh(dir, sarif);
    assert_eq!(o.status.code(), Some(0), "{}", show(sarif, &o));
    let text = std::fs::read_to_string(dir.join(uploaded)).expect("the uploaded SARIF file");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let schema_path = root().join("../shared/schemas/sarif-schema-2.1.0.json");
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&schema_path)
            .unwrap_or_else(|e| panic!("the SARIF schema at {}: {e}", schema_path.display())),
    )
    .unwrap();
    let validator = jsonschema::draft4::new(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .take(10)
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    let rules: Vec<&str> = doc["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ruleId"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"separate-expire"), "{rules:?}");
}

#[test]
fn gitlab_code_quality_recipe() {
    let ci = yaml(&block("GitLab CI (Code Quality)", "yaml"));
    let job = &ci["locklint"];
    let script: Vec<&str> = job["script"]
        .as_vec()
        .expect("a script")
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    let [line] = script[..] else {
        panic!("one command: {script:?}")
    };
    let report = job["artifacts"]["reports"]["codequality"]
        .as_str()
        .expect("a codequality report");
    let repo = repo();
    let dir = repo.path();
    let o = sh(dir, line);
    assert_eq!(o.status.code(), Some(1), "{}", show(line, &o));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(report)).unwrap()).unwrap();
    let issues = doc.as_array().expect("an array of issues");
    assert_eq!(issues.len(), 2);
    for i in issues {
        assert!(i["description"].as_str().is_some_and(|d| !d.is_empty()));
        assert!(i["fingerprint"].as_str().is_some_and(|f| !f.is_empty()));
        assert!(["info", "minor", "major", "critical", "blocker"]
            .contains(&i["severity"].as_str().unwrap()));
        assert_eq!(i["location"]["path"], "src/jobs.rs");
        assert!(i["location"]["lines"]["begin"].as_u64().is_some());
    }
    // the terminal gets the summary
    assert!(String::from_utf8_lossy(&o.stdout).contains("2 findings in 1 file"));
}
