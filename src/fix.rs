//! Applying fixes: all edits of a file at once, refused when they overlap; planned in memory
//! pass by pass until they settle; written with [`write_atomically`] (see [`write`] for what
//! writing guarantees).

mod write;

pub use write::write_atomically;

use crate::diagnostic::{Applicability, Diagnostic, Fix};
use crate::engine::Parsed;
use crate::engine::Report;
use crate::source::{FileRef, SourceFile, Span};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::diagnostic::apply_edits as apply_to_text;

/// How many rounds of fixes are applied before giving up on convergence.
pub const MAX_PASSES: usize = 10;

/// Which fixes to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Safe fixes only (`--fix`).
    Safe,
    /// Safe and unsafe fixes (`--fix --unsafe-fixes`).
    Unsafe,
}

impl Level {
    pub fn allows(self, a: Applicability) -> bool {
        match a {
            Applicability::Safe => true,
            Applicability::Unsafe => self == Level::Unsafe,
            Applicability::DisplayOnly => false,
        }
    }
}

/// The new text of one file.
#[derive(Debug, Clone)]
pub struct FileChange {
    pub path: PathBuf,
    pub display: String,
    /// The text as read before any fix.
    pub original: String,
    pub new: String,
    /// How many fixes changed it.
    pub fixes: usize,
}

/// What applying fixes in memory produced.
#[derive(Debug, Default)]
pub struct Plan {
    pub changes: Vec<FileChange>,
    /// Files whose fixes were backed out, with why.
    pub backed_out: Vec<(String, String)>,
    /// Fixes dropped because applying them offered the same fix at the same place again (the
    /// rule still saw the defect): file and the fix's message.
    pub repeated: Vec<(String, String)>,
    /// Fixes still applied in the last pass: they did not converge.
    pub unconverged: bool,
    /// The analysis of the texts the plan leaves (each changed file's new text, every other
    /// file as it was), when the last analysis made is one: it is then the report after the
    /// changes are written, without analysing them again.
    pub report: Option<Report>,
}

/// The file of a fix, when all of its edits are in one file.
fn fix_file(f: &Fix) -> Option<&FileRef> {
    let first = &f.edits.first()?.location.file;
    f.edits
        .iter()
        .all(|e| e.location.file.path == first.path)
        .then_some(first)
}

/// How `text` parses, parsed on a large stack like every analysis (a text whose analysis
/// panics counts as unparseable).
fn parsed(path: &Path, text: &str) -> Parsed {
    let file = SourceFile::new(path.to_path_buf(), text.to_string());
    crate::engine::on_large_stack(|| Parsed::of(&crate::frontend::analyze(0, file).problems))
        .unwrap_or(Parsed {
            problems: usize::MAX,
            limits: 0,
            whole_file_refused: false,
        })
}

/// Why a fixed text that cannot be analysed is not written.
const BEYOND: &str = "the fixed code would be too large or too deeply nested to analyse again, so it could not be checked; its fixes were backed out";

/// Why `after` (a file's text with its fixes) may not be written, if it may not: it parses
/// worse than `before`, or it cannot be analysed at all (a file with fixes was analysed: the
/// fixes made it so). How each parses is `known` when an analysis found it, else the text is
/// parsed; `before` only when `after` has problems.
fn refusal(
    path: &Path,
    before: &str,
    known: Option<Parsed>,
    after: &str,
    known_after: Option<Parsed>,
) -> Option<&'static str> {
    let now = known_after.unwrap_or_else(|| parsed(path, after));
    if now.problems == 0 {
        return None;
    }
    if now.whole_file_refused {
        return Some(BEYOND);
    }
    let was = known.unwrap_or_else(|| parsed(path, before));
    if now.limits > was.limits {
        Some(BEYOND)
    } else if now.problems > was.problems {
        Some("the fixed code would not parse; its fixes were backed out")
    } else {
        None
    }
}

