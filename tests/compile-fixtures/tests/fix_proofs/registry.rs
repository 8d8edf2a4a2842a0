//! Which proof covers which fixed fixture, and the test that every fix that changes code is
//! proven: each `fixtures/<rule>/bad_*.fixed` whose fixture's expected JSON carries a safe or
//! unsafe fix needs an entry in [`PROOFS`] (or in [`EXEMPT`], with the reason).

use std::collections::BTreeSet;
use std::path::Path;

use crate::source::fixtures_root;

/// Fixed fixture (relative to `fixtures/`) → the proof (`module::test`) that runs it.
pub const PROOFS: &[(&str, &str)] = &[
    (
        "constant-lock-value/bad_local_worker_name.rs.fixed",
        "separate_expire::local_worker_name",
    ),
    (
        "lock-result-ignored/bad_const_option_words.rs.fixed",
        "setnx_without_expiry::const_option_words",
    ),
    (
        "lock-table-client-clock/bad_acquire_client_time_plus_duration.rs.fixed",
        "lock_table_client_clock::acquire_client_time_plus_duration",
    ),
    (
        "lock-table-client-clock/bad_take_over_client_now_postgres.rs.fixed",
        "lock_table_client_clock::take_over_client_now_postgres",
    ),
    (
        "lock-table-client-clock/bad_work_table_lease_client_clock_sqlx.rs.fixed",
        "lock_table_client_clock::work_table_lease_client_clock_sqlx",
    ),
    (
        "lock-table-steals-live-lock/bad_lease_row_taken_by_name_sqlx.rs.fixed",
        "lock_table_steals_live_lock::lease_row_taken_by_name_sqlx",
    ),
    (
        "lock-table-steals-live-lock/bad_queries_module.rs.fixed",
        "lock_table_steals_live_lock::queries_module",
    ),
    (
        "lock-table-steals-live-lock/bad_update_sets_owner_postgres.rs.fixed",
        "lock_table_steals_live_lock::update_sets_owner_postgres",
    ),
    (
        "lock-table-steals-live-lock/bad_upsert_case_leaves_holder_unconditional.sql.fixed",
        "lock_table_steals_live_lock::upsert_case_leaves_holder_unconditional",
    ),
    (
        "lock-table-steals-live-lock/bad_upsert_no_where.sql.fixed",
        "lock_table_steals_live_lock::upsert_no_where",
    ),
    (
        "lua-release-no-compare/bad_const_escapes.rs.fixed",
        "lua_release_no_compare::const_escapes",
    ),
    (
        "lua-release-no-compare/bad_get_not_guarding.lua.fixed",
        "lua_release_no_compare::get_not_guarding",
    ),
    (
        "lua-renew-no-compare/bad_check_after_expire.lua.fixed",
        "lua_renew_no_compare::check_after_expire",
    ),
    (
        "lua-renew-no-compare/bad_extend_keepttl.rs.fixed",
        "lua_renew_no_compare::extend_keepttl",
    ),
    (
        "lua-renew-no-compare/bad_fred_set_xx_px.rs.fixed",
        "lua_renew_no_compare::fred_set_xx_px",
    ),
    (
        "lua-renew-no-compare/bad_pexpire_token_is_argv2.rs.fixed",
        "lua_renew_no_compare::pexpire_token_is_argv2",
    ),
    (
        "separate-expire/bad_fred_set_then_pexpire.rs.fixed",
        "separate_expire::fred_set_then_pexpire",
    ),
    (
        "separate-expire/bad_redis_lock_struct.rs.fixed",
        "separate_expire::redis_lock_struct",
    ),
    (
        "separate-expire/bad_set_nx_then_expire.rs.fixed",
        "separate_expire::set_nx_then_expire",
    ),
    (
        "separate-expire/bad_spin_loop_break.rs.fixed",
        "separate_expire::spin_loop_break",
    ),
    (
        "setnx-without-expiry/bad_fred_nx_no_expiration.rs.fixed",
        "setnx_without_expiry::fred_nx_no_expiration",
    ),
    (
        "setnx-without-expiry/bad_owner_key_script_release.rs.fixed",
        "setnx_without_expiry::owner_key_script_release",
    ),
    (
        "setnx-without-expiry/bad_set_nx_async.rs.fixed",
        "setnx_without_expiry::set_nx_async",
    ),
    (
        "setnx-without-expiry/bad_set_nx_builder_local_statements.rs.fixed",
        "setnx_without_expiry::set_nx_builder_local_statements",
    ),
    (
        "setnx-without-expiry/bad_set_nx_builder_no_px.rs.fixed",
        "setnx_without_expiry::set_nx_builder_no_px",
    ),
    (
        "setnx-without-expiry/bad_set_options_nx_only.rs.fixed",
        "setnx_without_expiry::set_options_nx_only",
    ),
    (
        "setnx-without-expiry/bad_set_nx_tail_expression.rs.fixed",
        "setnx_without_expiry::set_nx_tail_expression",
    ),
    (
        "setnx-without-expiry/bad_try_lock_helper.rs.fixed",
        "setnx_without_expiry::try_lock_helper",
    ),
    (
        "suppression-unknown-rule/bad_typo.rs.fixed",
        "setnx_without_expiry::typo",
    ),
    (
        "unconditional-release/bad_compare_all_keys_then_delete.rs.fixed",
        "unconditional_release::compare_all_keys_then_delete",
    ),
    (
        "unconditional-release/bad_get_compare_del.rs.fixed",
        "unconditional_release::get_compare_del",
    ),
    (
        "unconditional-release/bad_plain_del_async.rs.fixed",
        "unconditional_release::plain_del_async",
    ),
    (
        "unconditional-release/bad_redis_lock_release.rs.fixed",
        "unconditional_release::redis_lock_release",
    ),
    (
        "unconditional-release/bad_release_in_inline_module.rs.fixed",
        "unconditional_release::release_in_inline_module",
    ),
    (
        "unconditional-release/bad_three_releases_one_import.rs.fixed",
        "unconditional_release::three_releases_one_import",
    ),
    (
        "unconditional-release/bad_two_releases_one_file.rs.fixed",
        "unconditional_release::two_releases_one_file",
    ),
    (
        "unconditional-renew/bad_get_compare_pexpire_sync.rs.fixed",
        "unconditional_renew::get_compare_pexpire_sync",
    ),
    (
        "unconditional-renew/bad_heartbeat_pexpire.rs.fixed",
        "unconditional_renew::heartbeat_pexpire",
    ),
    (
        "unconditional-renew/bad_redis_lock_extend.rs.fixed",
        "unconditional_renew::redis_lock_extend",
    ),
    (
        "unfenced-write/bad_fenced_table_update.sql.fixed",
        "unfenced_write::fenced_table_update",
    ),
    (
        "unfenced-write/bad_upsert_writes_fence_macro.rs.fixed",
        "unfenced_write::upsert_writes_fence_macro",
    ),
];

