//! Which files of a project are parsed. A Rust file is parsed when its bytes show it can hold
//! lock code ([`frontend::prefilter::can_contribute`]; every `.sql` and `.lua` file is), and
//! then, round after round, when it spells a name the parsed files need from elsewhere
//! ([`locks::reach::wanted`]: a const, a key builder, a struct, a function that reaches Redis
//! or runs SQL and its callers, or a namesake of a call's target, in the packages that can see
//! it), until no file is added. The others keep an empty intermediate form: they hold nothing
//! the analysis reads, so the facts and findings are those of parsing every file
//! ([`Options::parse_all`], which the tests compare with), except that a syntax error is
//! reported only for a file that is parsed.

use crate::cache::Cache;
use crate::engine::{analyze_cached, analyze_file, Options};
use crate::frontend;
use crate::ir::FileIr;
use crate::locks;
use crate::source::{FileRef, SourceFile};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::PathBuf;

/// Parse the files of `sources` that can matter, through the cache when there is one: those
/// loaded with their text (the prefilter's, or all of them with [`Options::parse_all`]), then
/// those loaded without it whose text, read again, spells a name the parsed files need.
/// Returns every file's intermediate form, in order (a file not parsed keeps no text: nothing
/// reads it), and per file whether its cache entry did not read back.
pub(crate) fn parse_needed(
    sources: Vec<(FileRef, bool)>,
    packages: &locks::Packages,
    opts: &Options,
    cache: Option<&Cache>,
) -> (Vec<FileIr>, Vec<bool>) {
    let overlay = opts.overlay.as_deref();
    let (mut sources, mut wanted): (Vec<FileRef>, Vec<bool>) = sources.into_iter().unzip();
    // every file starts empty, as one that is not parsed stays
    let mut irs: Vec<FileIr> = sources.iter().map(|f| FileIr::new(f.clone())).collect();
    let mut parsed_yet = vec![false; sources.len()];
    let mut rebuilt = vec![false; sources.len()];
    type Asked = (String, locks::reach::Need, Option<String>);
    let mut asked: HashMap<Asked, locks::PackageSet> = HashMap::new();
    loop {
        let todo: Vec<usize> = (0..sources.len())
            .filter(|&i| wanted[i] && !parsed_yet[i])
            .collect();
        if todo.is_empty() {
            break;
        }
        // a file found to be needed is read again: it was loaded without its text
        let reread: Vec<(usize, Option<FileRef>)> = todo
            .par_iter()
            .filter(|&&i| sources[i].text.is_empty())
            .map(|&i| {
                (
                    i,
                    text_of(&sources[i], overlay)
                        .map(|t| SourceFile::new(sources[i].path.clone(), t.into_owned())),
                )
            })
            .collect();
        for (i, f) in reread {
            if let Some(f) = f {
                irs[i] = FileIr::new(f.clone());
                sources[i] = f;
            }
        }
        let parsed: Vec<(usize, FileIr, bool)> = todo
            .into_par_iter()
            .map(|i| {
                let f = sources[i].clone();
                let (ir, corrupt) = match cache {
                    // an editor's unsaved text changes with every key: not worth an entry
                    Some(cache) if !overlay.is_some_and(|o| o.contains_key(&f.path)) => {
                        analyze_cached(cache, i, f)
                    }
                    _ => (analyze_file(i, f), false),
                };
                (i, ir, corrupt)
            })
            .collect();
        for (i, ir, corrupt) in parsed {
            irs[i] = ir;
            parsed_yet[i] = true;
            rebuilt[i] = corrupt;
        }
        if opts.parse_all {
            break;
        }
        // the names the parsed files need, each asked once per set of packages
        let needed: Vec<locks::reach::Wanted> = locks::reach::wanted(&irs, packages)
            .into_iter()
            .filter(|w| asked.get(&(w.name.clone(), w.need, w.with.clone())) != Some(&w.within))
            .collect();
        for w in &needed {
            asked.insert((w.name.clone(), w.need, w.with.clone()), w.within.clone());
        }
        if needed.is_empty() {
            break;
        }
        let (mentions, patterns) = mentions_of(&needed);
        let more: Vec<usize> = (0..sources.len())
            .into_par_iter()
            .filter(|&i| !wanted[i])
            .filter(|&i| {
                let package = packages.package(i);
                let Some(text) = text_of(&sources[i], overlay) else {
                    return false;
                };
                let mut hit = vec![false; patterns];
                for p in mentions.find(&text) {
                    hit[p] = true;
                }
                needed.iter().enumerate().any(|(k, w)| {
                    hit[2 * k] && (w.with.is_none() || hit[2 * k + 1]) && w.within.contains(package)
                })
            })
            .collect();
        if more.is_empty() {
            break;
        }
        for i in more {
            wanted[i] = true;
        }
    }
    (irs, rebuilt)
}

/// The text of a file loaded without it (from the editor's overlay, else read again from disk;
/// `None` when it can no longer be read as text), or the text it was loaded with.
fn text_of<'f>(
    f: &'f FileRef,
    overlay: Option<&HashMap<PathBuf, String>>,
) -> Option<std::borrow::Cow<'f, str>> {
    if !f.text.is_empty() {
        return Some(std::borrow::Cow::Borrowed(f.text.as_str()));
    }
    if let Some(t) = overlay.and_then(|o| o.get(&f.path)) {
        return Some(std::borrow::Cow::Owned(t.clone()));
    }
    std::fs::read_to_string(&f.path)
        .ok()
        .map(std::borrow::Cow::Owned)
}

/// A finder for the names `needed` asks for: pattern `2k` is the `k`th name as it must
/// appear, `2k + 1` the type it must be a function of (empty, matching nothing, when none).
fn mentions_of(needed: &[locks::reach::Wanted]) -> (frontend::prefilter::Mentions, usize) {
    use frontend::prefilter::{Appears, Mentions, CONST, FN, STRUCT};
    use locks::reach::Need;
    let patterns = needed.iter().flat_map(|w| {
        let appears = match w.need {
            Need::Use => Appears::Used,
            Need::Function => Appears::Defined(FN),
            Need::Struct => Appears::Defined(STRUCT),
            Need::Const => Appears::Defined(CONST),
        };
        [
            (w.name.as_str(), appears),
            (w.with.as_deref().unwrap_or(""), Appears::Implemented),
        ]
    });
    (Mentions::new(patterns), 2 * needed.len())
}

/// Whether a file is parsed before knowing what the others need: every `.sql` and `.lua`
/// file, and the Rust files the prefilter lets through.
pub(crate) fn needs_parse(path: &std::path::Path, text: &str) -> bool {
    let rust = path.extension().is_some_and(|e| e == "rs");
    !rust || frontend::prefilter::can_contribute(text)
}