/// The text taken by the edits chosen so far: disjoint, not touching ranges (start to end),
/// so that whether an edit touches one is a look-up, not a scan.
#[derive(Debug, Default)]
struct Taken(BTreeMap<usize, usize>);

impl Taken {
    /// Whether `s` overlaps or touches a taken range.
    fn touches(&self, s: Span) -> bool {
        self.0
            .range(..=s.end)
            .next_back()
            .is_some_and(|(_, &end)| s.start <= end)
    }

    /// Take `s`, merged with the ranges it touches.
    fn add(&mut self, s: Span) {
        let (mut start, mut end) = (s.start, s.end);
        let merged: Vec<(usize, usize)> = self
            .0
            .range(..=end)
            .rev()
            .take_while(|(_, &e)| e >= start)
            .map(|(&a, &b)| (a, b))
            .collect();
        for (a, b) in merged {
            self.0.remove(&a);
            start = start.min(a);
            end = end.max(b);
        }
        self.0.insert(start, end);
    }
}

/// A file's new text in a pass, before the analysis of the pass says whether it stays.
struct Pending {
    path: PathBuf,
    file: FileRef,
    new: String,
    chosen: Vec<(Span, String)>,
    offers: Vec<(Offer, String)>,
}

/// A fix as offered at one place: its rule, where its finding is, and what it writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Offer {
    rule: &'static str,
    at: Span,
    replacements: Vec<String>,
}

impl Offer {
    fn of(d: &Diagnostic, f: &Fix) -> Offer {
        Offer {
            rule: d.rule,
            at: d.primary.span,
            replacements: f.edits.iter().map(|e| e.replacement.clone()).collect(),
        }
    }

    /// The same offer after `edits` (sorted, not overlapping): where its finding may be
    /// then. An insertion right at either end of its span may have gone before or after it.
    fn moved(&self, edits: &[(Span, String)]) -> Vec<Offer> {
        let mut out = Vec::new();
        for start in [
            moved(self.at.start, edits, false),
            moved(self.at.start, edits, true),
        ] {
            for end in [
                moved(self.at.end, edits, false),
                moved(self.at.end, edits, true),
            ] {
                let o = Offer {
                    at: Span::new(start, end.max(start)),
                    ..self.clone()
                };
                if !out.contains(&o) {
                    out.push(o);
                }
            }
        }
        out
    }
}

/// Where offset `at` of a text lies after `edits` (sorted, not overlapping); an offset inside
/// a replaced range moves to the end of its replacement, and one where text is inserted moves
/// past it when `past_insertions`.
fn moved(at: usize, edits: &[(Span, String)], past_insertions: bool) -> usize {
    let mut shift: isize = 0;
    for (span, replacement) in edits {
        let insertion_here = span.is_empty() && span.start == at;
        if span.end <= at && (!insertion_here || past_insertions) {
            shift += replacement.len() as isize - span.len() as isize;
        } else if span.start < at {
            return (span.start as isize + shift) as usize + replacement.len();
        } else {
            break;
        }
    }
    (at as isize + shift) as usize
}

/// A file and the fixes offered for it in one pass.
type FileFixes<'a> = (FileRef, Vec<(&'a Diagnostic, &'a Fix)>);

/// What the last pass did to one file: its text before, and the offers it applied, placed in
/// the text after.
struct Applied {
    before: String,
    fixes: usize,
    /// Each offer as it may be placed in the text after, its place in the text before, and
    /// its message.
    offers: Vec<(Vec<Offer>, Span, String)>,
}

