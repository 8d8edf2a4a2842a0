//! Scores locklint against the labelled development set of real code in `devset/`.
//!
//! `cargo run --release --example devset -- --cache DIR [--set rust|sql-lua] [--devset DIR]`
//!
//! The labels (`devset/<set>.jsonl`) name files in public repositories and the sites in them
//! where a rule is expected to fire, or where it must stay silent (`"rule": "none"`). The files
//! themselves live outside the repository in `DIR/<owner>+<repo>/<commit>/<path>`. Each
//! repository's cached files are analysed together (so helpers in sibling files resolve) with no
//! configuration, like `--isolated`, and findings are matched to labels by path, line (±2) and
//! rule; a second recall counts a defect found on a later line of the statement its label
//! starts (a statement of at most 15 lines). This is a development measurement, not a test.

use locklint::diagnostic::Diagnostic;
use locklint::engine::{self, ConfigSource, Options};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// How far (in lines) a finding may be from a labelled site and still match it.
const SLACK: usize = 2;
const SETS: [&str; 2] = ["rust", "sql-lua"];

/// One labelled site: a finding expected there (`rule` set) or silence required (`rule` none).
struct Site {
    repo: String,
    commit: String,
    path: String,
    line: usize,
    class: String,
    rule: Option<String>,
    reason: String,
}

/// A file of the set: analysed, and every finding in it is accounted for.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct FileKey {
    repo: String,
    commit: String,
    path: String,
}

struct Args {
    cache: PathBuf,
    devset: PathBuf,
    sets: Vec<String>,
}

fn usage() -> ! {
    eprintln!("usage: devset --cache DIR [--set rust|sql-lua] [--devset DIR]");
    std::process::exit(2)
}

fn args() -> Args {
    let mut cache = None;
    let mut devset = Path::new(env!("CARGO_MANIFEST_DIR")).join("devset");
    let mut sets: Vec<String> = SETS.iter().map(|s| s.to_string()).collect();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--cache" => cache = it.next().map(PathBuf::from),
            "--devset" => devset = it.next().map(PathBuf::from).unwrap_or_else(|| usage()),
            "--set" => match it.next() {
                Some(s) if SETS.contains(&s.as_str()) => sets = vec![s],
                _ => usage(),
            },
            _ => usage(),
        }
    }
    let Some(cache) = cache else { usage() };
    Args {
        cache,
        devset,
        sets,
    }
}

fn field(v: &Value, name: &str) -> Option<String> {
    v.get(name).and_then(Value::as_str).map(str::to_string)
}

/// Reads one set's labels: its files and its sites (every site's file is a file of the set).
fn read_set(path: &Path) -> Result<(BTreeSet<FileKey>, Vec<Site>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut files = BTreeSet::new();
    let mut sites = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |what: &str| format!("{}:{}: {what}", path.display(), n + 1);
        let v: Value = serde_json::from_str(line).map_err(|e| bad(&e.to_string()))?;
        let (Some(repo), Some(commit), Some(file)) =
            (field(&v, "repo"), field(&v, "commit"), field(&v, "path"))
        else {
            return Err(bad("needs repo, commit and path"));
        };
        let key = FileKey {
            repo: repo.clone(),
            commit: commit.clone(),
            path: file.clone(),
        };
        files.insert(key);
        if field(&v, "kind").as_deref() == Some("file") {
            continue;
        }
        let line_no = v
            .get("line")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("a site needs a line"))?;
        let rule = field(&v, "rule").ok_or_else(|| bad("a site needs a rule"))?;
        sites.push(Site {
            repo,
            commit,
            path: file,
            line: line_no as usize,
            class: field(&v, "class").ok_or_else(|| bad("a site needs a class"))?,
            rule: (rule != "none").then_some(rule),
            reason: field(&v, "reason").unwrap_or_default(),
        });
    }
    Ok((files, sites))
}

/// A finding reduced to what matching needs.
struct Found {
    file: FileKey,
    line: usize,
    rule: &'static str,
    message: String,
}