/// Fixed fixtures whose fix needs no proof on a server, and why.
pub const EXEMPT: &[(&str, &str)] = &[
    (
        "unused-suppression/bad_file_level.rs.fixed",
        "the fix deletes a suppression comment: no code path changes",
    ),
    (
        "unused-suppression/bad_fixed_code.rs.fixed",
        "the fix deletes a suppression comment: no code path changes",
    ),
    (
        "unused-suppression/bad_wrong_rule.rs.fixed",
        "the fix deletes a suppression comment: no code path changes",
    ),
    (
        "unconditional-release/bad_compare_all_keys_then_delete.rs.redis-8.4.fixed",
        REDIS_8_4_REASON,
    ),
    (
        "unconditional-release/bad_get_compare_del.rs.redis-8.4.fixed",
        REDIS_8_4_REASON,
    ),
    (
        "unconditional-release/bad_plain_del_async.rs.redis-8.4.fixed",
        REDIS_8_4_REASON,
    ),
    (
        "unconditional-release/bad_redis_lock_release.rs.redis-8.4.fixed",
        REDIS_8_4_REASON,
    ),
    (
        "unconditional-release/bad_release_in_inline_module.rs.redis-8.4.fixed",
        REDIS_8_4_REASON,
    ),
    (
        "unconditional-release/bad_three_releases_one_import.rs.redis-8.4.fixed",
        REDIS_8_4_REASON,
    ),
    (
        "unconditional-release/bad_two_releases_one_file.rs.redis-8.4.fixed",
        REDIS_8_4_REASON,
    ),
];

/// Why the `--redis-version 8.4` flavour of the release fix is not run here.
const REDIS_8_4_REASON: &str = "`DELEX key IFEQ token` needs a Redis 8.4 server; the test \
     servers run the distribution's Redis 7 (the script flavour of the same fix is proven)";

/// The applicabilities of the fixes in a fixture's expected JSON snapshot.
fn applicabilities(rule_dir: &Path, stem: &str) -> Vec<String> {
    let snap = rule_dir.join("expected").join(format!("{stem}.json.snap"));
    let text = std::fs::read_to_string(&snap).unwrap_or_else(|e| panic!("{}: {e}", snap.display()));
    // an insta snapshot: a `---` header, then the JSON document
    let json = text
        .splitn(3, "---\n")
        .nth(2)
        .unwrap_or_else(|| panic!("{}: no header", snap.display()));
    let doc: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{}: {e}", snap.display()));
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["fix"]["applicability"].as_str().map(str::to_string))
        .collect()
}

