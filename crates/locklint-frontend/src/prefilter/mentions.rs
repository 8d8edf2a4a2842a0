//! Names looked for in files that were not parsed, each as a whole identifier: a use of the
//! name anywhere, or only its definition as an item of some kinds (`fn name`, `struct name`).
//! Looked up in a file's [`Spelling`], so a file read once answers every round of names.

use super::spelling::{
    ident_hash, identifiers, Flags, Sieve, Spelling, AFTER_CONST, AFTER_ENUM, AFTER_FN_METHOD,
    AFTER_FN_PATH, AFTER_FOR, AFTER_GENERICS, AFTER_IMPL, AFTER_STATIC, AFTER_STRUCT, CALLED,
    LITERAL,
};
use std::collections::HashMap;

/// How a name must appear in a text for [`Mentions::find`] to report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Appears {
    /// Anywhere, as a whole identifier.
    Used,
    /// As the function or method called: followed by `(` (`name(..)`, `.name(..)`,
    /// `Type::name(..)`; not `fn name(`) or by a turbofish (`name::<T>(..)`).
    Called,
    /// As the type of a struct literal (`Name { .. }`, `path::Name { .. }`, `Name::<T> { .. }`;
    /// not `struct Name {`), or anywhere in a text that builds a `Self { .. }` literal (the
    /// `impl` it is in names its type).
    Literal,
    /// As the name of an item being defined with one of these keywords ([`FN`]; [`STRUCT`];
    /// [`CONST`], `mut` allowed between).
    Defined(Keywords),
    /// As the type of an `impl` block: after `impl`, after `for` (`impl Trait for Type`), or
    /// after the generics of the impl (`impl<T> Type<T>`; a `->` does not count).
    Implemented,
}

/// The item keywords a definition follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Keywords(Flags);

/// The definition of a function a path calls (`name(..)`, `Type::name(..)`): one whose
/// parameters may not start with `self`, with a body (a declaration is no function of the
/// project's).
pub const FN: Keywords = Keywords(AFTER_FN_PATH);
/// A method's definition: a function whose parameters may start with `self`, with a body.
pub const METHOD: Keywords = Keywords(AFTER_FN_METHOD);
/// A struct's or an enum's definition (an enum's one-field variants are typed like fields).
pub const STRUCT: Keywords = Keywords(AFTER_STRUCT | AFTER_ENUM);
/// A `const` or `static` item's definition.
pub const CONST: Keywords = Keywords(AFTER_CONST | AFTER_STATIC);

impl Appears {
    /// The ways of standing ([`Spelling`]'s flags) of which one must hold; 0 for any.
    fn mask(self) -> Flags {
        match self {
            Appears::Used => 0,
            Appears::Called => CALLED,
            Appears::Literal => LITERAL | SELF_LITERAL,
            Appears::Defined(Keywords(k)) => k,
            Appears::Implemented => AFTER_IMPL | AFTER_FOR | AFTER_GENERICS,
        }
    }
}

/// Not a way of standing of a [`Spelling`]: a text's flags are given it while the text builds a
/// `Self { .. }` literal, so that [`Appears::Literal`] holds for any identifier it spells.
const SELF_LITERAL: Flags = 1 << 15;

/// A finder for names given in order, each with how it must appear.
pub struct Mentions {
    /// Per identifier hash: the names (index as given) that are that identifier, with the
    /// ways one of which it must stand.
    names: HashMap<u64, Vec<(usize, Flags)>, foldhash::fast::FixedState>,
    /// Names that are not one identifier (`Type::f`, `r#type`): found where every identifier
    /// of theirs is used, which may find more files, never fewer.
    composite: Vec<(usize, Vec<u64>)>,
    /// The hashes of `names`, which most identifiers of a text are told apart from.
    sieve: Sieve,
}

