//! Function bodies parsed one statement at a time as they are walked (large bodies) give the
//! same intermediate form as bodies parsed with the whole file: every Rust file of this
//! repository (the fixtures, the tests' projects, the analyser's and the runtime's own code)
//! is analysed both ways, and a generated file with a body far past the size where streaming
//! starts is analysed with both thresholds.

use locklint_frontend::rust::{analyze_with_limits, Limits};
use locklint_ir::source::SourceFile;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's intermediate form as JSON, with bodies larger than `large_body` streamed; on a
/// thread with the stack the engine gives the front-ends.
fn ir_json(path: &Path, text: &str, large_body: usize) -> String {
    let limits = Limits {
        large_body,
        ..Limits::default()
    };
    ir_json_within(path, text, limits)
}

#[test]
fn every_rust_file_of_the_repository_gives_the_same_ir_with_every_body_streamed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in [
        "fixtures", "tests", "src", "crates", "runtime", "benches", "examples", "fuzz",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 200, "found {} Rust files", files.len());
    let mut streamed_functions = 0;
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let whole = ir_json(path, &text, usize::MAX);
        let streamed = ir_json(path, &text, 0);
        assert_eq!(whole, streamed, "{}", path.display());
        streamed_functions += whole.matches("\"item_slot\"").count();
    }
    assert!(streamed_functions > 1000, "{streamed_functions} functions");
}

/// The file's intermediate form as JSON, analysed within `limits`, on a thread with the stack
/// the engine gives the front-ends.
fn ir_json_within(path: &Path, text: &str, limits: Limits) -> String {
    let file = SourceFile::new(path.to_path_buf(), text.to_string());
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(move || {
            let ir = analyze_with_limits(0, file, limits);
            serde_json::to_string(&ir).expect("the intermediate form serialises")
        })
        .expect("a thread")
        .join()
        .expect("the front-end does not panic")
}

#[test]
fn a_file_whose_items_would_be_too_large_a_tree_gives_the_same_ir_with_every_body_taken_out() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["fixtures", "crates", "src"] {
        rust_files(&root.join(dir), &mut files);
    }
    // small enough that most files' items (with their small bodies) are past it, large enough
    // that their statements and their items without bodies are not
    let limits = Limits {
        tree_tokens: 3_000,
        ..Limits::default()
    };
    let (mut compared, mut refused) = (0, 0);
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let within = ir_json_within(path, &text, limits);
        if within.contains("too large to analyse") {
            refused += 1;
            continue;
        }
        let whole = ir_json(path, &text, usize::MAX);
        assert_eq!(whole, within, "{}", path.display());
        compared += usize::from(text.len() > 4 * 3_000);
    }
    assert!(
        compared > 30,
        "{compared} files past the limit compared, {refused} refused"
    );
    assert!(
        refused < files.len() / 10,
        "{refused} of {} refused",
        files.len()
    );
}

#[test]
fn statements_items_and_files_past_the_limits_are_refused_where_they_are() {
    let limits = Limits {
        large_body: 64,
        tree_tokens: 40,
        file_tokens: 400,
        file_events: 5,
    };
    let statement = format!(
        "fn a() {{\n    let x = 1;\n    let y = 2;\n    f({}0);\n}}\n",
        "x, ".repeat(30)
    );
    let items = format!("const T: [u8; 30] = [{}];\nfn a() {{}}\n", "1, ".repeat(30));
    let file = format!("fn a() {{\n{}\n}}\n", "    x;\n".repeat(250));
    // a body taken out, and small bodies walked whole: the sixth call passes the limit
    let calls = format!("fn a() {{\n{}}}\n", "    f(x, y);\n".repeat(8));
    let functions = "fn a() { f(); }\n".repeat(8);
    let events =
        "the file has more than 5 calls and commands (passed here), the most analysed in one file";
    for (text, line, column, what) in [
        (&calls, 8, 5, events),
        (&functions, 6, 1, events),
        (
            &statement,
            4,
            5,
            "this statement has 64 tokens, more than the 36 parsed at once beside the file's items",
        ),
        (
            &items,
            1,
            1,
            "its items outside function bodies have 74 tokens, more than the 40 parsed at once",
        ),
        (
            &file,
            1,
            1,
            "the file has 504 tokens, more than the 400 analysed in one file",
        ),
    ] {
        let path = Path::new("wide.rs");
        let ir = analyze_with_limits(0, SourceFile::new(path.to_path_buf(), text.clone()), limits);
        assert_eq!(ir.problems.len(), 1, "{:?}", ir.problems);
        assert!(ir.functions.is_empty());
        let problem = &ir.problems[0];
        assert_eq!(
            problem.message,
            format!("too large to analyse: {what}; the file was not analysed")
        );
        let lines = locklint_ir::source::LineIndex::new(text);
        let at = lines.line_col(text, problem.span.start);
        assert_eq!((at.line, at.column), (line, column), "{what}");
    }
}

