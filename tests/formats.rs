//! Machine-readable formats: SARIF (validated against the official 2.1.0 schema), GitHub
//! annotations, GitLab Code Quality, JSON lines; `--output-file` and `--statistics`.

use locklint::engine::{self, Options, Report};
use locklint::output::{self, human, Format};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn report_for(paths: &[&str]) -> Report {
    std::env::set_current_dir(root()).unwrap();
    engine::run(&Options {
        paths: paths.iter().map(PathBuf::from).collect(),
        ..Default::default()
    })
}

fn render(report: &Report, format: Format) -> String {
    output::render(
        report,
        format,
        human::Style {
            color: false,
            width: 100,
        },
        false,
    )
}

fn sarif_schema() -> serde_json::Value {
    // the official schema, shared beside the checkout
    let path = root().join("../shared/schemas/sarif-schema-2.1.0.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the SARIF schema is expected at {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn sarif_is_valid_against_the_official_schema() {
    let report = report_for(&["fixtures"]);
    assert!(report.findings.len() > 20);
    let text = render(&report, Format::Sarif);
    let sarif: serde_json::Value = serde_json::from_str(&text).unwrap();
    // the results, written one at a time, are laid out as the pretty printer lays out the
    // whole log
    assert_eq!(
        text,
        serde_json::to_string_pretty(&sarif).unwrap() + "\n",
        "SARIF layout"
    );
    let validator = jsonschema::draft4::new(&sarif_schema()).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .take(10)
        .collect();
    assert!(
        errors.is_empty(),
        "SARIF schema errors:\n{}",
        errors.join("\n")
    );

    let run = &sarif["runs"][0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "locklint");
    assert!(driver["informationUri"]
        .as_str()
        .unwrap()
        .starts_with("https://"));
    let rules = driver["rules"].as_array().unwrap();
    let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    for info in locklint::rules::infos() {
        assert!(
            ids.contains(&info.name),
            "{} missing from rules[]",
            info.name
        );
    }
    assert!(rules
        .iter()
        .all(|r| r["help"]["markdown"].as_str().unwrap().starts_with("# ")));
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), report.findings.len());
    for r in results {
        let idx = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[idx]["id"], r["ruleId"]);
        let loc = &r["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uriBaseId"], "SRCROOT");
        assert!(loc["artifactLocation"]["uri"]
            .as_str()
            .unwrap()
            .starts_with("fixtures/"));
        assert!(loc["region"]["startLine"].as_u64().unwrap() >= 1);
        assert!(loc["region"]["startColumn"].as_u64().unwrap() >= 1);
        assert_eq!(
            r["partialFingerprints"]["locklint/v1"]
                .as_str()
                .unwrap()
                .len(),
            32
        );
    }
    assert!(results.iter().any(|r| r["relatedLocations"]
        .as_array()
        .is_some_and(|a| !a.is_empty())));
    assert!(run["originalUriBaseIds"]["SRCROOT"]["uri"]
        .as_str()
        .unwrap()
        .ends_with('/'));
}

#[test]
fn fingerprints_survive_lines_added_above_and_differ_between_findings() {
    let dir = tempfile::tempdir().unwrap();
    let code = "use redis::Commands;\nfn f(c: &mut redis::Connection) {\n    let _: () = c.del(\"lock:a\").unwrap();\n    let _: () = c.del(\"lock:b\").unwrap();\n}\n";
    std::fs::write(dir.path().join("a.rs"), code).unwrap();
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_locklint"))
            .args(["check", "--format", "sarif", "a.rs"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["partialFingerprints"]["locklint/v1"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                    r["locations"][0]["physicalLocation"]["region"]["startLine"]
                        .as_u64()
                        .unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let before = run();
    assert_eq!(before.len(), 2);
    assert_ne!(before[0].0, before[1].0);
    std::fs::write(
        dir.path().join("a.rs"),
        format!("// a new comment\n\nuse std::fmt;\n{code}"),
    )
    .unwrap();
    let after = run();
    assert_eq!(after[0].0, before[0].0, "same finding, same fingerprint");
    assert_eq!(after[1].0, before[1].0);
    assert_eq!(after[0].1, before[0].1 + 3, "the line moved");
}

#[test]
fn github_annotations_escape_messages() {
    let report = report_for(&["fixtures/separate-expire/bad_set_nx_then_expire.rs"]);
    let text = render(&report, Format::Github);
    insta::assert_snapshot!("github", text);
    for line in text.lines() {
        assert!(
            line.starts_with("::error file=") || line.starts_with("::warning file="),
            "{line}"
        );
        assert!(line.contains(",title=locklint("));
        // the message's newline before `help:` is escaped, keeping one annotation per line
        assert!(line.contains("%0Ahelp: "));
    }
}

#[test]
fn gitlab_and_json_lines_carry_every_finding() {
    let report = report_for(&["fixtures/unconditional-release"]);
    let gitlab = render(&report, Format::Gitlab);
    insta::assert_snapshot!("gitlab", gitlab);
    let issues: Vec<serde_json::Value> = serde_json::from_str(&gitlab).unwrap();
    assert_eq!(issues.len(), report.findings.len());
    for i in &issues {
        assert!(i["fingerprint"].as_str().unwrap().len() == 32);
        assert!(["major", "minor"].contains(&i["severity"].as_str().unwrap()));
        assert!(i["location"]["path"]
            .as_str()
            .unwrap()
            .starts_with("fixtures/"));
        assert!(i["location"]["lines"]["begin"].as_u64().unwrap() >= 1);
    }
    let lines = render(&report, Format::JsonLines);
    insta::assert_snapshot!("json_lines", lines);
    let json: serde_json::Value = serde_json::from_str(&render(&report, Format::Json)).unwrap();
    let parsed: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(&serde_json::Value::Array(parsed), &json["findings"]);
}

#[test]
fn output_file_and_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.sarif");
    let o = Command::new(env!("CARGO_BIN_EXE_locklint"))
        .args([
            "check",
            "fixtures/separate-expire",
            "--project-root",
            "fixtures/separate-expire",
            "--format",
            "sarif",
            "--statistics",
            "--output-file",
        ])
        .arg(&out)
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("findings in"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some("separate-expire")),
        "{stdout}"
    );
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    // statistics with a machine format on stdout go to stderr
    let o = Command::new(env!("CARGO_BIN_EXE_locklint"))
        .args([
            "check",
            "fixtures/separate-expire",
            "--project-root",
            "fixtures/separate-expire",
            "--format",
            "json",
            "--statistics",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("stdout stays JSON");
    assert!(String::from_utf8_lossy(&o.stderr).contains("separate-expire"));
}

#[test]
fn sarif_rules_carry_the_configured_help_uri() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("locklint.toml"),
        "help-uri = \"https://docs.example.com/locklint/{rule}\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("a.rs"), "pub fn f() {}\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_locklint"))
        .args(["check", "--format", "sarif"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rules = v["runs"][0]["tool"]["driver"]["rules"].as_array().unwrap();
    let r = rules.iter().find(|r| r["id"] == "separate-expire").unwrap();
    assert_eq!(
        r["helpUri"],
        "https://docs.example.com/locklint/separate-expire"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_locklint"))
        .args(["check", "--format", "sarif", "--isolated"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["runs"][0]["tool"]["driver"]["rules"][0]
        .get("helpUri")
        .is_none());
}