impl Mentions {
    /// A finder for `names`, each with how it must appear (an empty name is never found).
    pub fn new<'n>(names: impl IntoIterator<Item = (&'n str, Appears)>) -> Mentions {
        let mut m = Mentions {
            names: HashMap::default(),
            composite: Vec::new(),
            sieve: Sieve::new(1, []),
        };
        for (i, (name, appears)) in names.into_iter().enumerate() {
            let mut parts = Vec::new();
            identifiers(name.as_bytes(), |start, end, h, _| {
                parts.push((end - start, h))
            });
            match parts.as_slice() {
                [] => {}
                [(len, h)] if *len == name.len() => {
                    m.names.entry(*h).or_default().push((i, appears.mask()))
                }
                _ => m
                    .composite
                    .push((i, parts.into_iter().map(|(_, h)| h).collect())),
            }
        }
        // about 64 bits per name: a few in a thousand identifiers pass it in vain
        let words = m.names.len().clamp(64, 1 << 16);
        m.sieve = Sieve::new(words, m.names.keys().copied());
        m
    }

    /// Whether `text` holds any of the names as it must appear.
    pub fn any(&self, text: &str) -> bool {
        !self.find(text).is_empty()
    }

    /// The indexes (in the order given to [`Mentions::new`]) of the names `text` holds as
    /// whole identifiers (as definitions where asked), each once, in order.
    pub fn find(&self, text: &str) -> Vec<usize> {
        self.find_in(&Spelling::of(text))
    }

    /// [`Mentions::find`] in a text read as `spelling`.
    pub fn find_in(&self, spelling: &Spelling) -> Vec<usize> {
        let mut out = Vec::new();
        let self_literal = spelling
            .flags(ident_hash(b"Self"))
            .is_some_and(|f| f & LITERAL != 0);
        let also = if self_literal { SELF_LITERAL } else { 0 };
        for (h, flags) in spelling.entries() {
            if !self.sieve.may_hold(h) {
                continue;
            }
            let flags = flags | also;
            if let Some(names) = self.names.get(&h) {
                out.extend(
                    names
                        .iter()
                        .filter(|(_, mask)| *mask == 0 || flags & mask != 0)
                        .map(|(i, _)| *i),
                );
            }
        }
        for (i, parts) in &self.composite {
            if parts.iter().all(|h| spelling.flags(*h).is_some()) {
                out.push(*i);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_whole_identifiers_and_definitions_follow_fn() {
        let m = Mentions::new([
            ("acquire", Appears::Used),
            ("lock", Appears::Used),
            ("release", Appears::Defined(FN)),
            ("KEY", Appears::Defined(CONST)),
            ("Pool", Appears::Defined(STRUCT)),
            ("connect", Appears::Defined(METHOD)),
        ]);
        assert!(m
            .find("let x = try_acquire(1); unlock(); released()")
            .is_empty());
        let mut found = m.find("a.acquire(); unlock(); lock(k)");
        found.sort();
        assert_eq!(found, vec![0, 1]);
        assert!(m.find("x.release(k)").is_empty());
        assert_eq!(m.find("pub async fn release(key: &str) {}"), vec![2]);
        assert!(
            m.find("pub async fn release(&self) {}").is_empty(),
            "a method: no path reaches it"
        );
        assert!(
            m.find("extern \"C\" { fn release(key: u8); }").is_empty(),
            "a declaration"
        );
        assert_eq!(m.find("fn\n    release()"), vec![2]);
        assert!(m.find("define_fn release").is_empty());
        assert_eq!(m.find("pub(crate) static mut KEY: &str = \"\";"), vec![3]);
        assert_eq!(m.find("const KEY: &str = \"\";"), vec![3]);
        assert!(m.find("let x = KEY; struct Other;").is_empty());
        assert_eq!(m.find("pub struct Pool<T> { c: T }"), vec![4]);
        assert_eq!(m.find("pub enum Pool { A(u8) }"), vec![4]);
        assert_eq!(m.find("fn connect(&self) {}"), vec![5]);
        assert!(m.find("fn connect(fd: i32) -> i32;").is_empty());
        assert!(m.find("fn make() -> Pool { Pool::new() }").is_empty());
        let ty = Mentions::new([("Pool", Appears::Implemented)]);
        for text in ["impl Pool {", "impl<T> Pool<T> {", "impl Drop for Pool {"] {
            assert_eq!(ty.find(text), vec![0], "{text}");
        }
        for text in [
            "fn f() -> Pool {",
            "let p: Vec<u8> = Pool::new();",
            "struct Pool;",
        ] {
            assert!(ty.find(text).is_empty(), "{text}");
        }
        assert!(Mentions::new([]).find("anything").is_empty());
        let gap = Mentions::new([("", Appears::Used), ("x", Appears::Used)]);
        assert_eq!(gap.find("let x = 1;"), vec![1], "indexes as given");
    }

    #[test]
    fn calls_and_struct_literals() {
        let m = Mentions::new([("acquire", Appears::Called), ("Guard", Appears::Literal)]);
        assert_eq!(m.find("let g = lock.acquire(k);"), vec![0]);
        assert_eq!(m.find("let g = acquire::<u8>(k);"), vec![0]);
        for text in [
            "pub fn acquire(k: u8) {}",
            "use locks::acquire;",
            "let f = acquire;",
        ] {
            assert!(m.find(text).is_empty(), "{text}");
        }
        assert_eq!(m.find("Guard { key: k }"), vec![1]);
        assert_eq!(m.find("x::Guard::<u8> { key: k }"), vec![1]);
        // `Self { .. }` builds the type of the `impl` it is in, which the text names
        assert_eq!(
            m.find("impl<'a> crate::Guard<'a> { fn new() -> Self { Self { key: 1 } } }"),
            vec![1]
        );
        for text in [
            "struct Guard { key: u8 }",
            "fn f(g: Guard) -> Guard { g }",
            "impl Guard { fn new() -> Self { Self::default() } }",
        ] {
            assert!(m.find(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn one_name_asked_several_ways_and_many_names() {
        let m = Mentions::new([
            ("release", Appears::Used),
            ("release", Appears::Defined(FN)),
        ]);
        assert_eq!(m.find("x.release()"), vec![0]);
        let mut both = m.find("fn release() {}");
        both.sort();
        assert_eq!(both, vec![0, 1]);
        // more names than the text has identifiers: looked up the other way round
        let names: Vec<String> = (0..50).map(|i| format!("name{i}")).collect();
        let many = Mentions::new(names.iter().map(|n| (n.as_str(), Appears::Used)));
        assert_eq!(many.find("call(name7)"), vec![7]);
        let few = Mentions::new([("name7", Appears::Used)]);
        let text: String = names.iter().map(|n| format!("{n}(); ")).collect();
        assert_eq!(few.find(&text), vec![0]);
    }

    #[test]
    fn names_of_several_identifiers_are_found_where_each_is_used() {
        let m = Mentions::new([("Pool::get", Appears::Used), ("r#type", Appears::Used)]);
        assert_eq!(m.find("let c = Pool::get(&p);"), vec![0]);
        assert_eq!(m.find("Pool::new(); c.get()"), vec![0], "a superset");
        assert!(m.find("Pool::new()").is_empty());
        assert_eq!(m.find("let r#type = 1;"), vec![1]);
    }

    #[test]
    fn among_thousands_of_names_exactly_those_a_text_spells_are_found() {
        let names: Vec<String> = (0..5000).map(|i| format!("helper_{i}")).collect();
        let m = Mentions::new(names.iter().map(|n| (n.as_str(), Appears::Used)));
        let text: String = (0..5000)
            .filter(|i| i % 7 == 3)
            .map(|i| format!("helper_{i}(); helpers_{i}(); "))
            .collect();
        let expected: Vec<usize> = (0..5000).filter(|i| i % 7 == 3).collect();
        assert_eq!(m.find(&text), expected);
        assert!(m.find("helper_5000 helper helper_").is_empty());
    }
}
