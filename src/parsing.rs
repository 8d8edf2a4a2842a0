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
use crate::engine::Options;
use crate::frontend;
use crate::frontend::prefilter::Spelling;
use crate::ir::FileIr;
use crate::locks;
use crate::source::{FileRef, SourceFile};
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// The identifiers of file `i` of a run, as kept when it was left out or read from its text
/// (`None`: it can no longer be read as text).
pub(crate) type Spelled<'a> = dyn Fn(usize) -> Option<Spelling> + Sync + 'a;

/// Where the rounds get the files' text and intermediate form: the disk, with an editor's
/// overlay and the analysis cache (`engine::Disk`), or a project held in memory
/// ([`crate::index`]).
pub(crate) trait Source: Sync {
    /// The text of a file loaded without it and not kept aside (`None`: it can no longer be
    /// read as text).
    fn text<'f>(&'f self, f: &'f FileRef) -> Option<Cow<'f, str>>;

    /// The intermediate form of `f`, file `i` of the project.
    fn parse(&self, i: usize, f: FileRef) -> Parse;

    /// The source of a file loaded without its text, with `text`.
    fn with_text(&self, f: &FileRef, text: Cow<str>) -> FileRef {
        SourceFile::new(f.path.clone(), text.into_owned())
    }

    /// Per file of `candidates` (indexes into `files`), whether it spells each name of
    /// `needed` as it must appear (pattern `2k`) and the type it must be a function of
    /// (pattern `2k + 1`), as [`mentions_of`] finds them.
    fn mentioning(
        &self,
        needed: &[locks::reach::Wanted],
        _files: &[FileRef],
        spelled: &Spelled,
        candidates: Vec<usize>,
    ) -> Vec<(usize, Vec<bool>)> {
        scan(needed, spelled, candidates)
    }
}

/// One file's intermediate form as [`Source::parse`] made it.
pub(crate) struct Parse {
    pub ir: FileIr,
    /// A stored entry of it did not read back (it was made again).
    pub corrupt: bool,
    /// The key of its entry in the analysis cache, when it went through the cache.
    pub entry: Option<String>,
}

impl Parse {
    /// A form made without the cache.
    pub fn uncached(ir: FileIr) -> Parse {
        Parse {
            ir,
            corrupt: false,
            entry: None,
        }
    }
}

/// [`Source::mentioning`] by looking each candidate's identifiers up.
pub(crate) fn scan(
    needed: &[locks::reach::Wanted],
    spelled: &Spelled,
    candidates: Vec<usize>,
) -> Vec<(usize, Vec<bool>)> {
    let (mentions, patterns) = mentions_of(needed);
    candidates
        .into_par_iter()
        .filter_map(|i| {
            let spelling = spelled(i)?;
            let mut hit = vec![false; patterns];
            for p in mentions.find_in(&spelling) {
                hit[p] = true;
            }
            Some((i, hit))
        })
        .collect()
}

/// The names a run asked for, ready to be looked up in files' identifiers.
struct Finder {
    mentions: frontend::prefilter::Mentions,
    patterns: usize,
}

impl Finder {
    fn new(asked: &[locks::reach::Wanted]) -> Finder {
        let (mentions, patterns) = mentions_of(asked);
        Finder { mentions, patterns }
    }

    /// Whether a file read as `spelling` spells each name (as [`scan`] tells), per pattern.
    fn hits(&self, spelling: &Spelling) -> Vec<bool> {
        let mut hit = vec![false; self.patterns];
        for p in self.mentions.find_in(spelling) {
            hit[p] = true;
        }
        hit
    }
}

/// Whether a file of `package` whose text gives `hit` ([`scan`]) spells a name of `needed` as
/// it must appear, in a package it was asked in.
fn spells(needed: &[locks::reach::Wanted], hit: &[bool], package: Option<u32>) -> bool {
    needed.iter().enumerate().any(|(k, w)| {
        hit[2 * k] && (w.with.is_none() || hit[2 * k + 1]) && w.within.contains(package)
    })
}

