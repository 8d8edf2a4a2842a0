//! Purpose and verdict of a lock, following the decision ladder:
//!
//! 1. *broken*: a lint error on its acquire / release / renew path;
//! 2. *no lock needed*: it guards only writes that are already idempotent, or a single-row
//!    `UPDATE ... WHERE` that a condition in the statement could make safe on its own;
//! 3. *fine for efficiency*: declared or inferred efficiency (a rare double run is harmless);
//! 4. *fine for correctness*: the protected writes run on the session or transaction that
//!    holds a lock that cannot expire under them (advisory locks);
//! 5. *unsafe for correctness*: otherwise, with the writes to fence or make idempotent.

use super::{steps, Lock, Purpose, PurposeKind, PurposeSource, Verdict};
use crate::config::{Purpose as Declared, Settings};
use crate::locks::template_matches;

/// Purpose from the configuration (`[locks."<template>"] purpose`), else inferred: writes
/// under the lock that are neither idempotent nor fenced make it a correctness lock.
pub fn purpose(lock: &Lock, settings: &Settings) -> Purpose {
    let declared = settings
        .locks
        .iter()
        .find(|(t, _)| template_matches(t, &lock.name) || t == &lock.name);
    if let Some((_, p)) = declared {
        return Purpose {
            value: match p {
                Declared::Efficiency => PurposeKind::Efficiency,
                Declared::Correctness => PurposeKind::Correctness,
            },
            source: PurposeSource::Config,
        };
    }
    let correctness = lock.protects.iter().any(|w| !w.safe_alone());
    Purpose {
        value: if correctness {
            PurposeKind::Correctness
        } else {
            PurposeKind::Efficiency
        },
        source: PurposeSource::Inferred,
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Decide the verdict, with reasons and next steps.
pub fn decide(lock: &mut Lock) {
    lock.renewed = !lock.renewals.is_empty();
    let mut reasons = Vec::new();
    let mut steps = Vec::new();
    let path_errors: Vec<&super::Finding> = lock
        .findings
        .iter()
        .filter(|f| f.on_path && f.severity == crate::diagnostic::Severity::Error)
        .collect();
    let writes = &lock.protects;
    let verdict = if !path_errors.is_empty() {
        for f in &path_errors {
            reasons.push(format!("{} at {}: {}", f.rule, f.site.short(), f.message));
        }
        steps.extend(steps::for_findings(&path_errors));
        if lock.purpose.value == PurposeKind::Correctness {
            let minted = !lock.fencing.minted.is_empty();
            for w in writes.iter().filter(|w| !w.safe_alone()) {
                steps.push(steps::for_write(w, minted));
            }
        }
        Verdict::Broken
    } else if !writes.is_empty() && writes.iter().all(|w| w.idempotent) {
        reasons.push(format!(
            "it guards only {} that {} already idempotent",
            plural(writes.len(), "write", "writes"),
            if writes.len() == 1 { "is" } else { "are" }
        ));
        steps.push("drop the lock, or keep it only to save duplicate work".to_string());
        Verdict::NoLockNeeded
    } else if writes.len() == 1
        && writes[0].conditional_update
        && !writes[0].fenced
        && lock.purpose.source == PurposeSource::Inferred
    {
        let w = &writes[0];
        reasons.push(format!(
            "it guards a single-row `{}` ({}) that a conditional `UPDATE ... WHERE` can do alone",
            w.target,
            w.site.short()
        ));
        steps.push(format!(
            "put the precondition into the statement's `WHERE` at {} (check the affected row count) and drop the lock",
            w.site.short()
        ));
        Verdict::NoLockNeeded
    } else if lock.purpose.value == PurposeKind::Efficiency {
        match lock.purpose.source {
            PurposeSource::Config => reasons.push(
                "declared `purpose = \"efficiency\"`: a rare double run is harmless".to_string(),
            ),
            PurposeSource::Inferred if writes.is_empty() => {
                reasons.push("no writes found while it is held: it only saves duplicate work".to_string())
            }
            PurposeSource::Inferred => reasons.push(format!(
                "every write under it is fenced or idempotent ({}): correctness does not depend on the lock",
                plural(writes.len(), "write", "writes")
            )),
        }
        Verdict::FineForEfficiency
    } else {
        let unsafe_writes: Vec<&super::Write> = writes
            .iter()
            .filter(|w| !w.safe_alone() && (!w.same_session || lock.mechanism.expires()))
            .collect();
        if unsafe_writes.is_empty() && !writes.is_empty() {
            reasons.push(format!(
                "{} under it run on the session or transaction that holds it, and it cannot expire under them",
                plural(writes.len(), "write", "writes")
            ));
            Verdict::FineForCorrectness
        } else if unsafe_writes.is_empty()
            && lock.fencing.minted.is_empty()
            && lock.mechanism.expires()
        {
            reasons.push(
                "declared a correctness lock, but it expires and no fencing token is minted"
                    .to_string(),
            );
            steps.push(steps::mint_token(lock));
            Verdict::UnsafeForCorrectness
        } else if unsafe_writes.is_empty() {
            reasons.push("declared a correctness lock; its writes are safe".to_string());
            Verdict::FineForCorrectness
        } else {
            let why = if lock.mechanism.expires() {
                "if the lock expires while the holder is paused, a second holder runs too and both write"
            } else {
                "the writes run outside the session that holds the lock, which can be lost without them noticing"
            };
            let effects: Vec<String> = unsafe_writes
                .iter()
                .filter(|w| w.external)
                .map(|w| format!("`{}` at {}", w.target, w.site.short()))
                .collect();
            let external = effects.len();
            if external > 0 {
                reasons.push(format!(
                    "{} under it ({}): not fenceable unless the service it reaches checks a token, so a holder that lost the lock still makes {}",
                    plural(external, "external effect runs", "external effects run"),
                    effects.join(", "),
                    if external == 1 { "it" } else { "them" }
                ));
            }
            let unfenced = unsafe_writes
                .iter()
                .filter(|w| !w.fenced && !w.external)
                .count();
            if unfenced > 0 {
                reasons.push(format!(
                    "{} neither fenced nor idempotent: {why}",
                    plural(unfenced, "write is", "writes are")
                ));
            }
            let read_first = unsafe_writes.len() - unfenced - external;
            if read_first > 0 {
                reasons.push(format!(
                    "{} the fence only when writing, after a plain read of {} table: a stale holder's write is accepted first, and the newer holder's, computed from the same read, overwrites it",
                    plural(read_first, "write compares", "writes compare"),
                    if read_first == 1 { "its" } else { "their" }
                ));
            }
            let minted = !lock.fencing.minted.is_empty();
            for w in &unsafe_writes {
                steps.push(steps::for_write(w, minted));
            }
            steps.extend(steps::same_transaction(lock));
            Verdict::UnsafeForCorrectness
        }
    };
    if lock.mechanism.expires() && !lock.renewed && verdict != Verdict::Broken {
        reasons.push("nothing renews it: work must finish within the TTL".to_string());
    }
    lock.verdict = verdict;
    lock.reasons = reasons;
    lock.next_steps = steps;
}
