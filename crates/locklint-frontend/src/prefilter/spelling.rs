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
/// The identifier follows `fn`, the function may have a body (`fn name(..) {`; not a
/// declaration ending with `;`, as in an `extern` block or a trait, or a signature inside a
/// macro's arguments) and its parameters may start with `self` (`fn name(&self`, `fn
/// name(mut self`, `fn name(self: Arc<Self>`): a method's name.
pub(crate) const AFTER_FN_METHOD: Flags = 1 << 8;
/// The identifier follows `fn`, the function may have a body and its parameters may not
/// start with `self`: the name of a function a path calls (`name(..)`, `Type::name(..)`).
pub(crate) const AFTER_FN_PATH: Flags = 1 << 9;
/// The identifier is followed by `(` (and is no function's name being defined: `fn name(`) or
/// by a turbofish (`name::<T>`): a call of it, or a comment between (`/`), which may be.
pub(crate) const CALLED: Flags = 1 << 10;
/// The identifier is followed by `{` (and is no struct's or enum's name being defined, no
/// `impl`'s type, no return type before a body) or by a turbofish: a struct literal of it
/// (`Name { .. }`, `Name::<T> { .. }`), or a comment between, which may be.
pub(crate) const LITERAL: Flags = 1 << 11;

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

/// Whether the parameters after a function's name (the text from the end of the name) start
/// with `self`: `(` then `&`, a lifetime and `mut` as they come, then `self`, generics
/// (`<..>`) skipped before the `(`. `None` when it cannot be told: a comment comes first (`/`),
/// or something other than `(` follows the name and its generics.
fn takes_self(after: &[u8]) -> Option<bool> {
    let mut t = after.trim_ascii_start();
    if let [b'<', ..] = t {
        t = after_generics(t)?.trim_ascii_start();
    }
    let [b'(', rest @ ..] = t else {
        return None;
    };
    t = rest.trim_ascii_start();
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
        return None;
    }
    Some(
        t.strip_prefix(b"self")
            .is_some_and(|rest| rest.first().is_none_or(|&b| CLASS[b as usize] != IDENT)),
    )
}

/// The most bytes of a signature looked at by [`after_generics`] and [`may_have_body`].
const SIGNATURE_BYTES: usize = 1024;

/// The text after the generics `<..>` that `t` starts with (a `>` of `->` does not close
/// them); `None` when they hold a comment or do not close within [`SIGNATURE_BYTES`].
fn after_generics(t: &[u8]) -> Option<&[u8]> {
    let mut depth = 0usize;
    for (i, &b) in t.iter().enumerate().take(SIGNATURE_BYTES) {
        match b {
            b'<' => depth += 1,
            b'>' if i > 0 && t[i - 1] == b'-' => {}
            b'>' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(&t[i + 1..]);
                }
            }
            b'/' => return None,
            _ => {}
        }
    }
    None
}

/// Whether the function whose signature goes on with `after` (the text from the end of its
/// name) may have a body: a `{` comes before the `;` that ends a declaration and before a
/// bracket that closes the group the signature is in (a macro's arguments). A comment, an
/// attribute or a string in between, or no end within [`SIGNATURE_BYTES`], may hide one: it
/// may.
fn may_have_body(after: &[u8]) -> bool {
    let mut depth = 0usize;
    for &b in after.iter().take(SIGNATURE_BYTES) {
        match b {
            b'{' | b'/' | b'#' | b'"' => return true,
            b'(' | b'[' => depth += 1,
            b')' | b']' | b'}' if depth == 0 => return false,
            b')' | b']' => depth -= 1,
            b';' if depth == 0 => return false,
            _ => {}
        }
    }
    true
}