/// A file to parse if it matters.
pub(crate) struct ToParse {
    /// Its source, without its text when the prefilter left it out.
    pub file: FileRef,
    /// Whether it is wanted from the start.
    pub wanted: bool,
    /// Its text kept aside, if it was left out.
    pub aside: Option<Arc<str>>,
    /// Its identifiers, if it was left out.
    pub spelling: Option<Spelling>,
}

/// Which files a run parsed, and every name its rounds asked the others for (with the
/// packages each was asked in, over all rounds): another text of a file left out would have
/// been parsed only if the prefilter let it through or it spelled one of those names.
#[derive(Debug, Clone, Default)]
pub(crate) struct Closure {
    pub parsed: Vec<bool>,
    pub asked: Vec<locks::reach::Wanted>,
    /// Each file's package (by the files [`Closure::parsed`] is of).
    pub packages: Vec<Option<u32>>,
    /// What the run read of each parsed file ([`Read`]), when asked for
    /// ([`Closure::with_roles`]; empty otherwise, `None` for a file not parsed or one whose
    /// role cannot be kept).
    pub roles: Vec<Option<Read>>,
}

/// A parsed file as a run that stores its answer read it: its [`Role`], and the key of its
/// intermediate form's entry in the analysis cache (compared with another text's form by
/// [`shape`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Read {
    pub role: Role,
    pub entry: String,
}

/// Why a run parsed a file: from the start (the prefilter let it through, or every file is
/// parsed) or for the names it spells (then which of the names the rounds asked for it
/// spells, as a hash). Another text of the file with the same role, whose intermediate form
/// has the same [`shape`], is parsed in the same round and gives the same form but for
/// offsets moved in order, so every round, project fact and trace is the same but for those
/// offsets; the findings that point into the file are read from its text too, so the callers
/// compare roles only for files no finding points into. A file whose text holds a suppression
/// comment has no role, since the suppressions are read from the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Role {
    pub first: bool,
    pub spelled: u64,
}

impl Role {
    /// The role of `file` among the names `asked`; `None` when it holds a suppression comment.
    pub fn of(file: &FileRef, asked: &[locks::reach::Wanted], parse_all: bool) -> Option<Role> {
        if crate::suppress::suppresses(file) {
            return None;
        }
        // the prefilter's one read of the text: whether it lets the file through, else the
        // identifiers the asked names are looked up in
        let left_out = prefiltered(&file.path, &file.text, parse_all);
        Some(Role::as_read(asked, &Finder::new(asked), left_out.as_ref()))
    }

    /// [`Role::of`] a file without a suppression comment that the prefilter let through
    /// (`None`) or left out with these identifiers (`finder`: of `asked`).
    fn as_read(
        asked: &[locks::reach::Wanted],
        finder: &Finder,
        left_out: Option<&Spelling>,
    ) -> Role {
        use std::hash::{Hash, Hasher};
        let spelled = left_out.map_or(0, |spelling| {
            let hit = finder.hits(spelling);
            let mut h = std::collections::hash_map::DefaultHasher::new();
            for (k, w) in asked.iter().enumerate() {
                if hit.get(2 * k) == Some(&true) && (w.with.is_none() || hit[2 * k + 1]) {
                    k.hash(&mut h);
                }
            }
            h.finish()
        });
        Role {
            first: left_out.is_none(),
            spelled,
        }
    }
}

/// A form's shape ([`crate::shape::of`]): the same form but for offsets moved in order.
pub(crate) use crate::shape::of as shape;

impl Closure {
    /// The closure of the loaded files (`at`: each one's place among the `all` files of the
    /// project), told per project file: a file that was not loaded was not parsed, and its
    /// package is unknown.
    pub fn of_project(self, at: &[usize], all: usize, packages: &locks::Packages) -> Closure {
        let mut parsed = vec![false; all];
        let mut of = vec![None; all];
        let mut roles = if self.roles.is_empty() {
            Vec::new()
        } else {
            vec![None; all]
        };
        for (source, &file) in at.iter().enumerate() {
            parsed[file] = self.parsed.get(source).copied().unwrap_or(false);
            of[file] = packages.package(source);
            if let Some(r) = roles.get_mut(file) {
                *r = self.roles.get(source).cloned().flatten();
            }
        }
        Closure {
            parsed,
            asked: self.asked,
            packages: of,
            roles,
        }
    }