/// Every fixed fixture, relative to `fixtures/`.
fn fixed_fixtures() -> Vec<String> {
    let root = fixtures_root();
    let mut out = Vec::new();
    for rule in std::fs::read_dir(&root).expect("fixtures directory") {
        let rule = rule.expect("fixture directory entry").path();
        let Ok(entries) = std::fs::read_dir(&rule) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("fixture entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if name.starts_with("bad_") && name.ends_with(".fixed") {
                let rel = path.strip_prefix(&root).expect("under fixtures/");
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

/// Proofs that fail because the fix they prove is wrong: `#[ignore]`d until the fix is
/// corrected, each with what goes wrong. A proof may be ignored only while listed here, and a
/// listed proof must be ignored: a proof that runs again is dropped from the list.
pub const WRONG_FIXES: &[(&str, &str)] = &[];

/// Whether the test `module::name` exists in `tests/fix_proofs/<module>.rs`, and whether it
/// is `#[ignore]`d.
fn proof_state(proof: &str) -> Option<bool> {
    let (module, name) = proof.split_once("::")?;
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fix_proofs")
        .join(format!("{module}.rs"));
    let text = std::fs::read_to_string(file).ok()?;
    let at = text.find(&format!("async fn {name}("))?;
    let attributes = text[..at]
        .rsplit_once("#[tokio::test")
        .map_or("", |(_, a)| a);
    Some(attributes.contains("#[ignore"))
}

#[test]
fn every_fix_that_changes_code_is_proven() {
    let mut problems = Vec::new();
    let fixed = fixed_fixtures();
    assert!(
        !fixed.is_empty(),
        "no fixed fixtures found under {}",
        fixtures_root().display()
    );
    let mut covered = BTreeSet::new();
    for rel in &fixed {
        let (rule, file) = rel.split_once('/').expect("fixtures/<rule>/<file>");
        let stem = file.split('.').next().unwrap_or(file);
        let kinds = applicabilities(&fixtures_root().join(rule), stem);
        let changes_code = kinds.iter().any(|k| k == "safe" || k == "unsafe");
        let proof = PROOFS.iter().find(|(f, _)| f == rel);
        let exempt = EXEMPT.iter().any(|(f, _)| f == rel);
        match (changes_code, proof, exempt) {
            (true, Some(_), false) | (true, None, true) => {}
            (true, None, false) => problems.push(format!("{rel}: its fix changes code and has no proof registered")),
            (true, Some(_), true) => problems.push(format!("{rel}: both proven and exempt")),
            (false, _, _) => problems.push(format!(
                "{rel}: the fixture's expected JSON has no safe or unsafe fix ({kinds:?}); a display-only fix needs no fixed file and no proof"
            )),
        }
        covered.insert(rel.as_str());
    }
    for (rel, proof) in PROOFS {
        if !covered.contains(rel) {
            problems.push(format!(
                "{rel}: registered for {proof}, but no such fixed fixture"
            ));
        }
        let wrong = WRONG_FIXES.iter().any(|(p, _)| p == proof);
        match proof_state(proof) {
            None => problems.push(format!("{rel}: the proof {proof} does not exist")),
            Some(true) if !wrong => {
                problems.push(format!("{proof} is ignored but not listed in WRONG_FIXES"))
            }
            Some(false) if wrong => problems.push(format!(
                "{proof} is listed in WRONG_FIXES but runs: drop the entry"
            )),
            Some(_) => {}
        }
    }
    for (rel, _) in EXEMPT {
        if !covered.contains(rel) {
            problems.push(format!(
                "{rel}: listed as exempt, but no such fixed fixture"
            ));
        }
    }
    assert!(problems.is_empty(), "fix proofs:\n{}", problems.join("\n"));
}

/// A fixture whose expected JSON carries a safe or unsafe fix has a fixed file (which the test
/// above then requires a proof for).
#[test]
fn every_fixture_with_a_code_changing_fix_has_a_fixed_file() {
    let root = fixtures_root();
    let fixed = fixed_fixtures();
    let mut problems = Vec::new();
    let mut fixable = 0;
    for rule in std::fs::read_dir(&root).expect("fixtures directory") {
        let rule = rule.expect("fixture directory entry").path();
        let Ok(snaps) = std::fs::read_dir(rule.join("expected")) else {
            continue;
        };
        for snap in snaps {
            let snap = snap.expect("snapshot entry").path();
            let name = snap
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let Some(stem) = name
                .strip_suffix(".json.snap")
                .filter(|s| s.starts_with("bad_"))
            else {
                continue;
            };
            let kinds = applicabilities(&rule, stem);
            if !kinds.iter().any(|k| k == "safe" || k == "unsafe") {
                continue;
            }
            fixable += 1;
            let rule_name = rule
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let prefix = format!("{rule_name}/{stem}.");
            if !fixed.iter().any(|f| f.starts_with(&prefix)) {
                problems.push(format!(
                    "{rule_name}/{stem}: a safe or unsafe fix but no fixed file"
                ));
            }
        }
    }
    assert!(
        fixable > 0,
        "no fixture with a safe or unsafe fix under {}",
        root.display()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
