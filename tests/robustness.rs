//! Robustness: no input overflows a stack, a panic in one file does not end the run, a file
//! that does not parse keeps its suppressions, and huge single files finish in linear time.
//! Each input is one the analyser once failed on (stack overflow, lost run, deleted
//! suppressions, minutes of work); the tests assert the result, never a time.

#[path = "support/pathological.rs"]
mod pathological;

use locklint::engine::{self, Options};
use pathological as p;
use std::path::Path;
use std::process::Command;

/// Every file parsed, also those whose bytes show no lock code (as `--no-prefilter`): the
/// inputs are the parser's worst cases, whatever they hold.
fn analyse(dir: &Path) -> engine::Report {
    engine::run(&Options {
        paths: vec![dir.to_path_buf()],
        parse_all: true,
        ..Default::default()
    })
}

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

fn findings_in<'r>(
    report: &'r engine::Report,
    file: &str,
    rule: &str,
) -> Vec<&'r locklint::diagnostic::Diagnostic> {
    report
        .findings
        .iter()
        .filter(|d| d.rule == rule && d.primary.file.path.ends_with(file))
        .collect()
}

/// Forms whose depth the parser and walkers handle in a loop: analysed at any depth.
const FLAT_FORMS: &[&str] = &["expression_attributes", "statement_attributes"];

#[test]
fn deep_nesting_of_every_form_is_refused_and_the_run_goes_on() {
    // every form at a depth that aborted the process with a stack overflow before
    for form in p::FORMS {
        let text = (form.build)(60_000);
        let dir = dir_with(&[("deep.rs", &text), ("healthy.rs", p::HEALTHY)]);
        let report = analyse(dir.path());
        let errors = findings_in(&report, "deep.rs", "parse-error");
        if FLAT_FORMS.contains(&form.name) {
            assert!(
                errors
                    .iter()
                    .all(|d| !d.message.contains("nesting too deep")),
                "{}: {:?}",
                form.name,
                errors.iter().map(|d| &d.message).collect::<Vec<_>>()
            );
        } else {
            assert_eq!(errors.len(), 1, "{}: {:?}", form.name, report.findings);
            assert!(
                errors[0].message.starts_with("nesting too deep to analyse"),
                "{}: {}",
                form.name,
                errors[0].message
            );
        }
        assert_eq!(
            findings_in(&report, "healthy.rs", "setnx-without-expiry").len(),
            1,
            "{}: the other file's finding is lost",
            form.name
        );
    }
}

#[test]
fn nesting_within_the_limit_is_analysed() {
    // deep enough to exercise the walkers, shallow enough to analyse
    for form in p::FORMS {
        let text = (form.build)(150);
        let dir = dir_with(&[("deep.rs", &text)]);
        let report = analyse(dir.path());
        assert!(
            report
                .findings
                .iter()
                .all(|d| !d.message.contains("nesting too deep")),
            "{}: {:?}",
            form.name,
            report.findings
        );
    }
}

#[test]
fn deep_macro_bodies_are_not_parsed_but_the_file_is_analysed() {
    // a macro body is tokens at file level; the walker must not parse this one
    let body = format!("{}0", "!".repeat(100_000));
    let text = format!("{}\npub fn logs() {{\n    dbg!({body});\n}}\n", p::HEALTHY);
    let dir = dir_with(&[("macro.rs", &text)]);
    let report = analyse(dir.path());
    assert!(findings_in(&report, "macro.rs", "parse-error").is_empty());
    assert_eq!(
        findings_in(&report, "macro.rs", "setnx-without-expiry").len(),
        1
    );
}

#[test]
fn format_names_are_not_parsed_as_expressions() {
    let name = "!".repeat(200_000);
    let text = format!(
        "use redis::AsyncCommands;\n\npub async fn f(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {{\n    let _: bool = con.set_nx(format!(\"lock:{{{name}}}\"), \"1\").await?;\n    Ok(())\n}}\n"
    );
    let dir = dir_with(&[("fmt.rs", &text)]);
    let report = analyse(dir.path());
    assert_eq!(
        findings_in(&report, "fmt.rs", "setnx-without-expiry").len(),
        1
    );
}