/// Analyses every cached repository directory of the set; returns the findings in the set's
/// files and the files whose cached copy is missing.
fn analyse(cache: &Path, files: &BTreeSet<FileKey>) -> (Vec<Found>, Vec<FileKey>) {
    let mut missing = Vec::new();
    let mut by_repo: BTreeMap<(String, String), Vec<&FileKey>> = BTreeMap::new();
    for f in files {
        let dir = repo_dir(cache, f);
        if dir.join(&f.path).is_file() {
            by_repo
                .entry((f.repo.clone(), f.commit.clone()))
                .or_default()
                .push(f);
        } else {
            missing.push(f.clone());
        }
    }
    let mut found = Vec::new();
    for ((repo, commit), wanted) in by_repo {
        let dir = repo_dir(cache, wanted[0]);
        let opts = Options {
            paths: vec![dir.clone()],
            config: ConfigSource::Isolated,
            ..Options::default()
        };
        let report = engine::run(&opts);
        for d in &report.findings {
            let Some(path) = relative(&dir, d) else {
                continue;
            };
            let key = FileKey {
                repo: repo.clone(),
                commit: commit.clone(),
                path,
            };
            if files.contains(&key) {
                found.push(Found {
                    file: key,
                    line: d.primary.start().line,
                    rule: d.rule,
                    message: d.message.clone(),
                });
            }
        }
    }
    (found, missing)
}

fn repo_dir(cache: &Path, f: &FileKey) -> PathBuf {
    cache.join(f.repo.replace('/', "+")).join(&f.commit)
}

fn relative(dir: &Path, d: &Diagnostic) -> Option<String> {
    let p = d.primary.file.path.strip_prefix(dir).ok()?;
    Some(p.to_string_lossy().replace('\\', "/"))
}

fn near(site: &Site, f: &Found) -> bool {
    site.repo == f.file.repo
        && site.commit == f.file.commit
        && site.path == f.file.path
        && site.line.abs_diff(f.line) <= SLACK
}

/// How many lines a labelled statement may span and still take a finding anywhere in it.
const STATEMENT_LINES: usize = 15;

/// The line ranges of a file's statements (Rust statements; SQL statements of a SQL file and
/// of string literals in Rust), first line to last.
fn statement_lines(file: &Path) -> Vec<(usize, usize)> {
    use syn::spanned::Spanned;
    struct Stmts(Vec<(usize, usize)>);
    impl<'ast> syn::visit::Visit<'ast> for Stmts {
        fn visit_stmt(&mut self, s: &'ast syn::Stmt) {
            let span = s.span();
            self.0.push((span.start().line, span.end().line));
            syn::visit::visit_stmt(self, s);
        }
    }
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if file.extension().is_some_and(|e| e == "rs") {
        if let Ok(parsed) = syn::parse_file(&text) {
            let mut v = Stmts(Vec::new());
            syn::visit::Visit::visit_file(&mut v, &parsed);
            out = v.0;
        }
        proc_macro2::extra::invalidate_current_thread_spans();
    }
    let source = locklint::source::SourceFile::new(file.to_path_buf(), text);
    let ir = locklint::frontend::analyze(0, source.clone());
    for st in &ir.sql.statements {
        out.push((
            source.line_col(st.span.start).line,
            source.line_col(st.span.end).line,
        ));
    }
    out
}

/// Whether a finding lies in the statement a defect site's line starts (a statement of at
/// most [`STATEMENT_LINES`] lines): the label names the statement, the finding may sit on the
/// comparison or assignment inside it.
fn in_statement(site: &Site, f: &Found, statements: &[(usize, usize)]) -> bool {
    site.repo == f.file.repo
        && site.commit == f.file.commit
        && site.path == f.file.path
        && statements.iter().any(|&(first, last)| {
            first == site.line && last - first < STATEMENT_LINES && (first..=last).contains(&f.line)
        })
}

/// Per class: labelled defects and how many were found; silent sites and how many were flagged.
#[derive(Default)]
struct Tally {
    expected: usize,
    found: usize,
    /// Found in the labelled statement, not within the line slack of its first line.
    in_statement: usize,
    silent: usize,
    flagged: usize,
}

/// Numbered classes first, in numeric order, then the named ones.
fn class_order(class: &str) -> (u32, &str) {
    (class.parse().unwrap_or(u32::MAX), class)
}

fn ratio(a: usize, b: usize) -> String {
    if b == 0 {
        "-".to_string()
    } else {
        format!("{:.2}", a as f64 / b as f64)
    }
}