/// Apply the fixes of `report` (and of every report after them) in memory: per pass, the
/// non-overlapping fixes of each file (with the redis-rs command trait import they leave
/// unused together), then analyse again, until nothing changes. A file whose
/// new text no longer parses is backed out and left alone. A fix whose result offers the same
/// fix at the same place again is undone (with the other fixes of its file in that pass, which
/// the next pass applies again) and not offered again. `analyse` runs the analysis over the
/// given texts (in place of the files on disk).
pub fn plan(
    first: Report,
    level: Level,
    analyse: &dyn Fn(Arc<HashMap<PathBuf, String>>) -> Report,
) -> Plan {
    let mut overlay: HashMap<PathBuf, String> = HashMap::new();
    let mut changes: BTreeMap<PathBuf, FileChange> = BTreeMap::new();
    let mut refused: HashSet<PathBuf> = HashSet::new();
    // offers that came back after being applied: never applied again
    let mut dropped: HashSet<(PathBuf, &'static str, String, Vec<String>)> = HashSet::new();
    let mut last: HashMap<PathBuf, Applied> = HashMap::new();
    let mut out = Plan::default();
    let mut report = first;
    // how each file parsed in the last analysis (none for a stored answer)
    let mut previous_parsed = report.parsed.clone();
    // the overlay changed since `report` was made
    let mut stale = false;
    for pass in 0..=MAX_PASSES {
        let mut per_file: BTreeMap<PathBuf, FileFixes> = BTreeMap::new();
        let mut undo: BTreeMap<PathBuf, String> = BTreeMap::new();
        for d in &report.findings {
            let Some(f) = &d.fix else { continue };
            if !level.allows(f.applicability) {
                continue;
            }
            let Some(file) = fix_file(f) else { continue };
            // only the selected files are edited (a report not made by the engine selects
            // nothing and restricts nothing)
            let outside = !report.selected.is_empty() && !report.selected.contains(&file.path);
            if outside || refused.contains(&file.path) {
                continue;
            }
            let offer = Offer::of(d, f);
            let snippet = |text: &str, s: Span| text.get(s.start..s.end).unwrap_or("").to_string();
            if let Some(applied) = last.get(&file.path) {
                if let Some((_, was, message)) =
                    applied.offers.iter().find(|(o, ..)| o.contains(&offer))
                {
                    let at = snippet(&applied.before, *was);
                    dropped.insert((file.path.clone(), d.rule, at, offer.replacements));
                    out.repeated.push((file.display.clone(), message.clone()));
                    undo.insert(file.path.clone(), applied.before.clone());
                    continue;
                }
            }
            let key = (
                file.path.clone(),
                d.rule,
                snippet(&file.text, d.primary.span),
                offer.replacements,
            );
            if dropped.contains(&key) {
                continue;
            }
            per_file
                .entry(file.path.clone())
                .or_insert_with(|| (file.clone(), Vec::new()))
                .1
                .push((d, f));
        }
        let mut changed = false;
        for (path, before) in undo {
            per_file.remove(&path);
            let applied = last.remove(&path);
            if let Some(entry) = changes.get_mut(&path) {
                entry.new = before.clone();
                entry.fixes -= applied.map_or(0, |a| a.fixes);
            }
            previous_parsed.remove(&path);
            overlay.insert(path, before);
            changed = true;
            stale = true;
        }
        last.clear();
        if per_file.is_empty() && !changed {
            break;
        }
        if pass == MAX_PASSES {
            out.unconverged = true;
            break;
        }
        let mut pending: Vec<Pending> = Vec::new();
        for (path, (file, fixes)) in per_file {
            let mut chosen: Vec<(Span, String)> = Vec::new();
            let mut offers: Vec<(Offer, String)> = Vec::new();
            let mut taken = Taken::default();
            for (d, f) in fixes {
                let spans: Vec<Span> = f.edits.iter().map(|e| e.location.span).collect();
                if spans.iter().any(|s| taken.touches(*s)) {
                    continue;
                }
                for s in &spans {
                    taken.add(*s);
                }
                chosen.extend(
                    f.edits
                        .iter()
                        .map(|e| (e.location.span, e.replacement.clone())),
                );
                offers.push((Offer::of(d, f), f.message.clone()));
            }
            // an import the fixes of this pass leave unused together goes with them
            chosen.extend(crate::rules::leftovers::trait_import_left_unused(
                &file, &chosen,
            ));
            let Ok(new) = apply_to_text(&file.text, &chosen) else {
                continue;
            };
            if new == file.text {
                continue;
            }
            // a Rust text the analysis would refuse whole is not worth analysing
            let rust = path.extension().is_some_and(|e| e == "rs");
            if rust && crate::frontend::rust::refused_before_tokens(&new) {
                refused.insert(path.clone());
                out.backed_out
                    .push((file.display.clone(), BEYOND.to_string()));
                continue;
            }
            overlay.insert(path.clone(), new.clone());
            pending.push(Pending {
                path,
                file,
                new,
                chosen,
                offers,
            });
        }
        if pending.is_empty() && !changed {
            break;
        }
        // the pass's texts are analysed together; a file that parses worse goes back to its
        // text before the pass, and what is left is analysed again
        report = analyse(Arc::new(overlay.clone()));
        stale = false;
        let mut backed = false;
        for p in pending {
            let known_after = report.parsed.get(&p.path).copied();
            let known_before = previous_parsed.get(&p.path).copied();
            let why = refusal(&p.path, &p.file.text, known_before, &p.new, known_after);
            if let Some(why) = why {
                refused.insert(p.path.clone());
                out.backed_out
                    .push((p.file.display.clone(), why.to_string()));
                overlay.insert(p.path.clone(), p.file.text.to_string());
                backed = true;
                continue;
            }
            let mut chosen = p.chosen;
            chosen.sort_by_key(|(s, _)| (s.start, s.end));
            let entry = changes.entry(p.path.clone()).or_insert_with(|| FileChange {
                path: p.path.clone(),
                display: p.file.display.clone(),
                original: p.file.text.clone(),
                new: String::new(),
                fixes: 0,
            });
            entry.new = p.new;
            entry.fixes += p.offers.len();
            last.insert(
                p.path,
                Applied {
                    before: p.file.text.to_string(),
                    fixes: p.offers.len(),
                    offers: p
                        .offers
                        .into_iter()
                        .map(|(o, m)| (o.moved(&chosen), o.at, m))
                        .collect(),
                },
            );
        }
        if backed {
            report = analyse(Arc::new(overlay.clone()));
        }
        previous_parsed = report.parsed.clone();
    }
    // a backed-out file is left as it was on disk: the last analysis describes what is left
    // only if it saw that file's original text
    // (a file never changed before it was backed out went back to its original text)
    let backed_out_seen_changed = refused.iter().any(|p| {
        let original = changes.get(p).map(|c| &c.original);
        overlay
            .get(p)
            .zip(original)
            .is_some_and(|(now, original)| now != original)
    });
    if !stale && !backed_out_seen_changed {
        out.report = Some(report);
    }
    // a backed-out file keeps its original text
    out.changes = changes
        .into_values()
        .filter(|c| !refused.contains(&c.path) && c.new != c.original)
        .collect();
    out
}

/// A unified diff of every change.
pub fn unified_diff(changes: &[FileChange]) -> String {
    let mut out = String::new();
    for c in changes {
        let diff = similar::TextDiff::from_lines(&c.original, &c.new);
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{}", c.display), &format!("b/{}", c.display))
                .to_string(),
        );
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worse(path: &Path, before: &str, after: &str) -> Option<&'static str> {
        refusal(path, before, None, after, None)
    }

    #[test]
    fn fixed_text_that_parses_worse_is_told_apart() {
        let path = Path::new("jobs.rs");
        let good = "pub fn a() -> i32 {\n    1\n}\n";
        let broken = "pub fn a() -> i32 {\n    1 +\n}\n";
        assert!(worse(path, good, broken).is_some_and(|w| w.contains("would not parse")));
        assert_eq!(worse(path, good, good), None);
        assert_eq!(worse(path, broken, good), None);
        assert_eq!(worse(path, broken, broken), None);
        // what an earlier pass found of the text before is trusted
        let clean = Parsed {
            problems: 0,
            limits: 0,
            whole_file_refused: false,
        };
        assert!(refusal(path, broken, Some(clean), broken, None).is_some());
        // SQL is counted per statement: one more broken statement parses worse
        let sql = Path::new("q.sql");
        assert!(worse(sql, "SELEC 1;\nSELECT 2;", "SELEC 1;\nSELEC 2;").is_some());
        assert_eq!(
            worse(sql, "SELEC 1;\nSELEC 2;", "SELEC 1;\nSELECT 2;"),
            None
        );
    }

    #[test]
    fn fixed_text_beyond_the_analysis_bounds_is_refused_as_such() {
        let path = Path::new("deep.rs");
        let fine = "pub fn a() -> u8 {\n    1\n}\n";
        let deep = format!(
            "pub fn a() -> u8 {{\n    {}1{}\n}}\n",
            "(".repeat(2000),
            ")".repeat(2000)
        );
        let why = worse(path, fine, &deep).expect("refused");
        assert!(why.contains("too large or too deeply nested"), "{why}");
        // a file left out whole is never written, whatever the text before was
        assert!(worse(path, &deep, &deep).is_some());
        // a bound the text before already exceeded in one part is not the fix's doing
        let lua = |nesting: usize| {
            format!(
                "pub fn s() -> redis::Script {{\n    redis::Script::new(\"return {}1{}\")\n}}\n",
                "(".repeat(nesting),
                ")".repeat(nesting)
            )
        };
        let deep_script = lua(crate::frontend::lua::MAX_NESTING + 5);
        assert_eq!(worse(path, &deep_script, &deep_script), None);
        let why = worse(path, &lua(2), &deep_script).expect("refused");
        assert!(why.contains("too large or too deeply nested"), "{why}");
    }

    #[test]
    fn taken_ranges_tell_touching_spans_as_a_scan_would() {
        // every span of a small range against a scan of the spans taken before it
        let spans: Vec<Span> = (0..12)
            .flat_map(|a| (a..12).map(move |b| Span::new(a, b)))
            .collect();
        for step in [1, 3, 7, 11] {
            let mut taken = Taken::default();
            let mut scan: Vec<Span> = Vec::new();
            for (i, s) in spans.iter().enumerate() {
                if i % step != 0 {
                    continue;
                }
                let touches = scan.iter().any(|c| s.start <= c.end && c.start <= s.end);
                assert_eq!(taken.touches(*s), touches, "{s:?} after {scan:?}");
                if !touches || i % 2 == 0 {
                    taken.add(*s);
                    scan.push(*s);
                }
            }
        }
    }

    #[test]
    fn edits_apply_in_order_and_overlaps_are_refused() {
        let t = "abcdef";
        let out = apply_to_text(
            t,
            &[(Span::new(4, 5), "E".into()), (Span::new(0, 1), "A".into())],
        )
        .unwrap();
        assert_eq!(out, "AbcdEf");
        assert!(apply_to_text(
            t,
            &[(Span::new(0, 3), "".into()), (Span::new(2, 4), "".into())]
        )
        .is_err());
        assert!(apply_to_text(t, &[(Span::new(5, 9), "".into())]).is_err());
    }

    fn finding(file: &FileRef, rule: &'static str, at: Span, edit: (Span, &str)) -> Diagnostic {
        Diagnostic {
            rule,
            severity: crate::diagnostic::Severity::Error,
            primary: crate::diagnostic::Location::new(file.clone(), at),
            label: String::new(),
            message: String::new(),
            help: String::new(),
            related: Vec::new(),
            fix: Some(Fix {
                message: format!("write `{}`", edit.1),
                applicability: Applicability::Safe,
                edits: vec![crate::diagnostic::Edit {
                    location: crate::diagnostic::Location::new(file.clone(), edit.0),
                    replacement: edit.1.to_string(),
                }],
            }),
        }
    }

    /// A rule that still sees its defect after its fix (its fix inserts a guard it does not
    /// recognise), next to one whose fix removes its defect.
    fn analysis(path: &Path, text: &str) -> Report {
        let file = SourceFile::new(path.to_path_buf(), text.to_string());
        let end = text.find(" end").unwrap();
        // the finding spans the condition the fix extends
        let condition = text.find("WHERE").unwrap();
        let mut findings = vec![finding(
            &file,
            "unfenced-write",
            Span::new(condition, end),
            (Span::new(end, end), " AND fence < $2"),
        )];
        if let Some(at) = text.find("bad") {
            let span = Span::new(at, at + 3);
            findings.push(finding(&file, "other", span, (span, "good")));
        }
        Report {
            findings,
            ..Default::default()
        }
    }

    #[test]
    fn a_fix_that_breaks_its_file_is_backed_out_and_the_others_stay() {
        // `a.rs` gets a fix that leaves a dangling operator; `b.rs` one that keeps it whole
        let (a, b) = (PathBuf::from("a.rs"), PathBuf::from("b.rs"));
        let text = "pub fn f() -> i32 {\n    1\n}\n";
        let one = text.find('1').unwrap();
        let report = |overlay: &HashMap<PathBuf, String>| {
            let mut findings = Vec::new();
            for (path, replacement) in [(&a, "1 +"), (&b, "2")] {
                let now = overlay.get(path).map_or(text, |t| t.as_str());
                if now == text {
                    let file = SourceFile::new(path.clone(), now.to_string());
                    let at = Span::new(one, one + 1);
                    findings.push(finding(&file, "other", at, (at, replacement)));
                }
            }
            Report {
                findings,
                ..Default::default()
            }
        };
        let analyses = std::cell::Cell::new(0);
        let plan = plan(report(&HashMap::new()), Level::Safe, &|overlay| {
            analyses.set(analyses.get() + 1);
            report(&overlay)
        });
        assert_eq!(plan.backed_out.len(), 1, "{:?}", plan.backed_out);
        assert_eq!(plan.backed_out[0].0, "a.rs");
        assert!(plan.backed_out[0].1.contains("would not parse"));
        assert_eq!(plan.changes.len(), 1);
        assert_eq!(plan.changes[0].path, b);
        assert_eq!(plan.changes[0].new, "pub fn f() -> i32 {\n    2\n}\n");
        // the pass, then once more without the file backed out; its report is the last
        assert_eq!(analyses.get(), 2);
        let last = plan
            .report
            .expect("the last analysis describes the texts written");
        assert_eq!(last.findings.len(), 1);
        assert_eq!(last.findings[0].primary.file.path, a);
    }

    #[test]
    fn a_fix_offered_again_where_it_was_applied_is_dropped() {
        let path = PathBuf::from("a.sql");
        let text = "UPDATE t SET a = 1 WHERE id = ? end; bad";
        let plan = plan(analysis(&path, text), Level::Safe, &|overlay| {
            analysis(&path, &overlay[&path])
        });
        assert!(!plan.unconverged);
        assert_eq!(
            plan.repeated,
            [("a.sql".to_string(), "write ` AND fence < $2`".to_string())]
        );
        assert_eq!(plan.changes.len(), 1);
        assert_eq!(
            plan.changes[0].new,
            "UPDATE t SET a = 1 WHERE id = ? end; good"
        );
        assert_eq!(plan.changes[0].fixes, 1);
    }

    #[test]
    fn offsets_move_with_the_edits_before_them() {
        let edits = [
            (Span::new(2, 2), "abc".to_string()),
            (Span::new(5, 8), "x".to_string()),
        ];
        assert_eq!(moved(1, &edits, false), 1);
        assert_eq!(moved(2, &edits, false), 2);
        assert_eq!(moved(2, &edits, true), 5);
        assert_eq!(moved(3, &edits, false), 6);
        assert_eq!(moved(6, &edits, false), 9);
        assert_eq!(moved(8, &edits, false), 9);
        assert_eq!(moved(10, &edits, false), 11);
    }
}