const STRAY_BACKTICK_LUA: &str =
    "local v = redis.call('get', KEYS[1])\nlocal x = `\nreturn redis.call('del', KEYS[1])\n";

#[test]
fn a_panic_in_one_lua_file_is_a_finding_and_the_run_goes_on() {
    let dir = dir_with(&[
        ("release.lua", STRAY_BACKTICK_LUA),
        ("healthy.rs", p::HEALTHY),
    ]);
    let report = analyse(dir.path());
    let errors = findings_in(&report, "release.lua", "parse-error");
    assert_eq!(errors.len(), 1, "{:?}", report.findings);
    // the Lua parser panics on a stray backtick: it is refused before parsing, at the backtick
    assert!(
        errors[0]
            .message
            .starts_with("could not parse this Lua script: unexpected character '`'"),
        "{}",
        errors[0].message
    );
    assert_eq!(
        errors[0].primary.span.start,
        STRAY_BACKTICK_LUA.find('`').unwrap()
    );
    assert_eq!(
        findings_in(&report, "healthy.rs", "setnx-without-expiry").len(),
        1
    );
}

#[test]
fn a_panic_in_an_embedded_script_keeps_the_rust_files_other_findings() {
    let text = format!(
        "{}\npub fn release_script() -> redis::Script {{\n    redis::Script::new(\"local x = `\\nreturn redis.call('del', KEYS[1])\")\n}}\n",
        p::HEALTHY
    );
    let dir = dir_with(&[("mixed.rs", &text)]);
    let report = analyse(dir.path());
    let errors = findings_in(&report, "mixed.rs", "parse-error");
    assert_eq!(errors.len(), 1, "{:?}", report.findings);
    assert!(
        errors[0]
            .message
            .starts_with("could not parse this embedded Lua script: unexpected character '`'"),
        "{}",
        errors[0].message
    );
    // reported at the backtick inside the literal
    assert_eq!(errors[0].primary.span.start, text.find('`').unwrap());
    assert_eq!(
        findings_in(&report, "mixed.rs", "setnx-without-expiry").len(),
        1
    );
}

#[test]
fn caught_panics_are_not_printed_and_do_not_fail_the_command() {
    let dir = dir_with(&[
        ("release.lua", STRAY_BACKTICK_LUA),
        ("healthy.rs", p::HEALTHY),
    ]);
    let out = Command::new(env!("CARGO_BIN_EXE_locklint"))
        .args(["check", "--format", "json"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("internal error"), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules: Vec<&str> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"parse-error"), "{rules:?}");
    assert!(rules.contains(&"setnx-without-expiry"), "{rules:?}");
}

const BROKEN_WITH_SUPPRESSION: &str = r#"use redis::AsyncCommands;

pub async fn fulfil(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
    // locklint: allow(setnx-without-expiry) -- the key is deleted by the nightly sweeper
    let acquired: bool = con.set_nx("lock:order", "1").await?;
    let half_written =
    Ok(())
}
"#;

#[test]
fn suppressions_in_a_file_that_does_not_parse_are_not_unused() {
    let dir = dir_with(&[("broken.rs", BROKEN_WITH_SUPPRESSION)]);
    let report = analyse(dir.path());
    assert_eq!(
        findings_in(&report, "broken.rs", "parse-error").len(),
        1,
        "{:?}",
        report.findings
    );
    assert!(
        findings_in(&report, "broken.rs", "unused-suppression").is_empty(),
        "{:?}",
        report.findings
    );
}