#[test]
fn a_syntax_error_in_a_streamed_body_is_the_file_s_syntax_error() {
    for text in [
        "fn a() { let x = 1 let y = 2; }\nfn b() {}\n",
        "fn a() { f() g() }\n",
        "impl S { fn a(&self) { m!(x) y } }\n",
        "fn a() { ok(); }\nfn b() { let = ; }\n",
        // inside blocks taken out of their statements
        "fn a() { if x { let y = 1 let z = 2; } w(); }\n",
        "fn a() { loop { f() g() } }\nfn b() {}\n",
        "fn a() { let v = async move { match x { _ => { h(, ) } } }; }\n",
        "fn a() { if x { ok(); } else { let = ; } }\n",
    ] {
        let path = Path::new("broken.rs");
        let whole = ir_json(path, text, usize::MAX);
        assert!(whole.contains("could not parse this Rust file"), "{whole}");
        assert_eq!(whole, ir_json(path, text, 0), "{text}");
    }
}

#[test]
fn a_large_body_is_streamed_by_default_and_gives_the_same_ir() {
    let mut text = String::from(
        "use redis::AsyncCommands;\n\npub async fn big(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n",
    );
    for i in 0..2000 {
        text.push_str(&format!(
            "    let v{i}: bool = con.set_nx(\"lock:job:{i}\", \"1\").await?;\n    if !v{i} {{ return Ok(()); }}\n"
        ));
    }
    text.push_str("    Ok(())\n}\n");
    assert!(text.len() > 100_000);
    let path = Path::new("big.rs");
    let default = {
        let file = SourceFile::new(path.to_path_buf(), text.clone());
        serde_json::to_string(&locklint_frontend::rust::analyze(0, file)).unwrap()
    };
    assert_eq!(default, ir_json(path, &text, usize::MAX));
    assert_eq!(default.matches("\"set_nx\"").count(), 2000);
}

#[test]
fn doc_comments_folded_in_a_large_file_give_the_same_ir() {
    let lock = "use redis::AsyncCommands;\n\n/// Takes the lock.\n///\n/// é: wide characters in docs\npub async fn take(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n    /// a statement's doc\n    let _: bool = con.set_nx(\"lock:a\", \"1\").await?;\n    Ok(())\n}\n";
    // where a fix would add an item: after the inner docs when there is no `use`
    let no_use = "//! Crate docs, é\n//!\n//! more\n\n/// Takes the lock.\npub async fn take(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n    let _: () = redis::cmd(\"DEL\").arg(\"lock:a\").query_async(con).await?;\n    Ok(())\n}\n";
    let short = "//!\n//!\n///\n///\nfn f() {}\n";
    for text in [lock, no_use, short] {
        let path = Path::new("docs.rs");
        let whole = ir_json(path, text, usize::MAX);
        assert!(!whole.contains("could not parse"), "{whole}");
        assert_eq!(whole, ir_json(path, text, 0), "{text}");
    }
    assert!(ir_json(Path::new("docs.rs"), no_use, 0).contains("\"item_slot\":31"));
}

#[test]
fn a_large_block_inside_a_statement_is_streamed_and_gives_the_same_ir() {
    // one statement (`if`) holding a block far past the streaming size, with a lock taken,
    // released in a nested `loop`, and a reply bound inside a spawned `async move` block
    let mut text = String::from(
        "use redis::AsyncCommands;\n\npub async fn big(con: &mut redis::aio::MultiplexedConnection, go: bool) -> redis::RedisResult<()> {\n    if go {\n",
    );
    for i in 0..1500 {
        text.push_str(&format!(
            "        let v{i}: bool = con.set_nx(\"lock:job:{i}\", \"1\").await?;\n        if !v{i} {{ return Ok(()); }}\n"
        ));
    }
    text.push_str("        loop {\n            let _: () = con.del(\"lock:job:0\").await?;\n            break;\n        }\n    } else {\n        tokio::spawn(async move {\n            let seen: Option<String> = None;\n            seen\n        });\n    }\n    Ok(())\n}\n");
    assert!(text.len() > 100_000);
    let path = Path::new("nested.rs");
    let whole = ir_json(path, &text, usize::MAX);
    assert!(!whole.contains("could not parse"), "{whole}");
    assert_eq!(whole.matches("\"set_nx\"").count(), 1500);
    assert_eq!(whole.matches("\"del\"").count(), 1);
    let default = {
        let file = SourceFile::new(path.to_path_buf(), text.clone());
        serde_json::to_string(&locklint_frontend::rust::analyze(0, file)).unwrap()
    };
    assert_eq!(default, whole);
    assert_eq!(ir_json(path, &text, 0), whole);
}

#[test]
fn attributes_of_statements_and_expressions_are_not_read_whole_or_streamed() {
    let with = "use redis::AsyncCommands;\n\npub async fn take(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n    #[allow(unused)] let _: bool = #[rustfmt::skip] con.set_nx(\"lock:a\", \"1\").await?;\n    #[allow(unused_must_use)]\n    { let _: () = con.del(\"lock:a\").await?; }\n    #[derive(Debug)] struct Held;\n    Ok(())\n}\n";
    // the same text with the statement and expression attributes blanked (offsets kept)
    let mut without = with.to_string();
    for attribute in [
        "#[allow(unused)]",
        "#[rustfmt::skip]",
        "#[allow(unused_must_use)]",
    ] {
        without = without.replace(attribute, &" ".repeat(attribute.len()));
    }
    let path = Path::new("attributes.rs");
    for large_body in [usize::MAX, 0] {
        let ir = ir_json(path, with, large_body);
        assert_eq!(ir, ir_json(path, &without, large_body), "{large_body}");
        assert!(ir.contains("set_nx") && ir.contains("del"), "{ir}");
    }
    assert_eq!(ir_json(path, with, usize::MAX), ir_json(path, with, 0));
}
