//! A file's identifiers, read once from its bytes: which whole identifiers it spells, and for
//! each whether it follows an item keyword (`fn name`, `struct name`, `static mut NAME`, `impl
//! Type`) or the generics of an `impl` (`impl<T> Type<T>`). Kept for a file that was not
//! parsed, it answers every later question about the names it spells ([`super::Mentions`])
//! without its text.
//!
//! An identifier is a maximal run of ASCII letters, digits, `_` and non-ASCII bytes, wherever
//! it stands (code, comments, strings): a superset of the identifiers the file declares or
//! uses.

use std::hash::BuildHasher;
use std::sync::Arc;

/// How an identifier stands in a text: bits of these.
pub(crate) type Flags = u16;

/// The identifier follows `fn`.
pub(crate) const AFTER_FN: Flags = 1;
/// The identifier follows `struct`.
pub(crate) const AFTER_STRUCT: Flags = 1 << 1;
/// The identifier follows `enum`.
pub(crate) const AFTER_ENUM: Flags = 1 << 2;
/// The identifier follows `const`.
pub(crate) const AFTER_CONST: Flags = 1 << 3;
/// The identifier follows `static`.
pub(crate) const AFTER_STATIC: Flags = 1 << 4;
/// The identifier follows `impl`.
pub(crate) const AFTER_IMPL: Flags = 1 << 5;
/// The identifier follows `for`.
pub(crate) const AFTER_FOR: Flags = 1 << 6;
/// The identifier follows a `>` that does not end `->`.
pub(crate) const AFTER_GENERICS: Flags = 1 << 7;
/// The identifier follows `fn` and its parameters may start with `self` (`fn name(&self`,
/// `fn name(mut self`, `fn name(self: Arc<Self>`; a generic function's, whose parameters are
/// not looked at, may): a method's name.
pub(crate) const AFTER_FN_METHOD: Flags = 1 << 8;

/// The keyword bit of an identifier (0 for one that is none of the item keywords).
fn keyword(word: &[u8]) -> Flags {
    match word {
        b"fn" => AFTER_FN,
        b"struct" => AFTER_STRUCT,
        b"enum" => AFTER_ENUM,
        b"const" => AFTER_CONST,
        b"static" => AFTER_STATIC,
        b"impl" => AFTER_IMPL,
        b"for" => AFTER_FOR,
        _ => 0,
    }
}

const IDENT: u8 = 1;
const SPACE: u8 = 2;

/// Each byte's class: part of an identifier, ASCII whitespace, or neither.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = if c.is_ascii_alphanumeric() || c == b'_' || !c.is_ascii() {
            IDENT
        } else if c.is_ascii_whitespace() {
            SPACE
        } else {
            0
        };
        b += 1;
    }
    t
};

/// The hash an identifier is known by (48 bits: the low 16 bits of an entry hold its flags).
pub(crate) fn ident_hash(word: &[u8]) -> u64 {
    foldhash::fast::FixedState::with_seed(0x6c6f_636b_6c69_6e74).hash_one(word) >> 16
}

/// Whether the parameters after a function's name (the text from the end of the name) may
/// start with `self`: `(` then `&`, a lifetime and `mut` as they come, then `self`; a `<`
/// (generics) or a `/` (a comment) cannot be told, so it may.
fn may_take_self(after: &[u8]) -> bool {
    let mut t = after.trim_ascii_start();
    match t {
        [b'<' | b'/', ..] => return true,
        [b'(', rest @ ..] => t = rest.trim_ascii_start(),
        _ => return false,
    }
    if let [b'&', rest @ ..] = t {
        t = rest.trim_ascii_start();
        if let [b'\'', rest @ ..] = t {
            let n = rest
                .iter()
                .take_while(|&&b| CLASS[b as usize] == IDENT)
                .count();
            t = rest[n..].trim_ascii_start();
        }
    }
    if let Some(rest) = t.strip_prefix(b"mut") {
        if rest.first().is_none_or(|&b| CLASS[b as usize] != IDENT) {
            t = rest.trim_ascii_start();
        }
    }
    if t.first() == Some(&b'/') {
        return true;
    }
    t.strip_prefix(b"self")
        .is_some_and(|rest| rest.first().is_none_or(|&b| CLASS[b as usize] != IDENT))
}