    /// The closure with what it read of each file of `irs` (the files it is of) that it
    /// parsed: its [`Role`] (the prefilter's reading of it as the rounds had it: `left_out`,
    /// see [`parse_needed`]) and the key of its form's entry in `cache` (`entries`: those
    /// known from the parse; the others are computed).
    pub fn with_roles(
        mut self,
        irs: &[FileIr],
        left_out: &[Option<Spelling>],
        entries: &[Option<String>],
        cache: &Cache,
    ) -> Closure {
        let asked = &self.asked;
        let finder = Finder::new(asked);
        self.roles = irs
            .par_iter()
            .zip(&self.parsed)
            .zip(left_out)
            .zip(entries)
            .map(|(((ir, &parsed), left_out), entry)| {
                if !parsed || crate::suppress::suppresses(&ir.file) {
                    return None;
                }
                Some(Read {
                    role: Role::as_read(asked, &finder, left_out.as_ref()),
                    entry: entry.clone().unwrap_or_else(|| cache.key(&ir.file)),
                })
            })
            .collect();
        self
    }

    /// Whether `text`, the new text of file `i` (of package `package`) that the run left out,
    /// would have been parsed by the same run: the prefilter lets it through, or it spells a
    /// name the rounds asked for in a package of its own.
    pub fn would_parse(&self, path: &std::path::Path, text: &str, package: Option<u32>) -> bool {
        match prefiltered(path, text, false) {
            None => true,
            Some(spelling) => spells(
                &self.asked,
                &Finder::new(&self.asked).hits(&spelling),
                package,
            ),
        }
    }
}

/// Parse the files of `sources` that can matter, through `source`: those loaded with their
/// text (the prefilter's, or all of them with [`Options::parse_all`]), then those loaded
/// without it whose text spells a name the parsed files need.
pub(crate) fn parse_needed(
    sources: Vec<ToParse>,
    packages: &locks::Packages,
    opts: &Options,
    source: &dyn Source,
) -> Needed {
    let mut aside: Vec<Option<Arc<str>>> = Vec::with_capacity(sources.len());
    let mut spellings: Vec<Option<Spelling>> = Vec::with_capacity(sources.len());
    let (mut sources, mut wanted): (Vec<FileRef>, Vec<bool>) = sources
        .into_iter()
        .map(|f| {
            aside.push(f.aside);
            spellings.push(f.spelling);
            (f.file, f.wanted)
        })
        .unzip();
    // every file starts empty, as one that is not parsed stays
    let mut irs: Vec<FileIr> = sources.iter().map(|f| FileIr::new(f.clone())).collect();
    let mut parsed_yet = vec![false; sources.len()];
    let mut rebuilt = vec![false; sources.len()];
    let mut entries: Vec<Option<String>> = vec![None; sources.len()];
    type Asked = (String, locks::reach::Need, Option<String>);
    let mut asked: HashMap<Asked, locks::PackageSet> = HashMap::new();
    // every name asked, in the packages of every round that asked it
    let mut ever_asked: HashMap<Asked, locks::PackageSet> = HashMap::new();
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
                let text = match &aside[i] {
                    Some(t) => Some(Cow::Borrowed(&**t)),
                    None => source.text(&sources[i]),
                };
                (i, text.map(|t| source.with_text(&sources[i], t)))
            })
            .collect();
        for (i, f) in reread {
            if let Some(f) = f {
                irs[i] = FileIr::new(f.clone());
                sources[i] = f;
            }
        }
        let parsed: Vec<(usize, Parse)> = todo
            .into_par_iter()
            .map(|i| (i, source.parse(i, sources[i].clone())))
            .collect();
        for (i, p) in parsed {
            irs[i] = p.ir;
            parsed_yet[i] = true;
            rebuilt[i] = p.corrupt;
            entries[i] = p.entry;
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
            ever_asked
                .entry((w.name.clone(), w.need, w.with.clone()))
                .and_modify(|within: &mut locks::PackageSet| *within = within.union(&w.within))
                .or_insert_with(|| w.within.clone());
        }
        if needed.is_empty() {
            break;
        }
        let spelled = |i: usize| -> Option<Spelling> {
            if let Some(s) = &spellings[i] {
                return Some(s.clone());
            }
            let f = &sources[i];
            if !f.text.is_empty() {
                return Some(Spelling::of(&f.text));
            }
            match &aside[i] {
                Some(t) => Some(Spelling::of(t)),
                None => source.text(f).map(|t| Spelling::of(&t)),
            }
        };
        let candidates: Vec<usize> = (0..sources.len()).filter(|&i| !wanted[i]).collect();
        let more: Vec<usize> = source
            .mentioning(&needed, &sources, &spelled, candidates)
            .into_iter()
            .filter(|(i, hit)| spells(&needed, hit, packages.package(*i)))
            .map(|(i, _)| i)
            .collect();
        if more.is_empty() {
            break;
        }
        for i in more {
            wanted[i] = true;
        }
    }
    let mut asked: Vec<locks::reach::Wanted> = ever_asked
        .into_iter()
        .map(|((name, need, with), within)| locks::reach::Wanted {
            name,
            need,
            with,
            within,
        })
        .collect();
    asked.sort_by(|a, b| (&a.name, a.with.as_deref()).cmp(&(&b.name, b.with.as_deref())));
    let closure = Closure {
        parsed: parsed_yet,
        asked,
        packages: Vec::new(),
        roles: Vec::new(),
    };
    Needed {
        irs,
        rebuilt,
        closure,
        left_out: spellings,
        entries,
    }
}