fn score(set: &str, cache: &Path, files: &BTreeSet<FileKey>, sites: &[Site]) {
    let (found, missing) = analyse(cache, files);
    let mut used = vec![false; found.len()];
    let mut tally: BTreeMap<(u32, &str), Tally> = BTreeMap::new();
    let mut misses = Vec::new();
    let mut alarms = Vec::new();
    for s in sites {
        if missing.iter().any(|m| m.repo == s.repo && m.path == s.path) {
            continue;
        }
        let t = tally.entry(class_order(&s.class)).or_default();
        let mut hit = false;
        let rule_matches = |f: &Found| match &s.rule {
            Some(rule) => rule == f.rule,
            None => f.rule != "parse-error",
        };
        for (i, f) in found.iter().enumerate() {
            if near(s, f) && rule_matches(f) {
                hit = true;
                used[i] = true;
            }
        }
        match &s.rule {
            Some(_) => {
                t.expected += 1;
                if hit {
                    t.found += 1;
                } else {
                    let file = repo_dir(
                        cache,
                        &FileKey {
                            repo: s.repo.clone(),
                            commit: s.commit.clone(),
                            path: s.path.clone(),
                        },
                    )
                    .join(&s.path);
                    let statements = statement_lines(&file);
                    let mut inside = false;
                    for (i, f) in found.iter().enumerate() {
                        if in_statement(s, f, &statements) && rule_matches(f) {
                            inside = true;
                            used[i] = true;
                        }
                    }
                    t.in_statement += usize::from(inside);
                    misses.push((s, inside));
                }
            }
            None => {
                t.silent += 1;
                if hit {
                    t.flagged += 1;
                    alarms.push(s);
                }
            }
        }
    }
    println!(
        "== {set}: {} files, {} labelled sites",
        files.len(),
        sites.len()
    );
    for m in &missing {
        println!("missing from the cache: {} {} {}", m.repo, m.commit, m.path);
    }
    println!(
        "{:<14} {:>8} {:>6} {:>7} {:>7} {:>8} {:>7}",
        "class", "expected", "found", "recall", "silent", "flagged", "FA rate"
    );
    let mut total = Tally::default();
    for ((_, class), t) in &tally {
        println!(
            "{:<14} {:>8} {:>6} {:>7} {:>7} {:>8} {:>7}",
            class,
            t.expected,
            t.found,
            ratio(t.found, t.expected),
            t.silent,
            t.flagged,
            ratio(t.flagged, t.silent)
        );
        total.expected += t.expected;
        total.found += t.found;
        total.in_statement += t.in_statement;
        total.silent += t.silent;
        total.flagged += t.flagged;
    }
    let parse_errors = found.iter().filter(|f| f.rule == "parse-error").count();
    let unexpected: Vec<&Found> = found
        .iter()
        .zip(&used)
        .filter(|(f, u)| !**u && f.rule != "parse-error")
        .map(|(f, _)| f)
        .collect();
    println!(
        "{:<14} {:>8} {:>6} {:>7} {:>7} {:>8} {:>7}",
        "overall",
        total.expected,
        total.found,
        ratio(total.found, total.expected),
        total.silent,
        total.flagged,
        ratio(total.flagged, total.silent)
    );
    println!(
        "counted within the labelled statement (a finding on a later line of a statement of at \
         most {STATEMENT_LINES} lines): recall {} ({}/{})",
        ratio(total.found + total.in_statement, total.expected),
        total.found + total.in_statement,
        total.expected
    );
    println!(
        "unexpected findings elsewhere in labelled files: {}; parse errors: {parse_errors}",
        unexpected.len()
    );
    for (s, inside) in misses {
        let rule = s.rule.as_deref().unwrap_or("none");
        let inside = if inside {
            " (found in the statement)"
        } else {
            ""
        };
        println!(
            "miss{inside}  [{}] {} {}:{} {rule}: {}",
            s.class, s.repo, s.path, s.line, s.reason
        );
    }
    for s in alarms {
        println!(
            "false alarm [{}] {} {}:{}: {}",
            s.class, s.repo, s.path, s.line, s.reason
        );
    }
    for f in unexpected {
        let first = f.message.lines().next().unwrap_or("");
        println!(
            "unexpected {} {}:{} {}: {first}",
            f.file.repo, f.file.path, f.line, f.rule
        );
    }
    for f in found.iter().filter(|f| f.rule == "parse-error") {
        let first = f.message.lines().next().unwrap_or("");
        println!(
            "parse error {} {}:{}: {first}",
            f.file.repo, f.file.path, f.line
        );
    }
    println!();
}

/// The cache must not be a place from which third-party files could be committed.
fn check_cache(cache: &Path) -> Result<(), String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (Ok(cache), Ok(repo)) = (cache.canonicalize(), repo.canonicalize()) else {
        return Err(format!("{}: no such directory", cache.display()));
    };
    match cache.strip_prefix(&repo) {
        Ok(inside) if !inside.starts_with("devset-cache") => Err(format!(
            "{}: the cache lies inside the repository; keep it outside, or at devset-cache/ \
             (ignored by git)",
            cache.display()
        )),
        _ => Ok(()),
    }
}

fn main() {
    let args = args();
    if let Err(e) = check_cache(&args.cache) {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    for set in &args.sets {
        let labels = args.devset.join(format!("{set}.jsonl"));
        match read_set(&labels) {
            Ok((files, sites)) => score(set, &args.cache, &files, &sites),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        }
    }
}