/// Calls `each` with every identifier of `text` (where it starts and ends), its hash and how
/// it stands (the `AFTER_*`
/// bits): after a keyword when only ASCII whitespace (at least one byte) separates them, `mut`
/// allowed between (`static mut`); after generics when the last byte before it, whitespace
/// aside, is a `>` not preceded by `-`.
pub(crate) fn identifiers(text: &[u8], mut each: impl FnMut(usize, usize, u64, Flags)) {
    let n = text.len();
    let mut i = 0;
    // the previous identifier's keyword bit, whether it is `mut`, and the keyword bit of the
    // identifier before a `mut`
    let (mut prev_keyword, mut prev_mut, mut mut_after): (Flags, bool, Flags) = (0, false, 0);
    let mut prev_end: Option<usize> = None;
    while i < n {
        let gap_start = i;
        while i < n && CLASS[text[i] as usize] != IDENT {
            i += 1;
        }
        if i == n {
            break;
        }
        let start = i;
        while i < n && CLASS[text[i] as usize] == IDENT {
            i += 1;
        }
        let word = &text[start..i];
        let gap = &text[gap_start..start];
        let spaced = !gap.is_empty() && gap.iter().all(|&b| CLASS[b as usize] == SPACE);
        let mut flags = 0;
        if spaced && prev_end.is_some() {
            flags |= prev_keyword;
            if prev_mut {
                flags |= mut_after;
            }
        }
        let trimmed = gap.trim_ascii_end();
        if let [.., last] = trimmed {
            if *last == b'>' {
                let before = match trimmed {
                    [.., b, _] => Some(*b),
                    _ => prev_end.map(|e| text[e - 1]),
                };
                if before != Some(b'-') {
                    flags |= AFTER_GENERICS;
                }
            }
        }
        if flags & AFTER_FN != 0 && may_take_self(&text[i..]) {
            flags |= AFTER_FN_METHOD;
        }
        each(start, i, ident_hash(word), flags);
        let is_mut = word == b"mut";
        mut_after = if is_mut && spaced && prev_end.is_some() {
            prev_keyword
        } else {
            0
        };
        prev_mut = is_mut;
        prev_keyword = keyword(word);
        prev_end = Some(i);
    }
}

/// The identifiers a text spells, each once with every way it stands there.
#[derive(Debug, Clone, Default)]
pub struct Spelling {
    /// Holds the entries, `hash << 16 | flags`, sorted, at `at` (many spellings read back
    /// together share one).
    words: Arc<Vec<u64>>,
    at: std::ops::Range<usize>,
}

impl PartialEq for Spelling {
    fn eq(&self, other: &Spelling) -> bool {
        self.raw() == other.raw()
    }
}

impl Eq for Spelling {}

impl Spelling {
    /// The identifiers of `text`.
    pub fn of(text: &str) -> Spelling {
        let mut b = Builder::default();
        identifiers(text.as_bytes(), |_, _, h, flags| {
            b.add(h, flags);
        });
        b.finish()
    }

    /// How the identifier of hash `h` ([`ident_hash`]) stands in the text, if it is there.
    pub(crate) fn flags(&self, h: u64) -> Option<Flags> {
        let entries = self.raw();
        entries
            .binary_search_by(|e| (e >> 16).cmp(&h))
            .ok()
            .map(|at| entries[at] as Flags)
    }

    /// Every identifier's hash and flags.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (u64, Flags)> + '_ {
        self.raw().iter().map(|e| (e >> 16, *e as Flags))
    }

    /// How many distinct identifiers the text spells.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// The entries as stored (each identifier's hash shifted left 16 bits, or'ed with its
    /// flags; sorted): what [`Spelling::from_raw`] reads back.
    pub fn raw(&self) -> &[u64] {
        &self.words[self.at.clone()]
    }

    /// A spelling stored as [`Spelling::raw`]; `None` when the entries are not strictly
    /// sorted (they were not written by `raw`).
    pub fn from_raw(entries: Vec<u64>) -> Option<Spelling> {
        let len = entries.len();
        Spelling::within(&Arc::new(entries), 0..len)
    }

    /// The spelling stored as [`Spelling::raw`] at `at` in `words`, sharing them; `None` when
    /// `at` is not within them or those entries are not strictly sorted.
    pub fn within(words: &Arc<Vec<u64>>, at: std::ops::Range<usize>) -> Option<Spelling> {
        words
            .get(at.clone())?
            .windows(2)
            .all(|w| w[0] >> 16 < w[1] >> 16)
            .then(|| Spelling {
                words: words.clone(),
                at,
            })
    }
}

type Seen = std::collections::HashMap<u64, Flags, foldhash::fast::FixedState>;

/// The largest map a thread keeps between files.
const KEPT_CAPACITY: usize = 8192;

thread_local! {
    /// A map kept per thread between files, so that reading one does not grow a new one.
    static SEEN: std::cell::RefCell<Seen> = std::cell::RefCell::new(Seen::default());
}

/// A [`Spelling`] being read.
pub(crate) struct Builder {
    seen: Seen,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            seen: SEEN.with(|s| std::mem::take(&mut *s.borrow_mut())),
        }
    }
}