/// The [`CALLED`] and [`LITERAL`] bits of an identifier standing as `flags` says, followed by
/// `after`; `returned`: it follows `->` (a return type, before a function's body).
fn followed_by(after: &[u8], flags: Flags, returned: bool) -> Flags {
    let t = after.trim_ascii_start();
    match t {
        [b'(', ..] if flags & AFTER_FN == 0 => CALLED,
        [b'{', ..]
            if !returned && flags & (AFTER_STRUCT | AFTER_ENUM | AFTER_IMPL | AFTER_FOR) == 0 =>
        {
            LITERAL
        }
        [b':', b':', rest @ ..] if rest.trim_ascii_start().first() == Some(&b'<') => {
            CALLED | LITERAL
        }
        [b'/', ..] => CALLED | LITERAL,
        _ => 0,
    }
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
        // after a `->`: a return type, which a body's `{` may follow
        let mut returned = false;
        if let Some(last) = last_other.filter(|&l| text[l] == b'>') {
            let before = if last > gap_start {
                Some(text[last - 1])
            } else {
                prev_end.map(|e| text[e - 1])
            };
            returned = before == Some(b'-');
            if !returned {
                flags |= AFTER_GENERICS;
            }
        }
        if flags & AFTER_FN != 0 && may_have_body(&text[i..]) {
            flags |= match takes_self(&text[i..]) {
                Some(true) => AFTER_FN_METHOD,
                Some(false) => AFTER_FN_PATH,
                None => AFTER_FN_METHOD | AFTER_FN_PATH,
            };
        }
        flags |= followed_by(&text[i..], flags, returned);
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

    /// How `word` stands in `text` by what comes before it (the bits of what follows aside).
    fn after(text: &str, word: &str) -> Option<Flags> {
        stands(text, word).map(|f| f & !(CALLED | LITERAL))
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
            assert_eq!(flags, Some(AFTER_FN | AFTER_FN_PATH | CALLED));
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
        assert_eq!(after(text, "try_acquire"), Some(0));
        assert_eq!(after(text, "acquire"), None);
        assert_eq!(after(text, "lock"), None);
        assert_eq!(after(text, "unlock"), Some(0));
        assert_eq!(
            after(text, "Überlock"),
            Some(0),
            "non-ASCII bytes are identifier bytes"
        );
        assert!(Spelling::of("").is_empty());
        assert_eq!(Spelling::of("a b a a").len(), 2);
    }

    #[test]
    fn keywords_before_an_identifier() {
        assert_eq!(
            after("pub async fn release(&self)", "release"),
            Some(AFTER_FN | AFTER_FN_METHOD)
        );
        assert_eq!(
            after("fn\n    release()", "release"),
            Some(AFTER_FN | AFTER_FN_PATH)
        );
        assert_eq!(
            after("fn release() {} release()", "release"),
            Some(AFTER_FN | AFTER_FN_PATH)
        );
        assert_eq!(after("define_fn release", "release"), Some(0));
        assert_eq!(
            after("fn(release)", "release"),
            Some(0),
            "not after whitespace"
        );
        assert_eq!(after("fn /* */ release", "release"), Some(0));
        assert_eq!(
            after("pub(crate) static mut KEY: &str = \"\";", "KEY"),
            Some(AFTER_STATIC)
        );
        assert_eq!(after("let mut KEY = 1;", "KEY"), Some(0));
        assert_eq!(after("static mut\tKEY", "KEY"), Some(AFTER_STATIC));
        assert_eq!(after("struct Pool<T>", "Pool"), Some(AFTER_STRUCT));
        assert_eq!(after("enum Pool {}", "Pool"), Some(AFTER_ENUM));
        assert_eq!(after("impl Drop for Pool {", "Pool"), Some(AFTER_FOR));
        assert_eq!(after("impl Pool {", "Pool"), Some(AFTER_IMPL));
        assert_eq!(
            after(" mut KEY", "KEY"),
            Some(0),
            "`mut` with nothing before it"
        );
    }

    #[test]
    fn methods_take_self_first_and_functions_do_not() {
        let method = Some(AFTER_FN | AFTER_FN_METHOD);
        for text in [
            "fn connect(&self) {}",
            "fn connect( & 'a mut self, x: u8) {}",
            "fn connect(mut self) {}",
            "fn connect(self: Arc<Self>) {}",
            "fn connect<T: Into<u8>, F: Fn() -> T>(&self, x: F) {}",
        ] {
            assert_eq!(after(text, "connect"), method, "{text}");
        }
        let function = Some(AFTER_FN | AFTER_FN_PATH);
        for text in [
            "fn connect(selfish: u8) {}",
            "fn connect() -> [u8; 2] {}",
            "fn connect(&mutable: u8) {}",
            "fn connect<T: Into<u8>>(x: T) where T: Copy {}",
        ] {
            assert_eq!(after(text, "connect"), function, "{text}");
        }
        // what cannot be told may be either
        for text in [
            "fn connect /* c */ (x: u8) {}",
            "fn connect(/* the receiver */ &self) {}",
            "fn connect<T /* > */>(x: T) {}",
        ] {
            assert_eq!(
                after(text, "connect"),
                Some(AFTER_FN | AFTER_FN_METHOD | AFTER_FN_PATH),
                "{text}"
            );
        }
    }

    #[test]
    fn declarations_without_a_body_are_no_functions() {
        for text in [
            "extern \"C\" { pub fn connect(socket: c_int, addr: *const sockaddr) -> c_int; }",
            "trait T { fn connect(&self); }",
            "link!(\"ws2_32.dll\" \"system\" fn connect(s: SOCKET, len: i32) -> i32);",
            "fn connect(buf: [u8; 4]) -> (u8, u8);",
        ] {
            assert_eq!(after(text, "connect"), Some(AFTER_FN), "{text}");
        }
        // a body, or what may hide one
        for text in [
            "fn connect(buf: [u8; 4]) -> (u8, u8) { (1, 2) }",
            "fn connect(x: u8) // no body?;\n{}",
            "fn connect(#[cfg(x)] a: u8, b: u8);",
            "fn connect(x: u8)",
        ] {
            assert_ne!(after(text, "connect"), Some(AFTER_FN), "{text}");
        }
    }

    #[test]
    fn calls_and_struct_literals_by_what_follows() {
        for (text, word, flags) in [
            ("lock(k)", "lock", CALLED),
            ("x.lock ()", "lock", CALLED),
            ("Guard::lock(k)", "lock", CALLED),
            ("collect::<Vec<_>>()", "collect", CALLED | LITERAL),
            ("f /* c */ (x)", "f", CALLED | LITERAL),
            ("fn lock(k: u8) {}", "lock", 0),
            ("Guard { key }", "Guard", LITERAL),
            ("a::Guard{ key }", "Guard", LITERAL),
            ("struct Guard { key: u8 }", "Guard", 0),
            ("fn new() -> Guard { x }", "Guard", 0),
            ("impl Guard {", "Guard", 0),
            ("impl Drop for Guard {", "Guard", 0),
            ("enum Guard { A }", "Guard", 0),
            ("let g: Guard = x;", "Guard", 0),
            ("Guard::new()", "Guard", 0),
            ("let lock = 1;", "lock", 0),
        ] {
            let f = stands(text, word).expect(text);
            assert_eq!(f & (CALLED | LITERAL), flags, "{text}");
        }
    }

    #[test]
    fn generics_before_an_identifier() {
        assert_eq!(after("impl<T> Pool<T> {", "Pool"), Some(AFTER_GENERICS));
        assert_eq!(after("impl<T>Pool<T> {", "Pool"), Some(AFTER_GENERICS));
        assert_eq!(after("fn make() -> Pool {", "Pool"), Some(0));
        assert_eq!(after("fn make() ->Pool {", "Pool"), Some(0));
        assert_eq!(
            after(">Pool", "Pool"),
            Some(AFTER_GENERICS),
            "first in the text"
        );
        assert_eq!(
            after("let v: Vec<u8> = Pool::new();", "Pool"),
            Some(0),
            "`=` after the `>`"
        );
    }
}
