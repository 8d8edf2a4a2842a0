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
        // the gap before the identifier: whether it is all whitespace, and its last other byte
        let mut last_other: Option<usize> = None;
        while i < n {
            match CLASS[text[i] as usize] {
                IDENT => break,
                SPACE => {}
                _ => last_other = Some(i),
            }
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
        let spaced = start > gap_start && last_other.is_none();
        let mut flags = 0;
        if spaced && prev_end.is_some() {
            flags |= prev_keyword;
            if prev_mut {
                flags |= mut_after;
            }
        }
        if let Some(last) = last_other.filter(|&l| text[l] == b'>') {
            let before = if last > gap_start {
                Some(text[last - 1])
            } else {
                prev_end.map(|e| text[e - 1])
            };
            if before != Some(b'-') {
                flags |= AFTER_GENERICS;
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

/// One bit per value of an identifier hash's low bits, set for the hashes of some names: most
/// identifiers of a text are told apart from those names by it, without a look-up.
pub(crate) struct Sieve {
    words: Vec<u64>,
}

impl Sieve {
    /// A sieve of `words` 64-bit words (a power of two) holding `hashes`.
    pub fn new(words: usize, hashes: impl IntoIterator<Item = u64>) -> Sieve {
        let mut sieve = Sieve {
            words: vec![0; words.next_power_of_two()],
        };
        for h in hashes {
            let (word, bit) = sieve.at(h);
            sieve.words[word] |= bit;
        }
        sieve
    }

    /// Where hash `h` stands: its word and bit.
    fn at(&self, h: u64) -> (usize, u64) {
        let bit = h as usize & (self.words.len() * 64 - 1);
        (bit / 64, 1 << (bit % 64))
    }

    /// Whether `h` may be one of the hashes (it is not when its bit is clear).
    pub fn may_hold(&self, h: u64) -> bool {
        let (word, bit) = self.at(h);
        self.words[word] & bit != 0
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
    /// flags; sorted): what [`Spelling::within`] reads back.
    pub fn raw(&self) -> &[u64] {
        &self.words[self.at.clone()]
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

/// The identifiers of a text being read: an open-addressing table of entries (`hash << 16 |
/// flags`; 0 marks a free slot, so the one hash 0 is kept aside), probed linearly from a slot
/// picked by the hash's high bits (identifier hashes are already spread), and where each entry
/// went, so that emptying it costs the entries, not the table.
#[derive(Default)]
struct Seen {
    slots: Vec<u64>,
    used: Vec<u32>,
    /// The flags of the identifier of hash 0, if the text has it.
    zero: Option<Flags>,
}

/// The fewest slots a table starts with.
const FIRST_SLOTS: usize = 256;

impl Seen {
    /// The slot `h` is probed from.
    fn home(&self, h: u64) -> usize {
        (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & (self.slots.len() - 1)
    }

    /// Count an identifier; whether it is the first of its kind.
    fn add(&mut self, h: u64, flags: Flags) -> bool {
        if h == 0 {
            let first = self.zero.is_none();
            *self.zero.get_or_insert(0) |= flags;
            return first;
        }
        // at most half full
        if (self.used.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut at = self.home(h);
        loop {
            let slot = self.slots[at];
            if slot == 0 {
                self.slots[at] = h << 16 | u64::from(flags);
                self.used.push(at as u32);
                return true;
            }
            if slot >> 16 == h {
                self.slots[at] = slot | u64::from(flags);
                return false;
            }
            at = (at + 1) & mask;
        }
    }

    /// Twice the slots (the first ones when there are none), every entry placed again.
    fn grow(&mut self) {
        let entries: Vec<u64> = self
            .used
            .iter()
            .map(|&at| self.slots[at as usize])
            .collect();
        let size = (self.slots.len() * 2).max(FIRST_SLOTS);
        self.slots = vec![0; size];
        self.used.clear();
        let mask = size - 1;
        for e in entries {
            let mut at = self.home(e >> 16);
            while self.slots[at] != 0 {
                at = (at + 1) & mask;
            }
            self.slots[at] = e;
            self.used.push(at as u32);
        }
    }

    /// The entries, unsorted; the table is left empty.
    fn drain(&mut self) -> Vec<u64> {
        let mut entries: Vec<u64> = Vec::with_capacity(self.used.len() + 1);
        for &at in &self.used {
            entries.push(std::mem::take(&mut self.slots[at as usize]));
        }
        self.used.clear();
        if let Some(flags) = self.zero.take() {
            entries.push(u64::from(flags));
        }
        entries
    }
}

/// The most slots a table a thread keeps between files may have.
const KEPT_SLOTS: usize = 1 << 15;

thread_local! {
    /// A table kept per thread between files, so that reading one does not grow a new one.
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
        self.seen.add(h, flags)
    }

    pub fn finish(mut self) -> Spelling {
        let mut entries = self.seen.drain();
        // the emptied table goes back for the thread's next file; one grown by a very large
        // file is not kept
        let mut seen = std::mem::take(&mut self.seen);
        if seen.slots.len() > KEPT_SLOTS {
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

    fn raw_back(entries: Vec<u64>) -> Option<Spelling> {
        let len = entries.len();
        Spelling::within(&Arc::new(entries), 0..len)
    }

    fn stands(text: &str, word: &str) -> Option<Flags> {
        Spelling::of(text).flags(ident_hash(word.as_bytes()))
    }

    #[test]
    fn thousands_of_identifiers_and_the_hash_zero_are_each_kept_once() {
        let text: String = (0..20_000)
            .map(|i| format!("fn f{i}() {{}} f{i}(); "))
            .collect();
        let s = Spelling::of(&text);
        assert_eq!(s.len(), 20_001, "every f<i> and fn");
        for i in [0, 777, 19_999] {
            let flags = s.flags(ident_hash(format!("f{i}").as_bytes()));
            assert_eq!(flags, Some(AFTER_FN));
        }
        // the one hash that marks a free slot elsewhere is kept aside
        let mut b = Builder::default();
        assert!(b.add(0, AFTER_FN));
        assert!(!b.add(0, AFTER_IMPL));
        assert!(b.add(5, 0));
        let s = b.finish();
        assert_eq!(s.flags(0), Some(AFTER_FN | AFTER_IMPL));
        assert_eq!(s.flags(5), Some(0));
        assert_eq!(s.len(), 2);
        // the table a thread keeps is empty for its next text
        assert_eq!(Spelling::of("x").len(), 1);
    }

    #[test]
    fn a_spelling_reads_back_from_its_raw_entries_and_nothing_unsorted_does() {
        let s = Spelling::of("impl Pool { fn get(&self) {} } struct Pool;");
        assert_eq!(raw_back(s.raw().to_vec()), Some(s.clone()));
        let mut reversed = s.raw().to_vec();
        reversed.reverse();
        assert_eq!(raw_back(reversed), None);
        // one identifier twice (two entries of one hash) is not a spelling either
        let twice = vec![s.raw()[0], s.raw()[0] | 1];
        assert_eq!(raw_back(twice), None);
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