impl Builder {
    /// Count an identifier; whether it is the first of its kind.
    pub fn add(&mut self, h: u64, flags: Flags) -> bool {
        match self.seen.entry(h) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                *e.get_mut() |= flags;
                false
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(flags);
                true
            }
        }
    }

    pub fn finish(mut self) -> Spelling {
        let mut entries: Vec<u64> = self.seen.drain().map(|(h, f)| h << 16 | f as u64).collect();
        // the emptied map (its capacity kept) goes back for the thread's next file; one grown
        // by a very large file is not kept, since emptying it costs its whole capacity
        let mut seen = std::mem::take(&mut self.seen);
        if seen.capacity() > KEPT_CAPACITY {
            seen = Seen::default();
        }
        SEEN.with(|s| *s.borrow_mut() = seen);
        entries.sort_unstable();
        let at = 0..entries.len();
        Spelling {
            words: Arc::new(entries),
            at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stands(text: &str, word: &str) -> Option<Flags> {
        Spelling::of(text).flags(ident_hash(word.as_bytes()))
    }

    #[test]
    fn a_spelling_reads_back_from_its_raw_entries_and_nothing_unsorted_does() {
        let s = Spelling::of("impl Pool { fn get(&self) {} } struct Pool;");
        assert_eq!(Spelling::from_raw(s.raw().to_vec()), Some(s.clone()));
        let mut reversed = s.raw().to_vec();
        reversed.reverse();
        assert_eq!(Spelling::from_raw(reversed), None);
        // one identifier twice (two entries of one hash) is not a spelling either
        let twice = vec![s.raw()[0], s.raw()[0] | 1];
        assert_eq!(Spelling::from_raw(twice), None);
    }

    #[test]
    fn whole_identifiers_only() {
        let text = "let x = try_acquire(1); unlock(); // Überlock";
        assert_eq!(stands(text, "try_acquire"), Some(0));
        assert_eq!(stands(text, "acquire"), None);
        assert_eq!(stands(text, "lock"), None);
        assert_eq!(stands(text, "unlock"), Some(0));
        assert_eq!(
            stands(text, "Überlock"),
            Some(0),
            "non-ASCII bytes are identifier bytes"
        );
        assert!(Spelling::of("").is_empty());
        assert_eq!(Spelling::of("a b a a").len(), 2);
    }

    #[test]
    fn keywords_before_an_identifier() {
        assert_eq!(
            stands("pub async fn release(&self)", "release"),
            Some(AFTER_FN | AFTER_FN_METHOD)
        );
        assert_eq!(stands("fn\n    release()", "release"), Some(AFTER_FN));
        assert_eq!(
            stands("fn release() {} release()", "release"),
            Some(AFTER_FN)
        );
        assert_eq!(stands("define_fn release", "release"), Some(0));
        assert_eq!(
            stands("fn(release)", "release"),
            Some(0),
            "not after whitespace"
        );
        assert_eq!(stands("fn /* */ release", "release"), Some(0));
        assert_eq!(
            stands("pub(crate) static mut KEY: &str = \"\";", "KEY"),
            Some(AFTER_STATIC)
        );
        assert_eq!(stands("let mut KEY = 1;", "KEY"), Some(0));
        assert_eq!(stands("static mut\tKEY", "KEY"), Some(AFTER_STATIC));
        assert_eq!(stands("struct Pool<T>", "Pool"), Some(AFTER_STRUCT));
        assert_eq!(stands("enum Pool {}", "Pool"), Some(AFTER_ENUM));
        assert_eq!(stands("impl Drop for Pool {", "Pool"), Some(AFTER_FOR));
        assert_eq!(stands("impl Pool {", "Pool"), Some(AFTER_IMPL));
        assert_eq!(
            stands(" mut KEY", "KEY"),
            Some(0),
            "`mut` with nothing before it"
        );
    }

    #[test]
    fn methods_take_self_first() {
        let method = Some(AFTER_FN | AFTER_FN_METHOD);
        for text in [
            "fn connect(&self) {}",
            "fn connect( & 'a mut self, x: u8)",
            "fn connect(mut self)",
            "fn connect(self: Arc<Self>)",
            "fn connect<T: Into<u8>>(x: T)",
            "fn connect /* c */ (x: u8)",
            "fn connect(/* the receiver */ &self)",
            "fn connect(&self);",
        ] {
            assert_eq!(stands(text, "connect"), method, "{text}");
        }
        for text in [
            "pub fn connect(socket: c_int, addr: *const sockaddr) -> c_int;",
            "fn connect(selfish: u8)",
            "fn connect()",
            "fn connect(&mutable: u8)",
        ] {
            assert_eq!(stands(text, "connect"), Some(AFTER_FN), "{text}");
        }
    }

    #[test]
    fn generics_before_an_identifier() {
        assert_eq!(stands("impl<T> Pool<T> {", "Pool"), Some(AFTER_GENERICS));
        assert_eq!(stands("impl<T>Pool<T> {", "Pool"), Some(AFTER_GENERICS));
        assert_eq!(stands("fn make() -> Pool {", "Pool"), Some(0));
        assert_eq!(stands("fn make() ->Pool {", "Pool"), Some(0));
        assert_eq!(
            stands(">Pool", "Pool"),
            Some(AFTER_GENERICS),
            "first in the text"
        );
        assert_eq!(
            stands("let v: Vec<u8> = Pool::new();", "Pool"),
            Some(0),
            "`=` after the `>`"
        );
    }
}