#[test]
fn fix_keeps_suppressions_in_a_file_that_does_not_parse() {
    let dir = dir_with(&[("broken.rs", BROKEN_WITH_SUPPRESSION)]);
    let out = Command::new(env!("CARGO_BIN_EXE_locklint"))
        .args(["check", "--fix"])
        .arg(dir.path())
        .output()
        .unwrap();
    let after = std::fs::read_to_string(dir.path().join("broken.rs")).unwrap();
    assert_eq!(
        after,
        BROKEN_WITH_SUPPRESSION,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// Large single files: each took minutes (quadratic time) before.

#[test]
fn many_findings_in_one_function() {
    // about 1.2 MB and 360,000 tokens, under the file limit
    let n = 20_000;
    let dir = dir_with(&[("big.rs", &p::many_findings(n))]);
    let report = analyse(dir.path());
    assert_eq!(
        findings_in(&report, "big.rs", "setnx-without-expiry").len(),
        n
    );
    assert_eq!(
        findings_in(&report, "big.rs", "constant-lock-value").len(),
        n
    );
    assert_eq!(report.findings.len(), 2 * n);
}

#[test]
fn many_findings_in_a_block_nested_in_one_statement() {
    // the block is walked from its tokens a statement at a time, as a function body is
    let n = 10_000;
    let dir = dir_with(&[("nested.rs", &p::nested_block(n))]);
    let report = analyse(dir.path());
    let found = findings_in(&report, "nested.rs", "setnx-without-expiry");
    assert_eq!(found.len(), n);
    let text = p::nested_block(n);
    let last = found.iter().max_by_key(|d| d.primary.span.start).unwrap();
    assert_eq!(last.primary.span.start, text.rfind("set_nx(").unwrap());
    assert_eq!(findings_in(&report, "nested.rs", "parse-error").len(), 0);
}

#[test]
fn many_bindings_and_reads_in_one_function() {
    let n = 50_000;
    let dir = dir_with(&[
        ("lets.rs", &p::many_lets(n)),
        ("calls.rs", &p::many_redis_calls(n / 4)),
    ]);
    let report = analyse(dir.path());
    assert!(report.findings.is_empty(), "{:?}", &report.findings[..3]);
    assert_eq!(report.files, 2);
}

#[test]
fn get_then_set_chain_on_one_key() {
    let n = 10_000;
    let dir = dir_with(&[("chain.rs", &p::get_then_set_chain(n))]);
    let report = analyse(dir.path());
    assert_eq!(findings_in(&report, "chain.rs", "get-then-set").len(), n);
}

#[test]
fn helpers_calling_helpers_many_times_are_expanded_within_a_budget() {
    // 1,000 calls at each of four levels: expanding them all is 10^12 operations
    let text = p::helper_fan_out(1_000);
    let dir = dir_with(&[("fan.rs", &text)]);
    let report = analyse(dir.path());
    assert!(
        report.findings.iter().all(|d| d.rule != "parse-error"),
        "{:?}",
        report.findings
    );
}

#[test]
fn long_lines_with_wide_characters_keep_exact_columns() {
    let text = p::long_line(600_000, true);
    let dir = dir_with(&[("line.rs", &text)]);
    let report = analyse(dir.path());
    let found = findings_in(&report, "line.rs", "setnx-without-expiry");
    let expected = text.matches("set_nx(").count();
    assert_eq!(found.len(), expected);
    let last = found.iter().max_by_key(|d| d.primary.span.start).unwrap();
    let at = text.rfind("set_nx(").unwrap();
    assert_eq!(last.primary.span.start, at);
    let line_start = text[..at].rfind('\n').unwrap() + 1;
    assert_eq!(
        last.primary.start().column,
        text[line_start..at].chars().count() + 1
    );
}

/// Run `work` on a thread with `stack` bytes of stack.
fn on_stack<R: Send + 'static>(stack: usize, work: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(work)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn what_passes_the_guard_is_analysed_on_a_main_thread_sized_stack() {
    use locklint::source::SourceFile;
    fn problems(text: String) -> Vec<String> {
        let file = SourceFile::new("deep.rs".into(), text);
        let ir = locklint::frontend::analyze(0, file);
        ir.problems.into_iter().map(|p| p.message).collect()
    }
    let refused = |text: String| {
        on_stack(512 << 20, move || problems(text))
            .iter()
            .any(|m| m.starts_with("nesting too deep"))
    };
    for form in p::FORMS {
        if FLAT_FORMS.contains(&form.name) {
            continue;
        }
        // the deepest accepted nesting of this form
        let (mut lo, mut hi) = (1usize, 4000usize);
        assert!(refused((form.build)(hi)), "{}", form.name);
        while lo + 1 < hi {
            let mid = (lo + hi) / 2;
            if refused((form.build)(mid)) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let text = (form.build)(lo);
        // the main thread's stack, as small as any that analyses a file
        let found = on_stack(8 << 20, move || problems(text));
        assert!(found.len() <= 1, "{}: {found:?}", form.name);
    }
}

#[test]
fn a_large_file_is_refused_from_its_text_exactly_where_its_tokens_are() {
    use locklint::source::SourceFile;
    // past 16 KiB the nesting is checked on the text before it is tokenised: the same files
    // are refused, at the same token, as when the tokens are checked
    fn problems(text: String) -> Vec<(String, usize, usize)> {
        let file = SourceFile::new("deep.rs".into(), text);
        let ir = locklint::frontend::analyze(0, file);
        ir.problems
            .into_iter()
            .filter(|p| p.message.starts_with("nesting too deep"))
            .map(|p| (p.message, p.span.start, p.span.end))
            .collect()
    }
    let padding = "\n// padding\n".repeat(1_500);
    let mut compared = 0;
    for form in p::FORMS {
        for depth in [200, 257, 1_400, 1_498, 1_499, 1_500, 1_501, 1_502, 3_000] {
            let text = (form.build)(depth);
            if text.len() > 16 * 1024 {
                continue;
            }
            let large = format!("{text}{padding}");
            let (small, large) = on_stack(512 << 20, move || (problems(text), problems(large)));
            assert_eq!(small, large, "{} at depth {depth}", form.name);
            compared += usize::from(!small.is_empty());
        }
    }
    assert!(compared >= p::FORMS.len(), "{compared} refusals compared");
}

#[test]
fn a_megabyte_of_doc_lines_is_analysed_with_exact_positions() {
    for inner in [true, false] {
        // the healthy lock function after a megabyte of doc lines, documented itself
        let text = p::doc_lines(1_000_000, inner).replace("fn main() {}\n", "")
            + "/// Fulfils an order, é.\n///\n"
            + p::HEALTHY;
        let dir = dir_with(&[("docs.rs", &text)]);
        let report = analyse(dir.path());
        assert!(findings_in(&report, "docs.rs", "parse-error").is_empty());
        let found = findings_in(&report, "docs.rs", "setnx-without-expiry");
        assert_eq!(found.len(), 1, "inner: {inner}");
        let at = text.find("set_nx(").unwrap();
        assert_eq!(found[0].primary.span.start, at);
        assert_eq!(found[0].primary.start().line, text[..at].lines().count());
    }
}

#[test]
fn a_helper_called_many_times_is_one_finding_with_every_call_site() {
    let n = 30_000;
    let dir = dir_with(&[("calls.rs", &p::many_helper_calls(n))]);
    let report = analyse(dir.path());
    let found = findings_in(&report, "calls.rs", "unconditional-release");
    assert_eq!(found.len(), 1, "{:?}", report.findings.len());
    let sites = found[0]
        .related
        .iter()
        .filter(|r| r.label.contains("call"))
        .count();
    assert_eq!(sites, n, "{:?}", &found[0].related[..3]);
    // the fix is built once per call site, each asking whether the script constant is
    // defined or its name taken: answered from the file's index of names
    let fix = found[0].fix.as_ref().expect("a compare-and-delete fix");
    let defined: Vec<_> = fix
        .edits
        .iter()
        .filter(|e| e.replacement.contains("const COMPARE_AND_DELETE: &str"))
        .collect();
    assert_eq!(defined.len(), 1, "{:?}", fix.edits);
}

#[test]
fn fixes_ask_the_code_not_comments_or_strings_whether_a_file_is_fred() {
    // `fred::` and `self.token` only in a comment and a string: a redis-rs release with a
    // token in scope gets its compare-and-delete fix (the name index sees code tokens only)
    let text = r#"use redis::AsyncCommands;

// unlike fred::Client, this release goes through redis-rs; "self.token" is not read
pub async fn release_lock(con: &mut redis::aio::MultiplexedConnection, token: &str) -> redis::RedisResult<()> {
    let _: () = con.del("lock:report").await?;
    Ok(())
}
"#;
    let dir = dir_with(&[("release.rs", text)]);
    let report = analyse(dir.path());
    let found = findings_in(&report, "release.rs", "unconditional-release");
    assert_eq!(found.len(), 1, "{:?}", report.findings);
    let fix = found[0].fix.as_ref().expect("a compare-and-delete fix");
    assert!(
        fix.edits.iter().any(|e| e.replacement.contains("token")),
        "{:?}",
        fix.edits
    );
}

/// Found by fuzzing (`rust` target): the fence is written from another column of the table, so
/// no token comes in; the fix compared the fence with that column, which is not a guard, and
/// added the comparison again on every pass.
#[test]
fn a_fence_written_from_a_column_gets_a_fix_that_is_only_shown() {
    use locklint::diagnostic::Applicability;
    use locklint::fix::{self, Level};
    let sql = "CREATE TABLE t (name text PRIMARY KEY, fence bigint DEFAULT 0);\nUPDATE t SET fence = locked_until WHERE name = $1;\n";
    let dir = dir_with(&[("write.sql", sql)]);
    let report = analyse(dir.path());
    let found = findings_in(&report, "write.sql", "unfenced-write");
    assert_eq!(found.len(), 1, "{:?}", report.findings);
    let applicability = found[0].fix.as_ref().map(|f| f.applicability);
    assert_eq!(applicability, Some(Applicability::DisplayOnly));
    let plan = fix::plan(report, Level::Unsafe, &|overlay| {
        engine::run(&Options {
            paths: vec![dir.path().to_path_buf()],
            overlay: Some(overlay),
            ..Default::default()
        })
    });
    assert!(!plan.unconverged);
    assert!(plan.changes.is_empty(), "nothing is applied");
}

#[test]
fn long_lua_operator_chains_are_refused_and_what_passes_runs_on_a_main_thread_stack() {
    use locklint::source::SourceFile;
    fn problems(text: String) -> Vec<String> {
        let file = SourceFile::new("chain.lua".into(), text);
        let ir = locklint::frontend::analyze(0, file);
        ir.problems.into_iter().map(|p| p.message).collect()
    }
    // a guard whose comparison chains operators, as a mutated release script does
    let script = |n: usize| {
        format!(
            "if redis.call('get', KEYS[1]){} == ARGV[1] then return redis.call('del', KEYS[1]) end\nreturn 0\n",
            " ~= ARGV[2]".repeat(n)
        )
    };
    for op in [" ~= ARGV[2]", " .. ARGV[2]", " and ARGV[2]"] {
        let long = script(20_000).replace(" ~= ARGV[2]", op);
        let found = on_stack(8 << 20, move || problems(long));
        assert!(
            found.iter().any(|m| m.contains("chains more than")),
            "{op}: {found:?}"
        );
        // the longest chain accepted is analysed on the smallest stack a file is analysed on
        let accepted = script(990).replace(" ~= ARGV[2]", op);
        let found = on_stack(8 << 20, move || problems(accepted));
        assert!(found.is_empty(), "{op}: {found:?}");
    }
}

#[test]
fn every_lock_of_a_long_plpgsql_body_is_asked_about_the_raise_after_it() {
    // each lock reaches the RAISE before the unlock-all that follows it
    let n = 3_000;
    let dir = dir_with(&[("locks.sql", &p::plpgsql_locks_before_raise(n))]);
    let report = analyse(dir.path());
    let found = findings_in(&report, "locks.sql", "advisory-lock-unbalanced");
    assert_eq!(found.len(), n, "{:?}", found.first().map(|d| &d.message));
    let raise_line = n + 3;
    for d in &found {
        let at = d
            .related
            .iter()
            .map(|r| r.location.start().line)
            .collect::<Vec<_>>();
        assert!(at.contains(&raise_line), "{}: related {at:?}", d.message);
    }
    // unlocked before the RAISE, the same locks are fine
    let mut text = p::plpgsql_locks_before_raise(n);
    text = text.replace(
        "RAISE EXCEPTION 'stop';\nPERFORM pg_advisory_unlock_all();",
        "PERFORM pg_advisory_unlock_all();\nRAISE EXCEPTION 'stop';",
    );
    let dir = dir_with(&[("locks.sql", &text)]);
    let report = analyse(dir.path());
    assert!(findings_in(&report, "locks.sql", "advisory-lock-unbalanced").is_empty());
}

#[test]
fn files_too_wide_to_parse_at_once_are_refused_and_the_run_goes_on() {
    use locklint::frontend::rust::{MAX_FILE_TOKENS, MAX_TREE_TOKENS};
    // each form took 140-470 MB for a megabyte of text (the parser's tree of one statement or
    // of the file's items, or the token trees of the whole file)
    let cases = [
        (p::wide_call(MAX_TREE_TOKENS / 3 + 10), "this statement has"),
        (
            p::wide_signature(MAX_TREE_TOKENS / 5 + 10),
            "its items outside function bodies have",
        ),
        (
            p::wide_table(MAX_TREE_TOKENS / 5 + 10),
            "its items outside function bodies have",
        ),
        (
            p::dense_statements(MAX_FILE_TOKENS / 2 + 10),
            "the file has",
        ),
    ];
    for (text, what) in cases {
        let dir = dir_with(&[("wide.rs", &text), ("healthy.rs", p::HEALTHY)]);
        let report = analyse(dir.path());
        let in_file: Vec<_> = report
            .findings
            .iter()
            .filter(|d| d.primary.file.path.ends_with("wide.rs"))
            .collect();
        let rules: Vec<&str> = in_file.iter().map(|d| d.rule).collect();
        assert_eq!(rules, ["parse-error"], "{what}");
        let expected = format!("too large to analyse: {what} ");
        assert!(
            in_file[0].message.starts_with(&expected),
            "{}",
            in_file[0].message
        );
        assert_eq!(
            findings_in(&report, "healthy.rs", "setnx-without-expiry").len(),
            1,
            "{what}: the other file's finding is lost"
        );
    }
}

#[test]
fn wide_forms_within_the_limits_are_analysed() {
    use locklint::frontend::rust::MAX_TREE_TOKENS;
    // the signature's and the table's items fit in one tree only with every body taken out
    let cases = [
        (
            p::wide_call(MAX_TREE_TOKENS / 3 - 100),
            "unconditional-release",
        ),
        (
            p::wide_signature(MAX_TREE_TOKENS / 5 - 100),
            "unconditional-release",
        ),
        (
            p::wide_table(MAX_TREE_TOKENS / 5 - 100),
            "setnx-without-expiry",
        ),
        (p::dense_statements(20_000), "setnx-without-expiry"),
    ];
    for (text, rule) in cases {
        let dir = dir_with(&[("wide.rs", &text)]);
        let report = analyse(dir.path());
        let rules: Vec<&str> = report.findings.iter().map(|d| d.rule).collect();
        assert!(rules.contains(&rule), "{rule}: {rules:?}");
        assert!(!rules.contains(&"parse-error"), "{rules:?}");
    }
}

#[test]
fn a_column_of_many_options_past_the_statement_limit_is_refused() {
    let limit = locklint::frontend::sql::statements::MAX_STATEMENT_TOKENS;
    // a tree of 1 KB per token: the limit keeps it near 50 MB
    let dir = dir_with(&[("locks.sql", &p::sql_column_options(limit))]);
    let report = analyse(dir.path());
    let errors = findings_in(&report, "locks.sql", "parse-error");
    assert_eq!(errors.len(), 1, "{:?}", report.findings);
    assert!(
        errors[0].message.contains("tokens"),
        "{}",
        errors[0].message
    );
    assert_eq!(errors[0].primary.start().line, 1);
}