/// What [`parse_needed`] found.
pub(crate) struct Needed {
    /// Every file's intermediate form, in order (a file not parsed keeps no text: nothing
    /// reads it).
    pub irs: Vec<FileIr>,
    /// Per file, whether its stored entry did not read back.
    pub rebuilt: Vec<bool>,
    pub closure: Closure,
    /// Per file, the identifiers of one the prefilter left out (`None`: let through).
    pub left_out: Vec<Option<Spelling>>,
    /// Per file parsed through the analysis cache, the key of its entry.
    pub entries: Vec<Option<String>>,
}

/// A finder for the names `needed` asks for: pattern `2k` is the `k`th name as it must
/// appear, `2k + 1` its `with` (empty, matching nothing, when none); see [`patterns`].
pub(crate) fn mentions_of(
    needed: &[locks::reach::Wanted],
) -> (frontend::prefilter::Mentions, usize) {
    (
        frontend::prefilter::Mentions::new(needed.iter().flat_map(patterns)),
        2 * needed.len(),
    )
}

/// How a name the parsed files need must appear in a file, and how its `with` must (the type
/// a needed function is a method of: as the type of an `impl`; the field a struct literal
/// must set: anywhere).
pub(crate) fn patterns(w: &locks::reach::Wanted) -> [(&str, frontend::prefilter::Appears); 2] {
    use frontend::prefilter::{Appears, CONST, FN, METHOD, STRUCT};
    use locks::reach::Need;
    let (name, with) = match w.need {
        Need::Call => (Appears::Called, Appears::Implemented),
        Need::Literal => (Appears::Literal, Appears::Used),
        Need::Function => (Appears::Defined(FN), Appears::Implemented),
        Need::Method => (Appears::Defined(METHOD), Appears::Implemented),
        Need::Struct => (Appears::Defined(STRUCT), Appears::Implemented),
        Need::Const => (Appears::Defined(CONST), Appears::Implemented),
    };
    [
        (w.name.as_str(), name),
        (w.with.as_deref().unwrap_or(""), with),
    ]
}

/// Whether a file is parsed before knowing what the others need, read once: `None` for one
/// parsed from the start (every `.sql` and `.lua` file, the Rust files the prefilter lets
/// through, every file with `parse_all`), else the identifiers of the file left out.
pub(crate) fn prefiltered(path: &std::path::Path, text: &str, parse_all: bool) -> Option<Spelling> {
    let rust = path.extension().is_some_and(|e| e == "rs");
    if parse_all || !rust {
        return None;
    }
    let read = frontend::prefilter::read(text);
    read.reason.is_none().then_some(read.spelling)
}
